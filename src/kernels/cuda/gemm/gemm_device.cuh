// Device-side pieces of the hand-written bf16 GEMM kernel (gemm_bf16.cu: mma.sync; the wgmma
// variant in dev/cuda/gemm_wgmma builds on them too): kernel parameters, the cp.async tile
// loader and the epilogue store. Internal to src/kernels/cuda/gemm.
// Shared-memory tile layout: [rows][kGemmBlockK] bf16, 128 bytes a row, the 16-byte chunk c
// of row r stored at chunk c ^ (r % 8): conflict-free for ldmatrix and, on a 1024-byte
// aligned tile, exactly the 128-byte swizzle that wgmma descriptors describe.
#pragma once

#include <cuda_bf16.h>

#include "kernels/cuda/cuda_status.h"
#include "kernels/cuda/gemm/gemm_bf16.h"
#include "kernels/cuda/ptx/mma_ptx.cuh"

namespace vosti::gemm_detail {

struct GemmParams {
  const __nv_bfloat16* x;  // [m, k]
  const __nv_bfloat16* w;  // [n, k]
  const float* bias;       // [n] or nullptr
  void* y;                 // [m, n]
  float* partials;         // [num_segments, m, n] (split launches)
  unsigned* counters;      // [num_m_tiles * num_n_tiles] (split launches)
  int m, n, k;
  int num_k_blocks, num_segments;
  int num_groups;  // CTAs per tile along k; > 1 means a split launch
  int out_f32;
  int split;
};

// First of `total` items in part `i` of `parts` contiguous parts (k-blocks of a segment,
// segments of a group): i * total / parts.
__device__ __forceinline__ int part_begin(int i, int total, int parts) {
  return static_cast<int>(static_cast<long long>(i) * total / parts);
}

using mma_ptx::cp_async_commit;
using mma_ptx::cp_async_wait;

// Element offset of (row, 16-byte chunk) in a swizzled [rows][64] bf16 tile.
__device__ __forceinline__ int swz(int row, int chunk) { return row * kGemmBlockK + ((chunk ^ (row & 7)) << 3); }

// Loads k-block kb of the x tile (BM rows from m0) and the w tile (kGemmBlockN rows from n0)
// into `stage` ([BM + kGemmBlockN][kGemmBlockK], swizzled); rows past m or n are zero-filled.
template <int BM, int THREADS>
__device__ __forceinline__ void load_stage(__nv_bfloat16* stage, const GemmParams& p, int m0, int n0, int kb) {
  const int k0 = kb * kGemmBlockK;
  __nv_bfloat16* sa = stage;
  __nv_bfloat16* sb = stage + BM * kGemmBlockK;
  for (int i = threadIdx.x; i < BM * 8; i += THREADS) {
    const int r = i >> 3, c = i & 7;
    const bool ok = m0 + r < p.m;
    const __nv_bfloat16* src = p.x + static_cast<size_t>(ok ? m0 + r : 0) * p.k + k0 + c * 8;
    mma_ptx::cp_async_16(mma_ptx::smem_addr(sa + swz(r, c)), src, ok);
  }
  for (int i = threadIdx.x; i < kGemmBlockN * 8; i += THREADS) {
    const int r = i >> 3, c = i & 7;
    const bool ok = n0 + r < p.n;
    const __nv_bfloat16* src = p.w + static_cast<size_t>(ok ? n0 + r : 0) * p.k + k0 + c * 8;
    mma_ptx::cp_async_16(mma_ptx::smem_addr(sb + swz(r, c)), src, ok);
  }
}

__device__ __forceinline__ void store_pair(const GemmParams& p, int row, int col, float v0, float v1) {
  if (p.bias != nullptr) {
    v0 = v0 + p.bias[col];
    v1 = v1 + p.bias[col + 1];
  }
  const size_t off = static_cast<size_t>(row) * p.n + col;
  if (p.out_f32) {
    *reinterpret_cast<float2*>(static_cast<float*>(p.y) + off) = make_float2(v0, v1);
  } else {
    *reinterpret_cast<__nv_bfloat162*>(static_cast<__nv_bfloat16*>(p.y) + off) = __floats2bfloat162_rn(v0, v1);
  }
}

// The combine of a split launch, the one place its order is fixed: the pair at (row, col)
// of P_0 + P_1 + ... + P_{S-1}, summed left to right from the workspace planes.
__device__ __forceinline__ float2 sum_segments_in_order(const GemmParams& p, int row, int col) {
  const size_t plane = static_cast<size_t>(p.m) * p.n;
  const float* src = p.partials + static_cast<size_t>(row) * p.n + col;
  float2 t = __ldcg(reinterpret_cast<const float2*>(src));
  for (int s = 1; s < p.num_segments; ++s) {
    const float2 v = __ldcg(reinterpret_cast<const float2*>(src + s * plane));
    t.x = t.x + v.x;
    t.y = t.y + v.y;
  }
  return t;
}

// The CTA tile of the mma.sync kernels (gemm_bf16.cu, moe/moe_grouped_gemm.cuh): BM rows of x by
// kGemmBlockN columns of w, WM x WN warps, STAGES cp.async stages.
template <int BM, int WM, int WN, int STAGES>
struct TileConfig {
  static constexpr int kThreads = WM * WN * 32;
  static constexpr int kWarpM = BM / WM;
  static constexpr int kWarpN = kGemmBlockN / WN;
  static constexpr int kMi = kWarpM / 16;
  static constexpr int kNi = kWarpN / 8;
  static constexpr int kStageElems = (BM + kGemmBlockN) * kGemmBlockK;
  static constexpr int kSmemBytes = STAGES * kStageElems * 2;
  static_assert(kMi >= 1 && kNi % 2 == 0, "warp tile must hold whole m16 x n16 blocks");
};

// acc += the tile in `stage`, one m16n8k16 per (m16, n8) block per 16-column chunk, k increasing.
template <class C, int BM>
__device__ __forceinline__ void mma_stage(float (&acc)[C::kMi][C::kNi][4], const __nv_bfloat16* stage, int warp_m,
                                          int warp_n, int lane) {
  const __nv_bfloat16* sa = stage;
  const __nv_bfloat16* sb = stage + BM * kGemmBlockK;
#pragma unroll
  for (int kk = 0; kk < kGemmBlockK / 16; ++kk) {
    unsigned a[C::kMi][4];
    unsigned b[C::kNi][2];
#pragma unroll
    for (int mi = 0; mi < C::kMi; ++mi) {
      const int row = warp_m * C::kWarpM + mi * 16 + (lane & 15);
      mma_ptx::ldsm_x4(a[mi], mma_ptx::smem_addr(sa + swz(row, kk * 2 + (lane >> 4))));
    }
#pragma unroll
    for (int nj = 0; nj < C::kNi / 2; ++nj) {
      const int row = warp_n * C::kWarpN + nj * 16 + (lane & 7) + ((lane >> 4) << 3);
      unsigned r[4];
      mma_ptx::ldsm_x4(r, mma_ptx::smem_addr(sb + swz(row, kk * 2 + ((lane >> 3) & 1))));
      b[2 * nj][0] = r[0];
      b[2 * nj][1] = r[1];
      b[2 * nj + 1][0] = r[2];
      b[2 * nj + 1][1] = r[3];
    }
#pragma unroll
    for (int mi = 0; mi < C::kMi; ++mi) {
#pragma unroll
      for (int ni = 0; ni < C::kNi; ++ni) mma_ptx::mma_bf16(acc[mi][ni], a[mi], b[ni][0], b[ni][1]);
    }
  }
}

// The launch of the mma.sync family (gemm_bf16.cu).
Status launch_mma_sync(const GemmParams& p, const GemmLaunch& l, cudaStream_t stream);

}  // namespace vosti::gemm_detail
