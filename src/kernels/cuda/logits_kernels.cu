// Logits post-processing; the reduction order is documented in logits_kernels.h.
#include <climits>
#include <string>

#include "kernels/cuda/cuda_status.h"
#include "kernels/cuda/logits_kernels.h"

namespace vosti {
namespace {

constexpr int kLogitsWarps = kLogitsThreads / 32;

__device__ __forceinline__ float sanitize(float x) { return x != x ? -INFINITY : x; }

// a ranks before b in the total order (value desc, id asc). REQUIRES: no NaN.
__device__ __forceinline__ bool ranks_before(float va, int32_t ia, float vb, int32_t ib) {
  return va > vb || (va == vb && ia < ib);
}

// e(x, m) of the header: exactly 1 where x == m (+0 == -0, and infinities), else __expf(x - m)
// (ex2.approx of (x - m) * log2(e): a few ulp, ample for a normaliser). REQUIRES: x <= m.
__device__ __forceinline__ float exp_from_max(float x, float m) { return x == m ? 1.0f : __expf(__fsub_rn(x, m)); }

// Calls f(i, x_i) for the row elements thread t owns, in the order of the header: the groups
// [4g, 4g + 4) for g = t, t + kLogitsThreads, ..., elements in increasing order. kVec4 (V % 4 == 0
// and 16-byte aligned rows) only changes how a group is loaded, never the order.
template <bool kVec4, typename F>
__device__ __forceinline__ void for_owned(const float* row, int64_t vocab, F f) {
  const int64_t num_groups = (vocab + 3) / 4;
  for (int64_t g = threadIdx.x; g < num_groups; g += kLogitsThreads) {
    if constexpr (kVec4) {
      const float4 v = *reinterpret_cast<const float4*>(row + g * 4);
      f(g * 4, v.x);
      f(g * 4 + 1, v.y);
      f(g * 4 + 2, v.z);
      f(g * 4 + 3, v.w);
    } else {
      for (int64_t i = g * 4; i < g * 4 + 4 && i < vocab; ++i) f(i, row[i]);
    }
  }
}

template <bool kVec4>
__global__ void __launch_bounds__(kLogitsThreads)
    logits_postprocess_kernel(const float* logits, int64_t vocab, LogitsRowStats* stats, float* logprobs) {
  __shared__ float warp_value[kLogitsWarps];
  __shared__ int32_t warp_id[kLogitsWarps];
  __shared__ float warp_sum[kLogitsWarps];
  const int64_t r = blockIdx.x;
  const float* row = logits + r * vocab;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;

  // One read of the row. Each thread keeps its best (value, id) m_t and a sum z_t of
  // exp_from_max(x, m_t), scaled by exp_from_max(m_old, m_new) whenever m_t rises.
  float m_t = -INFINITY;
  int32_t id_t = INT_MAX;
  float z_t = 0.0f;
  for_owned<kVec4>(row, vocab, [&](int64_t i, float x) {
    x = sanitize(x);
    if (ranks_before(x, static_cast<int32_t>(i), m_t, id_t)) {
      if (x > m_t) z_t = __fmul_rn(z_t, exp_from_max(m_t, x));
      m_t = x;
      id_t = static_cast<int32_t>(i);
    }
    z_t = __fadd_rn(z_t, exp_from_max(x, m_t));
  });
  // The row's max M and argmax: exact under the total order, so the combine order does not matter.
  float best = m_t;
  int32_t best_id = id_t;
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) {
    const float v = __shfl_xor_sync(0xffffffffu, best, offset);
    const int32_t id = __shfl_xor_sync(0xffffffffu, best_id, offset);
    if (ranks_before(v, id, best, best_id)) best = v, best_id = id;
  }
  if (lane == 0) warp_value[warp] = best, warp_id[warp] = best_id;
  __syncthreads();
  best = warp_value[0], best_id = warp_id[0];
#pragma unroll
  for (int w = 1; w < kLogitsWarps; ++w)
    if (ranks_before(warp_value[w], warp_id[w], best, best_id)) best = warp_value[w], best_id = warp_id[w];

  // Z = the threads' z_t * exp_from_max(m_t, M): warp butterfly, then warps in order.
  float z = __fmul_rn(z_t, exp_from_max(m_t, best));
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) z = __fadd_rn(z, __shfl_xor_sync(0xffffffffu, z, offset));
  if (lane == 0) warp_sum[warp] = z;
  __syncthreads();
  z = warp_sum[0];
#pragma unroll
  for (int w = 1; w < kLogitsWarps; ++w) z = __fadd_rn(z, warp_sum[w]);
  const double log_sum = log(static_cast<double>(z));
  if (threadIdx.x == 0) stats[r] = LogitsRowStats{log_sum, best, best_id};
  if (logprobs == nullptr) return;
  // Every thread has read its own elements above and writes only those, so logprobs may alias logits.
  float* out = logprobs + r * vocab;
  for_owned<kVec4>(row, vocab, [&](int64_t i, float x) {
    x = sanitize(x);
    const float d = x == best ? 0.0f : __fsub_rn(x, best);
    out[i] = static_cast<float>(__dsub_rn(static_cast<double>(d), log_sum));
  });
}

}  // namespace

Status logits_postprocess(const float* logits, int64_t m, int64_t vocab, LogitsRowStats* stats, float* logprobs,
                          cudaStream_t stream) {
  if (m < 0 || m > INT_MAX)
    return invalid_argument("logits_postprocess: row count m=" + std::to_string(m) + " out of range");
  if (vocab < 1 || vocab > INT_MAX) {
    return invalid_argument("logits_postprocess: vocabulary size " + std::to_string(vocab) + " out of range");
  }
  if (logits == nullptr || stats == nullptr) return invalid_argument("logits_postprocess: null device pointer");
  if (m == 0) return Status();
  const bool vec4 = vocab % 4 == 0 && reinterpret_cast<uintptr_t>(logits) % 16 == 0 &&
                    (logprobs == nullptr || reinterpret_cast<uintptr_t>(logprobs) % 16 == 0);
  if (vec4) {
    logits_postprocess_kernel<true>
        <<<static_cast<unsigned>(m), kLogitsThreads, 0, stream>>>(logits, vocab, stats, logprobs);
  } else {
    logits_postprocess_kernel<false>
        <<<static_cast<unsigned>(m), kLogitsThreads, 0, stream>>>(logits, vocab, stats, logprobs);
  }
  return cuda_launch_status("logits_postprocess");
}

}  // namespace vosti
