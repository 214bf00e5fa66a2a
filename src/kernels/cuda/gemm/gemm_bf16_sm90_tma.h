// The kWgmmaTmaWarpSpecialized GEMM family (sm_90a only): CUTLASS 3 / CuTe kernels with TMA
// loads on an mbarrier ring, a producer warp, consumer warpgroups issuing wgmma, a TMA-store
// epilogue and CUTLASS's persistent data-parallel tile scheduler, or (the basic kernel) one CTA
// per tile without a scheduler (never stream-K, no split-K, no atomics). Internal to
// src/kernels/cuda: gemm_bf16_with_launch() calls it.
//
// Reduction order, per output element y[r, c], the same in every instantiation (GemmTmaTile):
// from a zero f32 accumulator (the first wgmma runs with scale-d = 0), one wgmma k16 step per 16
// columns of k, k increasing over all of k (64- or 128-column k-tiles in order, their four or eight k16
// steps in order: the same chain of k16 steps; the rule uses 128-column
// k-tiles only where k is a multiple of 128, so that no plan adds the zero-filled k16 steps of a
// partial last k-tile that another does not: those are exact, but turn an exact -0 sum into +0);
// then acc + bias[c] in f32 (bias[c] = 0 without a bias: CUTLASS's row broadcast with a zero null
// default); then one round-to-nearest-even to bf16, or the f32 sum stored as is. The tile shape,
// cluster and kernel schedule (pingpong, cooperative, basic), and a plan's split of y's columns
// between two launches, only move which launch, CTA and warpgroup computes an element; m reaches the kernels only
// through the problem shape (TMA bounds that zero-fill rows past m and clip their stores, the grid or the scheduler's
// tile count), never the k loop, whose trip count is k / 64 (ceil(k / 128) for the 128-column k-tiles): fixed per
// instantiation. The L2 eviction hint on the weight's loads (TmaGemmCall::stream_weights) only
// changes which cache lines the L2 keeps, never a loaded value.
// The swapped instantiations (GemmTmaTile::kSwap...) run the same chain on y^T = w x^T: w is
// wgmma's A operand and x its B, so an element's products are the same bf16 pairs, multiplied
// and accumulated by the same k16 steps in the same k order, only with the operands' roles
// exchanged; the bias is a column broadcast of y^T and the store writes y^T column-major, i.e. y.
// That this gives the same bits as the unswapped kernels is a property of the tensor cores
// (every k16 step sums the same 16 products per element whichever operand each factor came
// from), not of the code: tests/kernels_cuda compares every instantiation with every other bit
// for bit (GemmInvariance.EveryCutlassInstantiationComputesTheSameBits), and cuBLAS, which
// computes these shapes swapped, agrees bit for bit wherever it does not split k (the
// benchmark's "rel diff 0" rows).
// Thread safety: as gemm_bf16().
#pragma once

#include <cuda_runtime.h>

#include "core/status.h"
#include "kernels/cuda/gemm/gemm_schedule.h"

namespace vosti::gemm_detail {

struct TmaGemmCall {
  const void* x = nullptr;      // [m, k] bf16, rows contiguous, 16-byte aligned
  const void* w = nullptr;      // [n, k] bf16, 16-byte aligned
  const float* bias = nullptr;  // [n] f32, 16-byte aligned, or nullptr
  void* y = nullptr;            // [m, n] bf16 or f32, rows ldy elements apart
  int m = 0, n = 0, k = 0;      // n % 8 == 0, k % 64 == 0
  int ldy = 0;                  // >= n, a multiple of 8
  int num_sms = 0;              // the persistent grid's size bound
  int device = 0;               // the current CUDA device
  bool stream_weights = false;  // the weight's loads carry the L2 hint evict-first (GemmLaunch)
};

// One instantiation (Tile, output element type: uint16_t = bf16, float); defined in
// gemm_bf16_sm90_tma_<tile>.cu, built for sm_90a only.
template <GemmTmaTile Tile, typename Out>
Status run_tma_gemm(const TmaGemmCall& call, cudaStream_t stream);

// Dispatches to the instantiation `tile` for bf16 (out_f32 false) or f32 output.
Status launch_wgmma_tma(const TmaGemmCall& call, GemmTmaTile tile, bool out_f32, cudaStream_t stream);

}  // namespace vosti::gemm_detail
