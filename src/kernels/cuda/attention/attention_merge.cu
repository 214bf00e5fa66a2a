// The tensor-core attention's merge kernel (attention.h, family 1): the fold of the split states
// the per-split items saved, in attention.h's fold order.
#include <cuda_bf16.h>

#include "kernels/cuda/attention/attention_kernels.h"
#include "kernels/cuda/attention/attention_mma_tile.cuh"
#include "kernels/cuda/cuda_status.h"

namespace vosti {
namespace {

using namespace attention_mma;

// Folds the saved split states of decode rows: CTA (x, y) folds head y of merge x. The states
// are staged in shared memory kMergeStageFloats of O at a time, every thread's loads issued
// together (loaded 8 splits ahead by the folding threads themselves, one 32k row's 64 splits took
// 29 us), the next stage's loads in flight while this one is folded; then thread e folds its
// head-dim pair 2e, 2e + 1 over the staged splits in split order: the operations of attention.h's
// fold, in its order. Split 0, which starts the fold, is taken before the loop, so that the loop
// body has no branch and its shared-memory loads and exponentials run ahead of the chain.
constexpr int kMergeThreads = 128;
constexpr int kMergeStageFloats = 4096;  // 16 KB: 32 splits of head_dim 128 (12 CTAs an SM by shared memory)
constexpr int kMergeO = kMergeStageFloats / 4 / kMergeThreads;  // float4 loads of O per thread and stage
constexpr int kMergeMl = (kMergeStageFloats / kAttnHeadDims[0] + kMergeThreads - 1) / kMergeThreads;  // (M, L) loads

template <typename OutT>
__global__ void __launch_bounds__(kMergeThreads)
    attention_merge_kernel(const AttentionMerge* __restrict__ merges, const int32_t* __restrict__ num_merges,
                           const float* __restrict__ partial_o, const float* __restrict__ partial_ml, int num_heads,
                           int hd, float c, OutT* __restrict__ out, int64_t out_row_stride) {
  __shared__ __align__(16) float stage_o[kMergeStageFloats];         // [splits][hd]
  __shared__ float2 stage_ml[kMergeStageFloats / kAttnHeadDims[0]];  // [splits] (M, L)
  if (static_cast<int>(blockIdx.x) >= *num_merges) return;
  const AttentionMerge mg = merges[blockIdx.x];
  const int head = static_cast<int>(blockIdx.y), tid = static_cast<int>(threadIdx.x), d = 2 * tid;
  const int64_t slot_head = static_cast<int64_t>(mg.first_partial) * num_heads + head;
  const int64_t ml_step = static_cast<int64_t>(num_heads) * 2, o_step = static_cast<int64_t>(num_heads) * hd;
  const int per_stage = kMergeStageFloats / hd, quads = hd / 4;
  // This thread's loads of the stage at s0: O quads tid + u kMergeThreads, (M, L) of splits tid + u kMergeThreads.
  float4 v[kMergeO];
  float2 mlv[kMergeMl];
  const auto load_stage = [&](int s0) {
    const int n = min(per_stage, mg.num_splits - s0);
#pragma unroll
    for (int u = 0; u < kMergeO; ++u) {
      const int i = tid + u * kMergeThreads, s = i / quads, q = i % quads;
      if (i < n * quads)
        v[u] = *reinterpret_cast<const float4*>(partial_o + slot_head * hd + (s0 + s) * o_step + 4 * q);
    }
#pragma unroll
    for (int u = 0; u < kMergeMl; ++u) {
      const int s = tid + u * kMergeThreads;
      if (s < n) mlv[u] = *reinterpret_cast<const float2*>(partial_ml + slot_head * 2 + (s0 + s) * ml_step);
    }
  };
  load_stage(0);
  float m = 0.f, l = 0.f, o0 = 0.f, o1 = 0.f;
  for (int s0 = 0; s0 < mg.num_splits; s0 += per_stage) {
    const int n = min(per_stage, mg.num_splits - s0);
    __syncthreads();  // the previous stage's folds are done with the buffers
#pragma unroll
    for (int u = 0; u < kMergeO; ++u) {
      const int i = tid + u * kMergeThreads;
      if (i < n * quads) *reinterpret_cast<float4*>(stage_o + i / quads * hd + 4 * (i % quads)) = v[u];
    }
#pragma unroll
    for (int u = 0; u < kMergeMl; ++u) {
      const int s = tid + u * kMergeThreads;
      if (s < n) stage_ml[s] = mlv[u];
    }
    __syncthreads();
    if (s0 + per_stage < mg.num_splits) load_stage(s0 + per_stage);
    if (d >= hd) continue;
    int s = 0;
    if (s0 == 0) {  // split 0 starts the fold
      const float2 o = *reinterpret_cast<const float2*>(stage_o + d);
      m = stage_ml[0].x;
      l = stage_ml[0].y;
      o0 = o.x;
      o1 = o.y;
      s = 1;
    }
#pragma unroll 4
    for (; s < n; ++s) {
      const float2 ml = stage_ml[s];
      const float2 o = *reinterpret_cast<const float2*>(stage_o + s * hd + d);
      const FoldCoef f = fold_coef(m, ml.x, c);
      l = fold(l, ml.y, f);
      o0 = fold(o0, o.x, f);
      o1 = fold(o1, o.y, f);
      m = f.m;
    }
  }
  if (d < hd) {
    float x[2] = {o0, o1};
    divide_row(x, l);
    store_pair(out + mg.row * out_row_stride + static_cast<int64_t>(head) * hd + d, x[0], x[1]);
  }
}

}  // namespace

Status launch_attention_merge(const AttentionWorkView& w, int num_heads, int head_dim, float c, DType out,
                              void* out_rows, int64_t out_row_stride, cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>(w.merge_grid), static_cast<unsigned>(num_heads));
  const float* partial_ml = w.partials + static_cast<int64_t>(w.partial_capacity) * num_heads * head_dim;
  if (out == DType::kF32) {
    attention_merge_kernel<float><<<grid, kMergeThreads, 0, stream>>>(w.merges, w.num_merges, w.partials, partial_ml,
                                                                      num_heads, head_dim, c,
                                                                      static_cast<float*>(out_rows), out_row_stride);
  } else {
    attention_merge_kernel<__nv_bfloat16>
        <<<grid, kMergeThreads, 0, stream>>>(w.merges, w.num_merges, w.partials, partial_ml, num_heads, head_dim, c,
                                             static_cast<__nv_bfloat16*>(out_rows), out_row_stride);
  }
  return cuda_launch_status("attention merge");
}

}  // namespace vosti
