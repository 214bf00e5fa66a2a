// The one-warp-per-(query, head) reference attention (attention_reference.h).
#include "tests/model_cuda/attention_reference.h"

#include <cuda_bf16.h>

#include "kernels/cuda/attention/attention_device.cuh"
#include "kernels/cuda/cuda_status.h"

namespace vosti::cuda_test {
namespace {

using namespace attention_detail;

constexpr int kRefWarpsPerBlock = 4;
constexpr int kRefOutPerLane = kMaxCudaHeadDim / 32;

// blockIdx.x: the query row; warp w of blockIdx.y: head blockIdx.y * kRefWarpsPerBlock + w.
// The row index selects the query's inputs and output and nothing else.
template <typename KvT, typename OutT>
__global__ void __launch_bounds__(kRefWarpsPerBlock * 32)
    reference_attention_kernel(const float* __restrict__ q, int64_t q_row_stride, int num_heads,
                               const int32_t* __restrict__ positions, const int32_t* __restrict__ row_seq,
                               const int32_t* __restrict__ block_tables, const int32_t* __restrict__ block_table_stride,
                               float scale, int window, OutT* __restrict__ out, int64_t out_row_stride,
                               CudaKvLayer kv) {
  __shared__ __align__(16) float q_smem[kRefWarpsPerBlock][kMaxCudaHeadDim];
  const int warp = threadIdx.x >> 5;
  const int lane = threadIdx.x & 31;
  const int64_t r = blockIdx.x;
  const int h = static_cast<int>(blockIdx.y) * kRefWarpsPerBlock + warp;
  if (h >= num_heads) return;  // a whole warp; only warp-level synchronisation below
  const int hd = kv.head_dim;
  const int kv_head = h / (num_heads / kv.num_kv_heads);
  float* qs = q_smem[warp];  // [hd]
  const float* qh = q + r * q_row_stride + static_cast<int64_t>(h) * hd;
  for (int d = lane; d < hd; d += 32) qs[d] = qh[d];
  __syncwarp();

  OutT* oh = out + r * out_row_stride + static_cast<int64_t>(h) * hd;  // [hd]
  const int32_t p = positions[r];
  if (p < 0) {
    for (int d = lane; d < hd; d += 32) store_out(oh, d, __int_as_float(0x7fc00000));
    return;
  }
  const int32_t* table = block_tables + static_cast<int64_t>(row_seq[r]) * *block_table_stride;
  const KvT* kc = static_cast<const KvT*>(kv.k);
  const KvT* vc = static_cast<const KvT*>(kv.v);
  const int quads = hd / 4;

  float o[kRefOutPerLane];  // O[d] for d = lane + 32 * i
#pragma unroll
  for (int i = 0; i < kRefOutPerLane; ++i) o[i] = 0.f;
  float run_max = -INFINITY;                            // M
  float run_sum = 0.f;                                  // L
  const int32_t f = attention_window_first(p, window);  // the first position read
  const int num_tiles = p / kKvTile + 1;
  for (int t = f / kKvTile; t < num_tiles; ++t) {
    const int j = t * kKvTile + lane;
    const bool valid = j >= f && j <= p;
    float s = -INFINITY;
    long long at = 0;  // element offset of (slot of j, kv_head) in kv.k / kv.v
    if (valid) {
      const int64_t block = table[j / kv.block_size];
      at = kv_offset(kv, block, kv_head, j % kv.block_size);
      const KvT* kj = kc + at;
      const float4* q4 = reinterpret_cast<const float4*>(qs);
      float dot = 0.f;
      for (int c = 0; c < quads; ++c) {
        const float4 kk = load_kv4(kj + 4 * c);
        const float4 qq = q4[c];
        dot = __fmaf_rn(qq.x, kk.x, dot);
        dot = __fmaf_rn(qq.y, kk.y, dot);
        dot = __fmaf_rn(qq.z, kk.z, dot);
        dot = __fmaf_rn(qq.w, kk.w, dot);
      }
      s = __fmul_rn(dot, scale);
    }
    const float new_max = fmaxf(run_max, warp_max(s));  // finite: the tile holds a position in f..p
    const float pj = valid ? expf(__fsub_rn(s, new_max)) : 0.f;
    const float tile_sum = warp_sum(pj);
    const float alpha = expf(__fsub_rn(run_max, new_max));  // expf(-inf) = 0 for the first tile
    run_sum = __fadd_rn(__fmul_rn(run_sum, alpha), tile_sum);
#pragma unroll
    for (int i = 0; i < kRefOutPerLane; ++i) o[i] = __fmul_rn(o[i], alpha);
    const int tile_len = min(kKvTile, p - t * kKvTile + 1);
    for (int jj = max(0, f - t * kKvTile); jj < tile_len; ++jj) {
      const float w = __shfl_sync(kFullMask, pj, jj);
      const KvT* vj = vc + __shfl_sync(kFullMask, at, jj);
#pragma unroll
      for (int i = 0; i < kRefOutPerLane; ++i) {
        const int d = lane + 32 * i;
        if (d < hd) o[i] = __fmaf_rn(w, load_kv(vj + d), o[i]);
      }
    }
    run_max = new_max;
  }
#pragma unroll
  for (int i = 0; i < kRefOutPerLane; ++i) {
    const int d = lane + 32 * i;
    if (d < hd) store_out(oh, d, __fdiv_rn(o[i], run_sum));
  }
}

}  // namespace

Status reference_attention(const AttentionArgs& a, CudaKvLayer kv, cudaStream_t stream) {
  if (a.m == 0) return Status();
  const dim3 grid(static_cast<unsigned>(a.m),
                  static_cast<unsigned>((a.num_heads + kRefWarpsPerBlock - 1) / kRefWarpsPerBlock));
  const unsigned threads = kRefWarpsPerBlock * 32;
  const auto launch = [&](auto kv_tag, auto out_tag) {
    using KvT = decltype(kv_tag);
    using OutT = decltype(out_tag);
    reference_attention_kernel<KvT, OutT><<<grid, threads, 0, stream>>>(
        a.q, a.q_row_stride, a.num_heads, a.positions, a.row_seq, a.block_tables, a.block_table_stride, a.scale,
        a.window, static_cast<OutT*>(a.out), a.out_row_stride, kv);
  };
  const bool f32_kv = kv.dtype == DType::kF32;
  if (a.out_dtype == DType::kF32) {
    f32_kv ? launch(float{}, float{}) : launch(__nv_bfloat16{}, float{});
  } else {
    f32_kv ? launch(float{}, __nv_bfloat16{}) : launch(__nv_bfloat16{}, __nv_bfloat16{});
  }
  return cuda_launch_status("reference_attention");
}

}  // namespace vosti::cuda_test
