// Planted split-path violations for the tensor-core attention's split-path comparison
// (verify/analyzer/attention_chains.py; verify/analyzer/mutants.py compiles this file to sm_80 PTX
// and runs the comparison on it). It includes the real kernels (src/kernels/cuda/attention/: the
// streaming, decode and merge kernels' translation units)
// and adds, with one more template argument kPlant:
//   planted_fold_kernel: a copy of attention_mma_kernel<kHd, OutT, true, 1> (the folded path) whose
//     tile step is a copy of tile_step and softmax_block:
//       0  the clean copy;
//       1  each lane's class sum l adds the tile's exponentials in decreasing j;
//       2  the O rescale is skipped where alpha > 0.99 (not only where alpha == 1);
//   planted_merge_kernel: attention_merge_kernel's fold without its staging:
//       0  the clean copy (splits folded in order);
//       3  the splits folded last to first;
//   planted_decode_kernel: a copy of attention_decode_kernel (which folds a decode row's splits
//     itself where an item holds several) whose fold step is a copy of decode_end_split's:
//       0  the clean copy;
//       4  L folded before the row's quad sum (each lane folds its own class sum l, then the quad
//          sums the folded values).
// Each kernel is batch invariant on its own; only the comparison of the paths catches them. Never
// linked into the engine.
#include "kernels/cuda/attention/attention_decode.cu"
#include "kernels/cuda/attention/attention_merge.cu"
#include "kernels/cuda/attention/attention_mma_stream.cu"

namespace vosti {
namespace {

template <int kPlant>
__device__ __forceinline__ void planted_softmax(float (&s)[kTileNt][4], float (&m)[2], float (&l)[2], float (&alpha)[2],
                                                uint32_t (&pa)[kTile / 16][4], float c) {
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    float mx = -INFINITY;
#pragma unroll
    for (int nt = 0; nt < kTileNt; ++nt) mx = fmaxf(mx, fmaxf(s[nt][2 * i], s[nt][2 * i + 1]));
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
    const float m_new = fmaxf(m[i], mx);
    alpha[i] = ex2(__fmul_rn(__fsub_rn(m[i], m_new), c));
    const float m_scaled = __fmul_rn(m_new, c);
#pragma unroll
    for (int nt = 0; nt < kTileNt; ++nt)
#pragma unroll
      for (int e = 0; e < 2; ++e) s[nt][2 * i + e] = ex2(__fmaf_rn(s[nt][2 * i + e], c, -m_scaled));
    float sum = 0.f;
#pragma unroll
    for (int k = 0; k < kTileNt; ++k) {
      const int nt = kPlant == 1 ? kTileNt - 1 - k : k;
#pragma unroll
      for (int u = 0; u < 2; ++u) sum = __fadd_rn(sum, s[nt][2 * i + (kPlant == 1 ? 1 - u : u)]);
    }
    l[i] = __fadd_rn(__fmul_rn(l[i], alpha[i]), sum);
    m[i] = m_new;
  }
#pragma unroll
  for (int kk = 0; kk < kTile / 16; ++kk) {
    pa[kk][0] = pack_bf16(s[2 * kk][0], s[2 * kk][1]);
    pa[kk][1] = pack_bf16(s[2 * kk][2], s[2 * kk][3]);
    pa[kk][2] = pack_bf16(s[2 * kk + 1][0], s[2 * kk + 1][1]);
    pa[kk][3] = pack_bf16(s[2 * kk + 1][2], s[2 * kk + 1][3]);
  }
}

template <int kN, int kPlant>
__device__ __forceinline__ void planted_rescale(float (&o)[kN][4], const float (&alpha)[2]) {
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    if (kPlant == 2 ? !(alpha[i] > 0.99f) : alpha[i] != 1.f) {
      asm volatile("");
#pragma unroll
      for (int dt = 0; dt < kN; ++dt)
#pragma unroll
        for (int e = 0; e < 2; ++e) o[dt][2 * i + e] = __fmul_rn(o[dt][2 * i + e], alpha[i]);
    }
  }
}

// tile_step with one block a warp.
template <int kHd, int kPlant>
__device__ __forceinline__ void planted_tile_step(WarpState<kHd, 1>& st, uint32_t q_rows, uint32_t k_stage,
                                                  uint32_t v_stage, uint32_t zero_row, int tile, bool mask,
                                                  const RowSpan& span, float c) {
  const int lane = threadIdx.x & 31;
  const uint32_t q_lane = swizzled<kHd>(lane & 15, lane >> 4);
  const uint32_t k_lane = swizzled<kHd>((lane & 7) + ((lane >> 4) << 3), (lane >> 3) & 1);
  const uint32_t v_lane = swizzled<kHd>((lane & 7) + (((lane >> 3) & 1) << 3), lane >> 4);
  float s[kTileNt][4];
#pragma unroll
  for (int nt = 0; nt < kTileNt; ++nt)
#pragma unroll
    for (int e = 0; e < 4; ++e) s[nt][e] = 0.f;
#pragma unroll
  for (int kk = 0; kk < kHd / 16; ++kk) {
    uint32_t a[4];
    ldsm_x4(a, q_rows + (q_lane ^ (kk * 32)));
#pragma unroll
    for (int np = 0; np < kTileNt / 2; ++np) {
      uint32_t f[4];
      ldsm_x4(f, k_stage + np * 16 * kHd * 2 + (k_lane ^ (kk * 32)));
      mma_bf16(s[2 * np], a, f[0], f[1]);
      mma_bf16(s[2 * np + 1], a, f[2], f[3]);
    }
  }
  if (mask) {
    int p[2], f[2];
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      p[i] = span.position<1>(0, i);
      f[i] = attention_window_first(p[i], span.window);
    }
    mask_block(s, p, f, tile);
  }
  uint32_t pa[kTile / 16][4];
  float alpha[2];
  planted_softmax<kPlant>(s, st.m[0], st.l[0], alpha, pa, c);
  planted_rescale<kHd / 8, kPlant>(st.o[0], alpha);
  const int v_row = (lane & 7) + (((lane >> 3) & 1) << 3);
#pragma unroll
  for (int kk = 0; kk < kTile / 16; ++kk) {
    const bool zero = mask && tile * kTile + kk * 16 + v_row > span.last();
#pragma unroll
    for (int dp = 0; dp < kHd / 16; ++dp) {
      uint32_t f[4];
      ldsm_x4_trans(f, zero ? zero_row : v_stage + kk * 16 * kHd * 2 + (v_lane ^ (dp * 32)));
      mma_bf16(st.o[0][2 * dp], pa[kk], f[0], f[1]);
      mma_bf16(st.o[0][2 * dp + 1], pa[kk], f[2], f[3]);
    }
  }
}

// attention_mma_kernel<kHd, OutT, true, 1> with planted_tile_step.
template <int kHd, typename OutT, int kPlant>
__global__ void __launch_bounds__(kThreads, 1) planted_fold_kernel(const MmaParams p) {
  using S = Shape<kHd, 1, true>;
  extern __shared__ __align__(128) char smem[];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int kv_head = static_cast<int>(blockIdx.x);
  const uint32_t base = smem_addr(smem);
  const uint32_t q_rows = base + S::kQ + warp * 16 * kHd * 2;
  FoldO<kHd, 1, true> fold_o;
  fold_o.at = reinterpret_cast<float*>(smem + S::kAcc) + warp * (kHd / 2) * 32 + lane;
  if (threadIdx.x == 0) *reinterpret_cast<uint4*>(smem + S::kZero) = make_uint4(0, 0, 0, 0);
  WarpState<kHd, 1> state;
  int rows = 0, split = 0, split_end = 0;
  const auto begin_item = [&](const AttentionWork& w) {
    rows = w.num_positions * p.group;
    split = w.split_begin;
    split_end = (w.split_begin + 1) * p.tiles_per_split;
    load_q<kHd, S::kRows>(p, w, kv_head, smem + S::kQ);
    reset(state);
    fold_o.m[0][0] = fold_o.m[0][1] = fold_o.l[0][0] = fold_o.l[0][1] = 0.f;
#pragma unroll
    for (int dt = 0; dt < kHd / 8; ++dt) fold_o.store(0, dt, make_float4(0.f, 0.f, 0.f, 0.f));
  };
  const auto tile = [&](const AttentionWork& w, const ItemTiles& tiles, int t, int stage) {
    if (warp * 16 < rows) {
      if (t + p.tiles_per_split == split_end) {
        asm volatile("");
        reset(state);
      }
      planted_tile_step<kHd, kPlant>(
          state, q_rows, base + S::kK + stage * S::kTileBytes, base + S::kV + stage * S::kTileBytes, base + S::kZero, t,
          tiles.masked(t, p.window), RowSpan{w.first_position, rows, p.group, p.window}, p.c);
      if (t + 1 == tiles.t_end || t + 1 == split_end)
        end_split<kHd, 1, OutT, true>(p, w, kv_head, split, state, fold_o);
    }
    if (t + 1 == split_end) {
      ++split;
      split_end += p.tiles_per_split;
    }
  };
  stream_items<S>(p, base, begin_item, tile);
}

// attention_merge_kernel's fold, each thread its head-dim pair, the partial states read directly.
template <typename OutT, int kPlant>
__global__ void __launch_bounds__(kMergeThreads)
    planted_merge_kernel(const AttentionMerge* __restrict__ merges, const int32_t* __restrict__ num_merges,
                         const float* __restrict__ partial_o, const float* __restrict__ partial_ml, int num_heads,
                         int hd, float c, OutT* __restrict__ out, int64_t out_row_stride) {
  if (static_cast<int>(blockIdx.x) >= *num_merges) return;
  const AttentionMerge mg = merges[blockIdx.x];
  const int head = static_cast<int>(blockIdx.y), d = 2 * static_cast<int>(threadIdx.x);
  if (d >= hd) return;
  const int64_t slot_head = static_cast<int64_t>(mg.first_partial) * num_heads + head;
  const auto at = [&](int s) { return slot_head + static_cast<int64_t>(s) * num_heads; };
  const int first = kPlant == 3 ? mg.num_splits - 1 : 0;
  const float2 ml0 = *reinterpret_cast<const float2*>(partial_ml + at(first) * 2);
  const float2 o0 = *reinterpret_cast<const float2*>(partial_o + at(first) * hd + d);
  float m = ml0.x, l = ml0.y, x0 = o0.x, x1 = o0.y;
  for (int k = 1; k < mg.num_splits; ++k) {
    const int s = kPlant == 3 ? mg.num_splits - 1 - k : k;
    const float2 ml = *reinterpret_cast<const float2*>(partial_ml + at(s) * 2);
    const float2 o = *reinterpret_cast<const float2*>(partial_o + at(s) * hd + d);
    const FoldCoef f = fold_coef(m, ml.x, c);
    l = fold(l, ml.y, f);
    x0 = fold(x0, o.x, f);
    x1 = fold(x1, o.y, f);
    m = f.m;
  }
  float x[2] = {x0, x1};
  divide_row(x, l);
  store_pair(out + mg.row * out_row_stride + static_cast<int64_t>(head) * hd + d, x[0], x[1]);
}

// decode_end_split; kPlant 4 folds each lane's l before the quad sum.
template <int kHd, typename OutT, int kPlant>
__device__ __forceinline__ void planted_decode_end(const MmaParams& p, const AttentionWork& w, int kv_head, int s,
                                                   DecodeState<kHd>& st, DecodeFold<kHd>& acc) {
  constexpr int kNt = 2 * DecodeShape<kHd>::kDp;
  const float L[2] = {kPlant == 4 ? st.l[0] : quad_sum(st.l[0]), kPlant == 4 ? st.l[1] : quad_sum(st.l[1])};
  if (w.split_end - w.split_begin == 1) {
    decode_store<kHd, OutT>(p, w, kv_head, st, L);
    acc.clear();
    return;
  }
  if (s == w.split_begin) {
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      acc.m[i] = st.m[i];
      acc.l[i] = L[i];
    }
#pragma unroll
    for (int dt = 0; dt < kNt; ++dt) acc.o[dt] = make_float4(st.o[dt][0], st.o[dt][1], st.o[dt][2], st.o[dt][3]);
    return;
  }
  FoldCoef f[2];
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    f[i] = fold_coef(acc.m[i], st.m[i], p.c);
    acc.l[i] = fold(acc.l[i], L[i], f[i]);
    acc.m[i] = f[i].m;
  }
#pragma unroll
  for (int dt = 0; dt < kNt; ++dt) {
    const float4 x = acc.o[dt];
    st.o[dt][0] = fold(x.x, st.o[dt][0], f[0]);
    st.o[dt][1] = fold(x.y, st.o[dt][1], f[0]);
    st.o[dt][2] = fold(x.z, st.o[dt][2], f[1]);
    st.o[dt][3] = fold(x.w, st.o[dt][3], f[1]);
  }
  if (s == w.split_end - 1) {
    const float l[2] = {kPlant == 4 ? quad_sum(acc.l[0]) : acc.l[0], kPlant == 4 ? quad_sum(acc.l[1]) : acc.l[1]};
    decode_store<kHd, OutT>(p, w, kv_head, st, l);
    acc.clear();
  } else {
#pragma unroll
    for (int dt = 0; dt < kNt; ++dt) acc.o[dt] = make_float4(st.o[dt][0], st.o[dt][1], st.o[dt][2], st.o[dt][3]);
  }
}

// attention_decode_kernel with planted_decode_end.
template <int kHd, typename OutT, int kPlant>
__global__ void __launch_bounds__(kThreads, 1) planted_decode_kernel(const MmaParams p) {
  using S = DecodeShape<kHd>;
  extern __shared__ __align__(128) char smem[];
  const int kv_head = static_cast<int>(blockIdx.x);
  const uint32_t base = smem_addr(smem);
  DecodeState<kHd> state;
  DecodeFold<kHd> fold;
  int split = 0, split_end = 0;
  const auto begin_item = [&](const AttentionWork& w) {
    load_q<kHd, 16>(p, w, kv_head, smem + S::kQ);
    split = w.split_begin;
    split_end = (w.split_begin + 1) * p.tiles_per_split;
    decode_reset(state);
    fold.clear();
  };
  const auto tile = [&](const AttentionWork& w, const ItemTiles& tiles, int t, int stage) {
    if (t + p.tiles_per_split == split_end) {
      asm volatile("");
      decode_reset(state);
    }
    decode_tile_step<kHd>(state, base + S::kQ, base + S::kK + stage * S::kTileBytes,
                          base + S::kV + stage * S::kTileBytes, t, tiles.masked(t, p.window),
                          RowSpan{w.first_position, w.num_positions * p.group, p.group, p.window}, p.c, smem);
    if (t + 1 == tiles.t_end || t + 1 == split_end)
      planted_decode_end<kHd, OutT, kPlant>(p, w, kv_head, split, state, fold);
    if (t + 1 == split_end) {
      ++split;
      split_end += p.tiles_per_split;
    }
  };
  stream_items<S>(p, base, begin_item, tile);
}

template __global__ void planted_decode_kernel<64, float, 0>(MmaParams);
template __global__ void planted_decode_kernel<64, float, 4>(MmaParams);
template __global__ void planted_fold_kernel<64, float, 0>(MmaParams);
template __global__ void planted_fold_kernel<64, float, 1>(MmaParams);
template __global__ void planted_fold_kernel<64, float, 2>(MmaParams);
template __global__ void planted_merge_kernel<float, 0>(const AttentionMerge*, const int32_t*, const float*,
                                                        const float*, int, int, float, float*, int64_t);
template __global__ void planted_merge_kernel<float, 3>(const AttentionMerge*, const int32_t*, const float*,
                                                        const float*, int, int, float, float*, int64_t);

}  // namespace
}  // namespace vosti
