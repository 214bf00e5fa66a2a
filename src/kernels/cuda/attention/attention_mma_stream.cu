// The tensor-core attention's streaming kernel (attention.h, family 1; attention_mma_tile.cuh
// holds the family's arithmetic): folded items (a row's splits folded in one CTA) and one-split
// items, mma.sync on sm_80 and sm_90a, 64 or 128 rows a CTA.
#include <cuda_bf16.h>

#include <span>
#include <type_traits>

#include "kernels/cuda/attention/attention_kernels.h"
#include "kernels/cuda/attention/attention_mma_stream.cuh"

namespace vosti {
namespace {

using namespace attention_mma;

// Folded and one-split items: each warp computes its own rows of the item over each tile of the
// stream (stream_items). (The minimum of one CTA an SM lets ptxas use the registers it needs:
// without it, it held the one-split kernel to 168 and prefill ran 5-10% slower.)
template <int kHd, typename OutT, bool kFold, int kBlocks>
__global__ void __launch_bounds__(kThreads, 1) attention_mma_kernel(const MmaParams p) {
  using S = Shape<kHd, kBlocks, kFold>;
  extern __shared__ __align__(128) char smem[];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int kv_head = static_cast<int>(blockIdx.x);
  const uint32_t base = smem_addr(smem);
  const uint32_t q_rows = base + S::kQ + warp * kBlocks * 16 * kHd * 2;
  FoldO<kHd, kBlocks, S::kAccShared> fold_o;
  if constexpr (S::kAccShared) {
    fold_o.at = reinterpret_cast<float*>(smem + S::kAcc) + warp * kBlocks * (kHd / 2) * 32 + lane;
  } else if constexpr (kFold) {
    fold_o.pin();
  }
  if (threadIdx.x == 0) *reinterpret_cast<uint4*>(smem + S::kZero) = make_uint4(0, 0, 0, 0);  // read after a barrier
  WarpState<kHd, kBlocks> state;
  int rows = 0;
  // The split of the tile being computed and the tile after it: an item's first tile is in its
  // first split (attention_plan.h), and its tiles come in order, so no tile divides by the split.
  int split = 0, split_end = 0;
  const auto begin_item = [&](const AttentionWork& w) {
    rows = w.num_positions * p.group;
    split = w.split_begin;
    split_end = (w.split_begin + 1) * p.tiles_per_split;
    // Q before the item's next copies are issued (a load issued behind a tile's copies returns
    // after them). The previous item's reads of Q ended at the barrier before begin_item; the
    // first tile's barrier publishes this item's Q.
    load_q<kHd, S::kRows>(p, w, kv_head, smem + S::kQ);
    reset(state);
    if constexpr (kFold) {
      // The fold state is written at an item's first split before any read; clearing it here too
      // lets verify/analyzer see that no read can meet the previous item's values.
#pragma unroll
      for (int b = 0; b < kBlocks; ++b) {
        fold_o.m[b][0] = fold_o.m[b][1] = fold_o.l[b][0] = fold_o.l[b][1] = 0.f;
#pragma unroll
        for (int dt = 0; dt < kHd / 8; ++dt) fold_o.store(b, dt, make_float4(0.f, 0.f, 0.f, 0.f));
      }
    }
  };
  const auto tile = [&](const AttentionWork& w, const ItemTiles& tiles, int t, int stage) {
    if (warp * kBlocks * 16 < rows) {
      if (t + p.tiles_per_split == split_end) {  // a split's first tile
        asm volatile("");                        // a branch, not a select of every state register on every tile
        reset(state);
      }
      tile_step<kHd, kBlocks>(state, q_rows, base + S::kK + stage * S::kTileBytes, base + S::kV + stage * S::kTileBytes,
                              base + S::kZero, t, tiles.masked(t, p.window),
                              RowSpan{w.first_position, rows, p.group, p.window}, p.c);
      if (t + 1 == tiles.t_end || t + 1 == split_end) {
        end_split<kHd, kBlocks, OutT, kFold>(p, w, kv_head, split, state, fold_o);
      }
    }
    if (t + 1 == split_end) {
      ++split;
      split_end += p.tiles_per_split;
    }
  };
  stream_items<S>(p, base, begin_item, tile);
}

// This unit's lines of attention_instances.def, for f32 and bf16 output (attention_kernels.h).
template <AttentionKernelKind kKind, int kHd, bool kFold, int kBlocks, typename OutT>
AttentionKernel stream_entry() {
  if constexpr (kKind == AttentionKernelKind::kStream) {
    return {kKind,
            kHd,
            std::is_same_v<OutT, float> ? DType::kF32 : DType::kBF16,
            kFold,
            kBlocks,
            reinterpret_cast<const void*>(attention_mma_kernel<kHd, OutT, kFold, kBlocks>),
            kThreads,
            Shape<kHd, kBlocks, kFold>::kBytes,
            0};
  } else {
    return {};
  }
}

const AttentionKernel kStreamKernels[] = {
#define VOSTI_ATTENTION_KERNEL(kind, hd, fold, blocks)                \
  stream_entry<AttentionKernelKind::kind, hd, fold, blocks, float>(), \
      stream_entry<AttentionKernelKind::kind, hd, fold, blocks, __nv_bfloat16>(),
#include "kernels/cuda/attention/attention_instances.def"
#undef VOSTI_ATTENTION_KERNEL
};

}  // namespace

std::span<const AttentionKernel> attention_stream_kernels() { return kStreamKernels; }

}  // namespace vosti
