// Device side of the grouped expert GEMM (moe_kernels.h, step 4): one CTA's m-tile x n-tile of
// one expert, on the mma.sync tile of the dense GEMM (gemm/gemm_device.cuh: the cp.async loader,
// the m16n8k16 stage, the epilogue store). Internal to src/kernels/cuda/moe and its tests (which
// build a planted count-dependent variant on moe_expert_tile's num_segments).
#pragma once

#include <cuda_bf16.h>

#include "kernels/cuda/gemm/gemm_device.cuh"
#include "kernels/cuda/moe/moe_kernels.h"

namespace vosti::moe_detail {

// The tile of the shipped kernel: BM rows, 2 x 4 warps, 4 stages (the dense GEMM's block_m 64).
inline constexpr int kMoeBlockM = 64;
using MoeTileConfig = gemm_detail::TileConfig<kMoeBlockM, 2, 4, 4>;

struct MoeGemmParams {
  const __nv_bfloat16* x;  // [rows, k] permuted rows
  const __nv_bfloat16* w;  // [num_experts, n, k]
  void* y;                 // [rows, n]
  const MoeTile* tiles;    // [>= *num_tiles]
  const int32_t* num_tiles;
  int n, k, num_k_blocks;
  int out_f32;
  int scratch_row;  // y's rows [scratch_row, scratch_row + BM): where a tile's rows past its end go
};

// The gemm_detail::GemmParams of one tile: x and y start at the tile's first row, w is its expert's
// matrix, m is the whole tile height: the loader reads BM rows of x whatever the tile's row count
// (rows past it are the next expert's or scratch; x holds BM rows past the last tile's start), and
// the store sends the rows past the count to y's scratch rows. A row's result reads only its own
// row of x, so the rows past the count reach no stored row; the count reaches only addresses.
__device__ __forceinline__ gemm_detail::GemmParams tile_params(const MoeGemmParams& g, const MoeTile& t) {
  gemm_detail::GemmParams p{};
  p.x = g.x + static_cast<size_t>(t.row0) * g.k;
  p.w = g.w + static_cast<size_t>(t.expert) * g.n * g.k;
  p.bias = nullptr;
  const size_t y_off = static_cast<size_t>(t.row0) * g.n;
  p.y = g.out_f32 ? static_cast<void*>(static_cast<float*>(g.y) + y_off)
                  : static_cast<void*>(static_cast<__nv_bfloat16*>(g.y) + y_off);
  p.m = kMoeBlockM;
  p.n = g.n;
  p.k = g.k;
  p.num_k_blocks = g.num_k_blocks;
  p.num_segments = 1;
  p.num_groups = 1;
  p.out_f32 = g.out_f32;
  p.split = 0;
  return p;
}

// One CTA: the tile t's rows times columns [n0, n0 + kGemmBlockN) of its expert. The k-blocks are
// cut into num_segments equal chains, each from a zero accumulator, added in segment order (the
// shipped kernel passes 1: one chain over all of k; num_segments must divide num_k_blocks).
template <class C, int BM, int STAGES>
__device__ __forceinline__ void moe_expert_tile(const MoeGemmParams& g, const MoeTile& t, int n0, int num_segments,
                                                unsigned char* smem_raw) {
  __nv_bfloat16* smem = reinterpret_cast<__nv_bfloat16*>(smem_raw);
  const gemm_detail::GemmParams p = tile_params(g, t);
  const int rows = t.row_end - t.row0;  // the tile's own rows (the others go to the scratch rows)
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  const int warp_m = warp / (kGemmBlockN / C::kWarpN);
  const int warp_n = warp % (kGemmBlockN / C::kWarpN);
  const int kb_end = p.num_k_blocks;
  const int kbs = kb_end / num_segments;
#pragma unroll
  for (int s = 0; s < STAGES - 1; ++s) {
    if (s < kb_end) gemm_detail::load_stage<BM, C::kThreads>(smem + s * C::kStageElems, p, 0, n0, s);
    gemm_detail::cp_async_commit();
  }
  float total[C::kMi][C::kNi][4];
  int kb = 0;
  for (int seg = 0; seg < num_segments; ++seg) {
    float acc[C::kMi][C::kNi][4];
#pragma unroll
    for (int mi = 0; mi < C::kMi; ++mi)
#pragma unroll
      for (int ni = 0; ni < C::kNi; ++ni)
#pragma unroll
        for (int e = 0; e < 4; ++e) acc[mi][ni][e] = 0.f;
    for (int j = 0; j < kbs; ++j, ++kb) {
      gemm_detail::cp_async_wait<STAGES - 2>();
      __syncthreads();
      const int pf = kb + STAGES - 1;
      if (pf < kb_end) gemm_detail::load_stage<BM, C::kThreads>(smem + (pf % STAGES) * C::kStageElems, p, 0, n0, pf);
      gemm_detail::cp_async_commit();
      gemm_detail::mma_stage<C, BM>(acc, smem + (kb % STAGES) * C::kStageElems, warp_m, warp_n, lane);
    }
#pragma unroll
    for (int mi = 0; mi < C::kMi; ++mi)
#pragma unroll
      for (int ni = 0; ni < C::kNi; ++ni)
#pragma unroll
        for (int e = 0; e < 4; ++e) total[mi][ni][e] = seg == 0 ? acc[mi][ni][e] : total[mi][ni][e] + acc[mi][ni][e];
  }
  gemm_detail::cp_async_wait<0>();
  const int gr = lane >> 2;
  const int q = (lane & 3) * 2;
#pragma unroll
  for (int mi = 0; mi < C::kMi; ++mi)
#pragma unroll
    for (int ni = 0; ni < C::kNi; ++ni)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int row = warp_m * C::kWarpM + mi * 16 + gr + h * 8;
        const int col = n0 + warp_n * C::kWarpN + ni * 8 + q;
        const int at = row < rows ? row : g.scratch_row - t.row0 + row;  // y's row, from the tile's first
        if (col < p.n) gemm_detail::store_pair(p, at, col, total[mi][ni][2 * h], total[mi][ni][2 * h + 1]);
      }
}

}  // namespace vosti::moe_detail
