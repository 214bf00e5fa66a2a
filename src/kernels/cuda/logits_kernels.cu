// Logits post-processing; the reduction order is documented in logits_kernels.h.
#include <climits>
#include <string>

#include "kernels/cuda/cuda_status.h"
#include "kernels/cuda/logits_kernels.h"

namespace vosti {
namespace {

constexpr int kLogitsWarps = kLogitsThreads / 32;
constexpr int kGroupsPerThread = static_cast<int>(kLogitsChunk / 4 / kLogitsThreads);
static_assert(kLogitsChunk % (4 * kLogitsThreads) == 0, "a chunk is whole groups of four for every thread");

// One chunk's partial: its max, argmax and sum relative to its max (step 2 of the header).
struct ChunkStats {
  float max;
  int32_t argmax;
  float z;
  float pad;
};

// NaN -> -inf, every other value unchanged (fmaxf returns the other operand for a NaN).
__device__ __forceinline__ float sanitize(float x) { return fmaxf(x, -INFINITY); }

// a ranks before b in the total order (value desc, id asc). REQUIRES: no NaN.
__device__ __forceinline__ bool ranks_before(float va, int32_t ia, float vb, int32_t ib) {
  return va > vb || (va == vb && ia < ib);
}

// e(x, m) of the header: exactly 1 where x == m (+0 == -0, and infinities), else __expf(x - m)
// (ex2.approx of (x - m) * log2(e): a few ulp, ample for a normaliser). REQUIRES: x <= m, no NaN.
__device__ __forceinline__ float exp_from_max(float x, float m) { return x == m ? 1.0f : __expf(__fsub_rn(x, m)); }

// The elements thread t owns in one chunk (the groups of the header), loaded up front: all of a
// thread's loads are in flight before the first is used. Indices fit int32 (V < 2^31).
struct OwnedElements {
  float4 v[kGroupsPerThread];
};

// The row index of element 0 of the thread's j-th group in `chunk`.
__device__ __forceinline__ int32_t group_start(int32_t chunk, int j) {
  return chunk * static_cast<int32_t>(kLogitsChunk) + (static_cast<int32_t>(threadIdx.x) + j * kLogitsThreads) * 4;
}

// kVec4 (V % 4 == 0 and 16-byte aligned rows) changes how elements are loaded, never which;
// kFull (the chunk lies below V) only drops the bounds checks.
template <bool kVec4, bool kFull>
__device__ __forceinline__ OwnedElements load_owned(const float* row, int32_t vocab, int32_t chunk) {
  OwnedElements e;
#pragma unroll
  for (int j = 0; j < kGroupsPerThread; ++j) {
    const int32_t i = group_start(chunk, j);
    if constexpr (kVec4) {
      e.v[j] = kFull || i < vocab ? *reinterpret_cast<const float4*>(row + i) : make_float4(0.f, 0.f, 0.f, 0.f);
    } else {
      e.v[j].x = kFull || i < vocab ? row[i] : 0.f;
      e.v[j].y = kFull || i + 1 < vocab ? row[i + 1] : 0.f;
      e.v[j].z = kFull || i + 2 < vocab ? row[i + 2] : 0.f;
      e.v[j].w = kFull || i + 3 < vocab ? row[i + 3] : 0.f;
    }
  }
  return e;
}

// Calls f(i, x_i) for the owned elements below vocab in increasing i (kReverse: decreasing).
template <bool kFull, bool kReverse = false, typename F>
__device__ __forceinline__ void visit(const OwnedElements& e, int32_t vocab, int32_t chunk, F f) {
#pragma unroll
  for (int jj = 0; jj < kGroupsPerThread; ++jj) {
    const int j = kReverse ? kGroupsPerThread - 1 - jj : jj;
    const int32_t i = group_start(chunk, j);
    const float x[4] = {e.v[j].x, e.v[j].y, e.v[j].z, e.v[j].w};
#pragma unroll
    for (int kk = 0; kk < 4; ++kk) {
      const int k = kReverse ? 3 - kk : kk;
      if (kFull || i + k < vocab) f(i + k, x[k]);
    }
  }
}

// Step 1 for one thread: its max m_t (the value at its lowest index holding it), that index
// (INT_MAX if it owns nothing) and z_t.
struct ThreadPartial {
  float max;
  int32_t argmax;
  float z;
};

template <bool kFull>
__device__ __forceinline__ ThreadPartial thread_partial(const OwnedElements& e, int32_t vocab, int32_t chunk) {
  float m = -INFINITY;
  visit<kFull>(e, vocab, chunk, [&](int32_t, float x) { m = fmaxf(m, x); });  // NaN ignored, i.e. read as -inf
  int32_t id = INT_MAX;
  if (m == -INFINITY) {  // every owned element is -inf or NaN: the first owned one
    if (group_start(chunk, 0) < vocab) id = group_start(chunk, 0);
  } else {
    visit<kFull, true>(e, vocab, chunk, [&](int32_t i, float x) {
      if (x == m) id = i;  // the last hit of the reversed walk is the lowest index
    });
  }
  // The value stored at id, so that +0 / -0 is the one stored there whatever fmaxf chose.
  float at_id = m;
  if (m == 0.0f) {
    visit<kFull>(e, vocab, chunk, [&](int32_t i, float x) {
      if (i == id) at_id = x;
    });
  }
  float z = 0.0f;
  visit<kFull>(e, vocab, chunk, [&](int32_t, float x) { z = __fadd_rn(z, exp_from_max(sanitize(x), at_id)); });
  return {at_id, id, z};
}

// Steps 1-2: grid (C, m). At least four blocks a multiprocessor, so that loads of some blocks
// overlap the arithmetic of others.
template <bool kVec4>
__global__ void __launch_bounds__(kLogitsThreads, 4)
    logits_chunk_kernel(const float* logits, int32_t vocab, int num_chunks, ChunkStats* partials) {
  __shared__ float warp_value[kLogitsWarps];
  __shared__ int32_t warp_id[kLogitsWarps];
  __shared__ float warp_sum[kLogitsWarps];
  const int64_t r = blockIdx.y;
  const int32_t c = static_cast<int32_t>(blockIdx.x);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const float* row = logits + r * vocab;
  ThreadPartial p;
  if ((c + 1) * kLogitsChunk <= vocab) {
    p = thread_partial<true>(load_owned<kVec4, true>(row, vocab, c), vocab, c);
  } else {
    p = thread_partial<false>(load_owned<kVec4, false>(row, vocab, c), vocab, c);
  }
  float best = p.max;
  int32_t best_id = p.argmax;
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
  float z = __fmul_rn(p.z, exp_from_max(p.max, best));
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) z = __fadd_rn(z, __shfl_xor_sync(0xffffffffu, z, offset));
  if (lane == 0) warp_sum[warp] = z;
  __syncthreads();
  if (threadIdx.x != 0) return;
  z = warp_sum[0];
#pragma unroll
  for (int w = 1; w < kLogitsWarps; ++w) z = __fadd_rn(z, warp_sum[w]);
  partials[r * num_chunks + c] = ChunkStats{best, best_id, z, 0.f};
}

// Step 3: one thread per row.
__global__ void logits_combine_kernel(const ChunkStats* partials, int64_t m, int num_chunks, LogitsRowStats* stats) {
  const int64_t r = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (r >= m) return;
  const ChunkStats* p = partials + r * num_chunks;
  float best = p[0].max;
  int32_t best_id = p[0].argmax;
  for (int c = 1; c < num_chunks; ++c)
    if (ranks_before(p[c].max, p[c].argmax, best, best_id)) best = p[c].max, best_id = p[c].argmax;
  float z = 0.0f;
  for (int c = 0; c < num_chunks; ++c) z = __fadd_rn(z, __fmul_rn(p[c].z, exp_from_max(p[c].max, best)));
  stats[r] = LogitsRowStats{log(static_cast<double>(z)), best, best_id};
}

// The logprobs row: grid (C, m). Each thread rewrites only elements it has read, so lp may alias logits.
template <bool kVec4, bool kFull>
__device__ __forceinline__ void write_logprobs(const float* row, int32_t vocab, int32_t c, float best, double log_sum,
                                               float* out) {
  const OwnedElements e = load_owned<kVec4, kFull>(row, vocab, c);
  auto lp = [&](float x) {
    x = sanitize(x);
    const float d = x == best ? 0.0f : __fsub_rn(x, best);
    return static_cast<float>(__dsub_rn(static_cast<double>(d), log_sum));
  };
#pragma unroll
  for (int j = 0; j < kGroupsPerThread; ++j) {
    const int32_t i = group_start(c, j);
    if constexpr (kVec4) {  // whole 16-byte stores: every warp store covers whole sectors
      if (kFull || i < vocab)
        *reinterpret_cast<float4*>(out + i) = make_float4(lp(e.v[j].x), lp(e.v[j].y), lp(e.v[j].z), lp(e.v[j].w));
    } else {
      if (kFull || i < vocab) out[i] = lp(e.v[j].x);
      if (kFull || i + 1 < vocab) out[i + 1] = lp(e.v[j].y);
      if (kFull || i + 2 < vocab) out[i + 2] = lp(e.v[j].z);
      if (kFull || i + 3 < vocab) out[i + 3] = lp(e.v[j].w);
    }
  }
}

template <bool kVec4>
__global__ void __launch_bounds__(kLogitsThreads, 4)
    logprobs_kernel(const float* logits, int32_t vocab, const LogitsRowStats* stats, float* logprobs) {
  const int64_t r = blockIdx.y;
  const int32_t c = static_cast<int32_t>(blockIdx.x);
  const float best = stats[r].max;
  const double log_sum = stats[r].log_sum;
  if ((c + 1) * kLogitsChunk <= vocab) {
    write_logprobs<kVec4, true>(logits + r * vocab, vocab, c, best, log_sum, logprobs + r * vocab);
  } else {
    write_logprobs<kVec4, false>(logits + r * vocab, vocab, c, best, log_sum, logprobs + r * vocab);
  }
}

int chunks_of(int64_t vocab) { return static_cast<int>((vocab + kLogitsChunk - 1) / kLogitsChunk); }

}  // namespace

size_t logits_workspace_bytes(int64_t m, int64_t vocab) {
  if (m <= 0 || vocab <= 0) return 0;
  return static_cast<size_t>(m) * static_cast<size_t>(chunks_of(vocab)) * sizeof(ChunkStats);
}

Status logits_postprocess(const float* logits, int64_t m, int64_t vocab, LogitsRowStats* stats, float* logprobs,
                          void* workspace, size_t workspace_bytes, cudaStream_t stream) {
  if (m < 0 || m > 65535) {
    return invalid_argument("logits_postprocess: row count m=" + std::to_string(m) +
                            " out of range (at most 65535 rows a call)");
  }
  if (vocab < 1 || vocab > INT_MAX - kLogitsChunk) {  // element indices stay in int32
    return invalid_argument("logits_postprocess: vocabulary size " + std::to_string(vocab) + " out of range");
  }
  if (logits == nullptr || stats == nullptr) return invalid_argument("logits_postprocess: null device pointer");
  if (m == 0) return Status();
  if (workspace == nullptr || workspace_bytes < logits_workspace_bytes(m, vocab)) {
    return invalid_argument("logits_postprocess: workspace of " + std::to_string(workspace_bytes) + " bytes, " +
                            std::to_string(logits_workspace_bytes(m, vocab)) +
                            " needed (logits_workspace_bytes(m, vocab))");
  }
  const int num_chunks = chunks_of(vocab);
  auto* partials = static_cast<ChunkStats*>(workspace);
  const bool vec4 = vocab % 4 == 0 && reinterpret_cast<uintptr_t>(logits) % 16 == 0 &&
                    (logprobs == nullptr || reinterpret_cast<uintptr_t>(logprobs) % 16 == 0);
  const dim3 grid(static_cast<unsigned>(num_chunks), static_cast<unsigned>(m));
  if (vec4) {
    logits_chunk_kernel<true>
        <<<grid, kLogitsThreads, 0, stream>>>(logits, static_cast<int32_t>(vocab), num_chunks, partials);
  } else {
    logits_chunk_kernel<false>
        <<<grid, kLogitsThreads, 0, stream>>>(logits, static_cast<int32_t>(vocab), num_chunks, partials);
  }
  VOSTI_RETURN_IF_ERROR(cuda_launch_status("logits_postprocess (chunks)"));
  logits_combine_kernel<<<static_cast<unsigned>((m + 127) / 128), 128, 0, stream>>>(partials, m, num_chunks, stats);
  VOSTI_RETURN_IF_ERROR(cuda_launch_status("logits_postprocess (combine)"));
  if (logprobs == nullptr) return Status();
  if (vec4) {
    logprobs_kernel<true><<<grid, kLogitsThreads, 0, stream>>>(logits, static_cast<int32_t>(vocab), stats, logprobs);
  } else {
    logprobs_kernel<false><<<grid, kLogitsThreads, 0, stream>>>(logits, static_cast<int32_t>(vocab), stats, logprobs);
  }
  return cuda_launch_status("logits_postprocess (logprobs)");
}

}  // namespace vosti
