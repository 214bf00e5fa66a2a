// The tensor-core attention's sm_90a kernel (attention.h, family 1): the 128-row folded and
// one-split items on two warpgroups, both chains of a tile on wgmma, each k16 step giving each
// element the bits of mma.sync's (wgmma_ptx.cuh). Compiled for sm_80 too, as an empty kernel.
#include <cuda_bf16.h>

#include <span>
#include <type_traits>

#include "kernels/cuda/attention/attention_kernels.h"
#include "kernels/cuda/attention/attention_mma_stream.cuh"

namespace vosti {
namespace {

using namespace attention_mma;

// The 128-row folded and one-split items where the GPU has wgmma (H100, H200) and head_dim is 64
// or 128: 256 threads, warpgroup g computes CTA rows [64 g, 64 g + 64), warp w of the CTA rows
// [16 w, 16 w + 16) as in attention_mma_kernel with one block a warp. Per tile a warpgroup issues
// the score chain as kHd / 16 wgmma m64n64k16 steps (A: its 64 rows of Q, B: the K tile, both
// from shared memory) and P.V as 4 wgmma m64n{kHd}k16 steps (A: P's bf16
// fragments; B: the V tile, N-major), in tile_step's order; between them tile_step's own
// mask_block and softmax_block. A wgmma k16 step computes each element as the mma.sync step does
// from the same operands (wgmma_ptx.cuh), so each row gets the bits attention_mma_kernel and the
// decode kernel give it. Q (each warpgroup's 64 rows) and the K and V stages are in wgmma's
// 128-byte swizzled layout (wg_swizzled); V rows past the item's last position are zeroed in
// the stage before P.V reads them (the computation's own item decides; P is +0 there), so the
// masked terms are the bf16 +0 x +0 of the other kernels.

template <int kHd, bool kFold>
struct WgShape {
  static constexpr int kThreads = 256;
  static constexpr int kRows = 2 * kAttnRowsPerCta;
  static constexpr bool kAsyncProxy = true;
  static constexpr bool kPrimeInItem = true;
  static constexpr int kStages = 4;
  static constexpr int kLag = 2;  // the trailing warpgroup reads tile n - 1 during tile n
  static constexpr int kTileBytes = kTile * kHd * 2;
  static constexpr int kQ = 0;                            // [2 warpgroups][64][kHd] bf16, wgmma's layout
  static constexpr int kK = kRows * kHd * 2;              // [kStages][64][kHd] bf16, wgmma's layout
  static constexpr int kV = kK + kStages * kTileBytes;    // [kStages][64][kHd] bf16, wgmma's layout
  static constexpr int kAcc = kV + kStages * kTileBytes;  // [8 warps][kHd / 2][32] f32: the fold's O
  static constexpr int kBytes = kAcc + (kFold ? 8 * (kHd / 2) * 32 * 4 : 0);
  static constexpr int kSmem = kBytes + 1024;  // the dynamic allocation: the tiles start 1,024-byte aligned
  static constexpr int kChunks = kHd / 8;
  static constexpr int kRowsPerPass = kThreads / kChunks;
  static constexpr int kRowsPerThread = kTile / kRowsPerPass;
  static constexpr bool kOnePage = true;  // the launch checks the block size
  static __device__ __forceinline__ uint32_t tile_offset(int row, int chunk) { return wg_swizzled<kHd>(row, chunk); }
  static_assert(kHd == 64 || kHd == 128, "one or two 128-byte column blocks");
  static_assert(kK % 1024 == 0 && kTileBytes % 1024 == 0, "each tile starts 1,024-byte aligned");
  static_assert(kThreads % kChunks == 0 && kTile % kRowsPerPass == 0, "the loader covers whole rows");
  static_assert(kAsyncProxy && kPrimeInItem && kOnePage && kQ == 0 && kRowsPerThread >= 1 && kLag == 2,
                "stream_items' and load_tile's shape");
};

#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define VOSTI_ATTENTION_WGMMA 1

// tile_step for one m16 block a warp, with the chains on wgmma (see above), in two halves so that
// a warpgroup can hold a tile's scores across a barrier: wg_scores issues the score chain (the
// warp's s[nt][e] is wgmma's accumulator d[4 nt + e]); wg_finish waits for it (and for any P.V
// still running), masks, exponentiates, sums and packs as tile_step does, rescales O (d[4 dt + e]
// = o[dt][e]) and issues P.V, which the caller waits for (wgmma_ptx::wait) before O is read or
// V's stage is refilled.
template <int kHd>
__device__ __forceinline__ void wg_scores(float (&s)[kTileNt][4], uint32_t q_group, uint32_t k_stage) {
  namespace wg = wgmma_ptx;
#pragma unroll
  for (int nt = 0; nt < kTileNt; ++nt)
#pragma unroll
    for (int e = 0; e < 4; ++e) s[nt][e] = 0.f;
  float(&sd)[kTileNt * 4] = reinterpret_cast<float(&)[kTileNt * 4]>(s);
  // The chain over d in steps of 16 (A: the warpgroup's Q tile, B: the K tile, both K-major: step
  // kk is 32 bytes into its column block).
  wg::fence();
#pragma unroll
  for (int kk = 0; kk < kHd / 16; ++kk) {
    const uint32_t at = (kk >> 2) * (kTile * 128) + (kk & 3) * 32;
    wg::wgmma_m64n64k16_ss(sd, wg::desc_sw128(q_group + at, 16, 1024), wg::desc_sw128(k_stage + at, 16, 1024));
  }
  wg::commit();
}

template <int kHd>
__device__ __forceinline__ void wg_finish(WarpState<kHd, 1>& st, float (&s)[kTileNt][4], uint32_t v_stage, int tile,
                                          bool mask, const RowSpan& span, float c) {
  namespace wg = wgmma_ptx;
  float(&sd)[kTileNt * 4] = reinterpret_cast<float(&)[kTileNt * 4]>(s);
  float(&od)[kHd / 2] = reinterpret_cast<float(&)[kHd / 2]>(st.o[0]);
  wg::wait<0>();
  wg::fence_operands(sd);
  wg::fence_operands(od);
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
  softmax_block(s, st.m[0], st.l[0], alpha, pa, c);
  rescale(st.o[0], alpha);
  // O += bf16(P) V: the chain over the tile's positions in steps of 16 (N-major B: the column
  // blocks kTile * 128 bytes apart, 8-row groups 1,024 bytes apart; step kk is 16 rows on).
  wg::fence();
#pragma unroll
  for (int kk = 0; kk < kTile / 16; ++kk) {
    const uint64_t desc = wg::desc_sw128(v_stage + kk * 16 * 128, kTile * 128, 1024);
    if constexpr (kHd == 128) {
      wg::wgmma_m64n128k16_rs<1>(od, pa[kk], desc);
    } else {
      wg::wgmma_m64n64k16_rs<1>(od, pa[kk], desc);
    }
  }
  wg::commit();
}

// Waits for this warpgroup's running chains and fences O.
template <int kHd>
__device__ __forceinline__ void wg_settle(WarpState<kHd, 1>& st) {
  wgmma_ptx::wait<0>();
  wgmma_ptx::fence_operands(reinterpret_cast<float(&)[kHd / 2]>(st.o[0]));
}
#endif  // __CUDA_ARCH_FEAT_SM90_ALL

// The kernel: attention_mma_kernel's stream and fold with WgShape's stages. Warpgroup 0 computes
// tile t within stream step t; warpgroup 1 trails by half a tile: in step t it finishes tile t - 1
// (softmax, P.V) and then issues tile t's scores, so that the tensor cores run one warpgroup's
// chains while the other computes its softmax (the steps' barriers would otherwise keep the two in
// phase). Which step runs which half changes no operation of a row. Warpgroups whose rows are all
// past the item skip the item (the rows of a warpgroup with some rows in it compute what they
// hold; their outputs are dropped).
template <int kHd, typename OutT, bool kFold>
__global__ void __launch_bounds__(256, 1) attention_wgmma_kernel(const MmaParams p) {
#ifdef VOSTI_ATTENTION_WGMMA
  using S = WgShape<kHd, kFold>;
  extern __shared__ __align__(128) char smem_raw[];
  char* smem = smem_raw + ((1024 - (smem_addr(smem_raw) & 1023)) & 1023);
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  // The warpgroup, through a shuffle so that ptxas sees a warp-uniform value (branches on
  // threadIdx.x would make it serialize the wgmma chains).
  const int group = __shfl_sync(0xffffffffu, static_cast<int>(threadIdx.x >> 7), 0);
  const int kv_head = static_cast<int>(blockIdx.x);
  const uint32_t base = smem_addr(smem);
  const uint32_t q_group = base + S::kQ + group * kAttnRowsPerCta * kHd * 2;  // the warpgroup's Q tile
  FoldO<kHd, 1, true> fold_o;
  fold_o.at = reinterpret_cast<float*>(smem + S::kAcc) + warp * (kHd / 2) * 32 + lane;
  WarpState<kHd, 1> state;
  float s[kTileNt][4];  // the scores of the tile in flight
  int rows = 0, split = 0, split_end = 0;
  // The trailing warpgroup's tile t - 1: its V stage, whether masked, whether it ended split prev_split.
  uint32_t prev_v = 0;
  bool prev_mask = false, prev_split_end = false;
  int prev_split = 0;
  const auto begin_item = [&](const AttentionWork& w, auto&& prime) {
    rows = w.num_positions * p.group;
    split = w.split_begin;
    split_end = (w.split_begin + 1) * p.tiles_per_split;
    QLoads<kHd, S::kRows, S::kThreads> q;
    q.issue(p, w, kv_head);
    prime();  // the stream's first copies wait for their block-table entries while Q loads
    q.store(p, w, smem + S::kQ);
    reset(state);
    // The trailing warpgroup's carried tile: set before any read (its first read is at the item's
    // second tile); cleared here too so that verify/analyzer sees no read meet the previous item's.
#pragma unroll
    for (int nt = 0; nt < kTileNt; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) s[nt][e] = 0.f;
    prev_v = base + S::kV;
    prev_mask = prev_split_end = false;
    prev_split = w.split_begin;
    if constexpr (kFold) {
      fold_o.m[0][0] = fold_o.m[0][1] = fold_o.l[0][0] = fold_o.l[0][1] = 0.f;
#pragma unroll
      for (int dt = 0; dt < kHd / 8; ++dt) fold_o.store(0, dt, make_float4(0.f, 0.f, 0.f, 0.f));
    }
  };
  const auto tile = [&](const AttentionWork& w, const ItemTiles& tiles, int t, int stage) {
    const uint32_t k_stage = base + S::kK + stage * S::kTileBytes, v_stage = base + S::kV + stage * S::kTileBytes;
    const bool mask = tiles.masked(t, p.window);
    const RowSpan span{w.first_position, rows, p.group, p.window};
    if (mask) {  // the item's last (or, under a window, first) tile: V rows past its last position read as +0
      const int last = span.last();
      char* v = smem + S::kV + stage * S::kTileBytes;
      for (int i = threadIdx.x; i < kTile * S::kChunks; i += S::kThreads) {
        const int row = i / S::kChunks, chunk = i % S::kChunks;
        if (t * kTile + row > last)
          *reinterpret_cast<uint4*>(v + wg_swizzled<kHd>(row, chunk)) = make_uint4(0, 0, 0, 0);
      }
      wgmma_ptx::fence_proxy_async();
      __syncthreads();
    }
    const bool split_first = t + p.tiles_per_split == split_end,
               split_last = t + 1 == tiles.t_end || t + 1 == split_end;
    if (group * kAttnRowsPerCta < rows) {
      if (group == 1 && t > tiles.t_begin) {  // the trailing warpgroup finishes tile t - 1
        wg_finish<kHd>(state, s, prev_v, t - 1, prev_mask, span, p.c);
        if (prev_split_end) {
          wg_settle(state);
          end_split<kHd, 1, OutT, kFold>(p, w, kv_head, prev_split, state, fold_o);
        }
      }
      if (split_first) {
        asm volatile("");  // a branch, not a select of every state register on every tile
        wg_settle(state);  // the trailing warpgroup's tile t - 1 P.V (the previous split's) is done
        reset(state);
      }
      wg_scores<kHd>(s, q_group, k_stage);
      if (group == 0 || t + 1 == tiles.t_end) {
        wg_finish<kHd>(state, s, v_stage, t, mask, span, p.c);
        wg_settle(state);
        if (split_last) end_split<kHd, 1, OutT, kFold>(p, w, kv_head, split, state, fold_o);
      } else {
        // Tile t - 1's P.V and tile t's scores are done before the step ends (no chain runs across
        // a step: tile t - 1's stage may be refilled, and no register is in flight across the loop).
        wg_settle(state);
        wgmma_ptx::fence_operands(reinterpret_cast<float(&)[kTileNt * 4]>(s));
      }
    }
    prev_v = v_stage;
    prev_mask = mask;
    prev_split_end = split_last;
    prev_split = split;
    if (t + 1 == split_end) {
      ++split;
      split_end += p.tiles_per_split;
    }
  };
  stream_items<S>(p, base, begin_item, tile);
#endif
}

// This unit's lines of attention_instances.def, for f32 and bf16 output (attention_kernels.h).
template <AttentionKernelKind kKind, int kHd, bool kFold, int kBlocks, typename OutT>
AttentionKernel wgmma_entry() {
  if constexpr (kKind == AttentionKernelKind::kWgmma) {
    return {kKind,
            kHd,
            std::is_same_v<OutT, float> ? DType::kF32 : DType::kBF16,
            kFold,
            kBlocks,
            reinterpret_cast<const void*>(attention_wgmma_kernel<kHd, OutT, kFold>),
            WgShape<kHd, kFold>::kThreads,
            WgShape<kHd, kFold>::kSmem,
            0};
  } else {
    return {};
  }
}

const AttentionKernel kWgmmaKernels[] = {
#define VOSTI_ATTENTION_KERNEL(kind, hd, fold, blocks)               \
  wgmma_entry<AttentionKernelKind::kind, hd, fold, blocks, float>(), \
      wgmma_entry<AttentionKernelKind::kind, hd, fold, blocks, __nv_bfloat16>(),
#include "kernels/cuda/attention/attention_instances.def"
#undef VOSTI_ATTENTION_KERNEL
};

}  // namespace

std::span<const AttentionKernel> attention_wgmma_kernels() { return kWgmmaKernels; }

}  // namespace vosti
