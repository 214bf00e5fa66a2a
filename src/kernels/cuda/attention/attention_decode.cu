// The tensor-core attention's decode kernel (attention.h, family 1): per-split items of one
// position, the four warps sharing each tile; where the plan keeps a decode row whole it folds the
// row's splits itself, in the merge kernel's order.
#include <cuda_bf16.h>

#include <span>
#include <type_traits>

#include "kernels/cuda/attention/attention_kernels.h"
#include "kernels/cuda/attention/attention_mma_stream.cuh"

namespace vosti {
namespace {

using namespace attention_mma;

// A per-split item is one position of one sequence: group rows (at most 16), one m16 block.
// The streaming kernel (attention_mma_stream.cu) gives it to warp 0 while warps 1-3 wait at the barriers (a tile
// is then one warp's chain of ~900 instructions). Here the four warps split the work of each
// tile between them and exchange through shared memory, each value computed by the same
// operations as in tile_step: warp w computes the scores of positions [16 w, 16 w + 16) of the
// tile (the same mma chain over d per score), the row maxima of the four slices meet in shared
// memory (max is exact in any order; a +0 / -0 difference in M would cancel in every ex2 it
// enters), each warp exponentiates its own scores and writes them (f32 for the sums, bf16 mma
// fragments for P.V); every warp then sums each column class in
// increasing j from the f32 copy (tile_step's order), and computes O for head-dim columns
// [kHd / 4 w, kHd / 4 (w + 1)) with the same mma chain over the tile's positions. So an output
// row holds the bits tile_step gives it (the device tests compare the two paths).
template <int kHd>
struct DecodeShape {
  static constexpr int kStages = 3;
  static constexpr int kTileBytes = kTile * kHd * 2;
  static constexpr int kPfStride = kTile + 8;             // f32 P rows, padded against bank conflicts
  static constexpr int kQ = 0;                            // [16][kHd] bf16
  static constexpr int kK = 16 * kHd * 2;                 // [kStages][64][kHd] bf16
  static constexpr int kV = kK + kStages * kTileBytes;    // [kStages][64][kHd] bf16
  static constexpr int kMax = kV + kStages * kTileBytes;  // [kWarps][16] f32 slice maxima
  static constexpr int kPa = kMax + kWarps * 16 * 4;      // [kWarps][32 lanes] bf16 P fragments
  static constexpr int kPf = kPa + kWarps * 32 * 16;      // [16][kPfStride] f32 P
  static constexpr int kBytes = kPf + 16 * kPfStride * 4;
  static constexpr int kThreads = attention_mma::kThreads;
  static constexpr bool kAsyncProxy = false;
  static constexpr bool kPrimeInItem = false;
  static constexpr int kLag = 1;
  static constexpr int kChunks = kHd / 8;
  static __device__ __forceinline__ uint32_t tile_offset(int row, int chunk) { return swizzled<kHd>(row, chunk); }
  static constexpr int kRowsPerPass = kThreads / kChunks;
  static constexpr int kRowsPerThread = kTile / kRowsPerPass;
  static constexpr bool kOnePage = true;         // the launch checks the block size (decode_fits)
  static constexpr int kDp = kHd / 16 / kWarps;  // V fragment loads (16 head-dim columns) per warp
  static_assert(kHd >= 64 && kDp >= 1, "each warp computes at least 16 head-dim columns");
  static_assert(kThreads % kChunks == 0 && kTile % kRowsPerPass == 0, "the loader covers whole rows");
};

// A warp's running state: its rows' M and l_k as in WarpState, O of its head-dim columns only.
static_assert(DecodeShape<64>::kRowsPerThread == 64 / 16 && DecodeShape<128>::kRowsPerThread == 128 / 16 &&
                  DecodeShape<256>::kRowsPerThread == 256 / 16,
              "attention_decode_fits' block size: a loader thread's rows");

template <int kHd>
struct DecodeState {
  float o[2 * DecodeShape<kHd>::kDp][4];
  float m[2];
  float l[2];
};

// The position of this lane's row i (0: lane / 4, 1: lane / 4 + 8) of the block (RowSpan
// without the warp: every warp holds the block's 16 rows).
__device__ __forceinline__ int decode_position(const RowSpan& span, int i) {
  const int row = static_cast<int>((threadIdx.x & 31) >> 2) + 8 * i;
  return span.first + min(row, span.rows - 1) / span.group;
}

template <int kHd>
__device__ __forceinline__ void decode_tile_step(DecodeState<kHd>& st, uint32_t q_rows, uint32_t k_stage,
                                                 uint32_t v_stage, int tile, bool mask, const RowSpan& span, float c,
                                                 char* smem) {
  using S = DecodeShape<kHd>;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, quad = lane & 3, r = lane >> 2;
  float* slice_max = reinterpret_cast<float*>(smem + S::kMax);
  uint4* pa = reinterpret_cast<uint4*>(smem + S::kPa);
  float* pf = reinterpret_cast<float*>(smem + S::kPf);
  const uint32_t q_lane = swizzled<kHd>(lane & 15, lane >> 4);
  const uint32_t k_lane = swizzled<kHd>((lane & 7) + ((lane >> 4) << 3), (lane >> 3) & 1);
  const uint32_t v_lane = swizzled<kHd>((lane & 7) + (((lane >> 3) & 1) << 3), lane >> 4);
  // Scores of n8 tiles 2 warp, 2 warp + 1 (tile_step's s[2 np], s[2 np + 1] with np = warp).
  float s[2][4];
#pragma unroll
  for (int h = 0; h < 2; ++h)
#pragma unroll
    for (int e = 0; e < 4; ++e) s[h][e] = 0.f;
#pragma unroll
  for (int kk = 0; kk < kHd / 16; ++kk) {
    uint32_t a[4], f[4];
    ldsm_x4(a, q_rows + (q_lane ^ (kk * 32)));
    ldsm_x4(f, k_stage + warp * 16 * kHd * 2 + (k_lane ^ (kk * 32)));
    mma_bf16(s[0], a, f[0], f[1]);
    mma_bf16(s[1], a, f[2], f[3]);
  }
  if (mask) {
    const int p[2] = {decode_position(span, 0), decode_position(span, 1)};
    const int f[2] = {attention_window_first(p[0], span.window), attention_window_first(p[1], span.window)};
#pragma unroll
    for (int h = 0; h < 2; ++h)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const int j = tile * kTile + (2 * warp + h) * 8 + 2 * quad + e;
        if (j > p[0] || j < f[0]) s[h][e] = -INFINITY;
        if (j > p[1] || j < f[1]) s[h][2 + e] = -INFINITY;
      }
  }
  // Each row's maximum: the slice's, then the four slices' from shared memory.
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    float mx = fmaxf(fmaxf(s[0][2 * i], s[0][2 * i + 1]), fmaxf(s[1][2 * i], s[1][2 * i + 1]));
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
    if (quad == 0) slice_max[warp * 16 + r + 8 * i] = mx;
  }
  __syncthreads();
  float alpha[2];
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const int row = r + 8 * i;
    const float mx = fmaxf(fmaxf(slice_max[row], slice_max[16 + row]), fmaxf(slice_max[32 + row], slice_max[48 + row]));
    const float m_new = fmaxf(st.m[i], mx);
    alpha[i] = ex2(__fmul_rn(__fsub_rn(st.m[i], m_new), c));
    const float m_scaled = __fmul_rn(m_new, c);
#pragma unroll
    for (int h = 0; h < 2; ++h) {
#pragma unroll
      for (int e = 0; e < 2; ++e) s[h][2 * i + e] = ex2(__fmaf_rn(s[h][2 * i + e], c, -m_scaled));
      *reinterpret_cast<float2*>(pf + row * S::kPfStride + (2 * warp + h) * 8 + 2 * quad) =
          make_float2(s[h][2 * i], s[h][2 * i + 1]);
    }
    st.m[i] = m_new;
  }
  // The bf16 fragment of P.V's k step `warp` (tile_step's a[] at kk = warp).
  pa[warp * 32 + lane] = make_uint4(pack_bf16(s[0][0], s[0][1]), pack_bf16(s[0][2], s[0][3]),
                                    pack_bf16(s[1][0], s[1][1]), pack_bf16(s[1][2], s[1][3]));
  __syncthreads();
  // l_k of this lane's class over the whole tile, in increasing j.
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const float* row = pf + (r + 8 * i) * S::kPfStride + 2 * quad;
    float sum = 0.f;
#pragma unroll
    for (int nt = 0; nt < kTileNt; ++nt) {
      const float2 pj = *reinterpret_cast<const float2*>(row + nt * 8);
      sum = __fadd_rn(__fadd_rn(sum, pj.x), pj.y);
    }
    st.l[i] = __fadd_rn(__fmul_rn(st.l[i], alpha[i]), sum);
  }
  rescale(st.o, alpha);
  // O of this warp's columns += bf16(P) V, the chain over the tile's positions.
#pragma unroll
  for (int kk = 0; kk < kTile / 16; ++kk) {
    uint32_t keep[2] = {0xffffffffu, 0xffffffffu};
    if (mask) {
      const int j = tile * kTile + kk * 16 + 2 * quad, last = span.last();
#pragma unroll
      for (int h = 0; h < 2; ++h)
        keep[h] = (j + 8 * h <= last ? 0x0000ffffu : 0u) | (j + 8 * h + 1 <= last ? 0xffff0000u : 0u);
    }
    const uint4 pk = pa[kk * 32 + lane];
    const uint32_t a[4] = {pk.x, pk.y, pk.z, pk.w};
#pragma unroll
    for (int dl = 0; dl < S::kDp; ++dl) {
      uint32_t f[4];
      ldsm_x4_trans(f, v_stage + kk * 16 * kHd * 2 + (v_lane ^ ((warp * S::kDp + dl) * 32)));
      if (mask) {
        f[0] &= keep[0];
        f[1] &= keep[1];
        f[2] &= keep[0];
        f[3] &= keep[1];
      }
      mma_bf16(st.o[2 * dl], a, f[0], f[1]);
      mma_bf16(st.o[2 * dl + 1], a, f[2], f[3]);
    }
  }
}

// Writes the block's rows of this warp's columns: O / L, or the split's state for the merge
// kernel (M and L by warp 0) where w.partial >= 0.
template <int kHd, typename OutT>
__device__ __forceinline__ void decode_store(const MmaParams& p, const AttentionWork& w, int kv_head,
                                             const DecodeState<kHd>& st, const float (&L)[2]) {
  constexpr int kDp = DecodeShape<kHd>::kDp;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int col = warp * kDp * 16 + 2 * (lane & 3);
  const int rows = w.num_positions * p.group;
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const int row = (lane >> 2) + 8 * i;
    if (row >= rows) continue;
    const int64_t q_row = w.first_row + row / p.group;
    const int head = kv_head * p.group + row % p.group;
    if (w.partial >= 0) {
      const int64_t slot_head = static_cast<int64_t>(w.partial) * p.num_heads + head;
      float* dst = p.partial_o + slot_head * kHd + col;
#pragma unroll
      for (int dt = 0; dt < 2 * kDp; ++dt) store_pair(dst + dt * 8, st.o[dt][2 * i], st.o[dt][2 * i + 1]);
      if (warp == 0 && (lane & 3) == 0) store_pair(p.partial_ml + slot_head * 2, st.m[i], L[i]);
    } else {
      store_divided_row(static_cast<OutT*>(p.out) + q_row * p.out_row_stride + static_cast<int64_t>(head) * kHd + col,
                        st.o, i, L[i]);
    }
  }
}

// The fold so far of a decode item's splits, this thread's values (O in DecodeState::o's
// layout), in registers: read and written at a split's end.
template <int kHd>
struct DecodeFold {
  float m[2];
  float l[2];
  float4 o[2 * DecodeShape<kHd>::kDp];
  __device__ __forceinline__ void clear() {
    m[0] = m[1] = l[0] = l[1] = 0.f;
#pragma unroll
    for (int dt = 0; dt < 2 * DecodeShape<kHd>::kDp; ++dt) o[dt] = make_float4(0.f, 0.f, 0.f, 0.f);
  }
};

// The end of split s of a decode item, this warp's columns of the block's rows: L over the row's
// quad, then decode_store where the item is one split; where it holds several, the fold of
// end_split in split order (the first split's state copied, each later one folded with fold_coef
// and fold: the merge kernel's operations too), and O / L after the last.
template <int kHd, typename OutT>
__device__ __forceinline__ void decode_end_split(const MmaParams& p, const AttentionWork& w, int kv_head, int s,
                                                 DecodeState<kHd>& st, DecodeFold<kHd>& acc) {
  constexpr int kNt = 2 * DecodeShape<kHd>::kDp;
  const float L[2] = {quad_sum(st.l[0]), quad_sum(st.l[1])};
  // After a store the fold is not read again before the next item clears it; it is cleared there
  // too, past decode_store's branch on the plan's partial slot, so that the compiler carries no
  // copy of it through that branch (verify/analyzer would see the plan choose the copied values).
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
    decode_store<kHd, OutT>(p, w, kv_head, st, acc.l);
    acc.clear();
  } else {
#pragma unroll
    for (int dt = 0; dt < kNt; ++dt) acc.o[dt] = make_float4(st.o[dt][0], st.o[dt][1], st.o[dt][2], st.o[dt][3]);
  }
}

template <int kHd>
__device__ __forceinline__ void decode_reset(DecodeState<kHd>& st) {
#pragma unroll
  for (int dt = 0; dt < 2 * DecodeShape<kHd>::kDp; ++dt)
#pragma unroll
    for (int e = 0; e < 4; ++e) st.o[dt][e] = 0.f;
  st.m[0] = st.m[1] = -INFINITY;
  st.l[0] = st.l[1] = 0.f;
}

// The per-split items where attention_decode_fits (a KV head's rows in one m16 block, head_dim
// >= 64, a loader thread's rows in one page): the stream of attention_mma_kernel (stream_items),
// each tile computed by the four warps together (decode_tile_step); an item's splits, where it
// holds several, folded at each split's end (decode_end_split).
template <int kHd, typename OutT>
__global__ void __launch_bounds__(kThreads, 1) attention_decode_kernel(const MmaParams p) {
  using S = DecodeShape<kHd>;
  extern __shared__ __align__(128) char smem[];
  const int kv_head = static_cast<int>(blockIdx.x);
  const uint32_t base = smem_addr(smem);
  DecodeState<kHd> state;  // the split being computed
  DecodeFold<kHd> fold;    // the fold of the item's earlier splits
  // The split of the tile being computed and the end of its tiles (tracked as attention_mma_kernel
  // does: an item's first tile is in its first split, its tiles come in order).
  int split = 0, split_end = 0;
  const auto begin_item = [&](const AttentionWork& w) {
    load_q<kHd, 16>(p, w, kv_head, smem + S::kQ);
    split = w.split_begin;
    split_end = (w.split_begin + 1) * p.tiles_per_split;
    decode_reset(state);
    // The fold is written at an item's first split's end before any read; cleared here too so
    // that verify/analyzer sees no read meet the previous item's values.
    fold.clear();
  };
  const auto tile = [&](const AttentionWork& w, const ItemTiles& tiles, int t, int stage) {
    if (t + p.tiles_per_split == split_end) {  // a split's first tile
      asm volatile("");                        // a branch, not a select of every state register on every tile
      decode_reset(state);
    }
    decode_tile_step<kHd>(state, base + S::kQ, base + S::kK + stage * S::kTileBytes,
                          base + S::kV + stage * S::kTileBytes, t, tiles.masked(t, p.window),
                          RowSpan{w.first_position, w.num_positions * p.group, p.group, p.window}, p.c, smem);
    if (t + 1 == tiles.t_end || t + 1 == split_end) decode_end_split<kHd, OutT>(p, w, kv_head, split, state, fold);
    if (t + 1 == split_end) {
      ++split;
      split_end += p.tiles_per_split;
    }
  };
  stream_items<S>(p, base, begin_item, tile);
}

// This unit's lines of attention_instances.def, for f32 and bf16 output (attention_kernels.h).
template <AttentionKernelKind kKind, int kHd, bool kFold, int kBlocks, typename OutT>
AttentionKernel decode_entry() {
  if constexpr (kKind == AttentionKernelKind::kDecode) {
    return {kKind,
            kHd,
            std::is_same_v<OutT, float> ? DType::kF32 : DType::kBF16,
            kFold,
            kBlocks,
            reinterpret_cast<const void*>(attention_decode_kernel<kHd, OutT>),
            kThreads,
            DecodeShape<kHd>::kBytes,
            0};
  } else {
    return {};
  }
}

const AttentionKernel kDecodeKernels[] = {
#define VOSTI_ATTENTION_KERNEL(kind, hd, fold, blocks)                \
  decode_entry<AttentionKernelKind::kind, hd, fold, blocks, float>(), \
      decode_entry<AttentionKernelKind::kind, hd, fold, blocks, __nv_bfloat16>(),
#include "kernels/cuda/attention/attention_instances.def"
#undef VOSTI_ATTENTION_KERNEL
};

}  // namespace

std::span<const AttentionKernel> attention_decode_kernels() { return kDecodeKernels; }

}  // namespace vosti
