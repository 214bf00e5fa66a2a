// Planted chain violations for the mma.sync GEMM's chain comparison (verify/analyzer/gemm_chains.py;
// verify/analyzer/mutants.py compiles this file to sm_80 PTX and runs the comparison on it). A copy
// of gemm_bf16_kernel (src/kernels/cuda/gemm/gemm_bf16.cu, the loop a segment) with one more template
// argument, kPlant:
//   0  the clean copy: every plan must store the contract's DAG;
//   1  the split path's last CTA sums the partials in reverse segment order (P_{S-1} + ... + P_0);
//   2  the BM = 16 instantiation takes each k-block's k16 steps in the order 16, 32, 48, 0 (a chain
//      that starts at the block's second step and adds its first last).
// Each plan of a planted variant is still batch invariant on its own; only the comparison of the
// plans' chains with the contract catches them. Never linked into the engine.
#include <cuda_bf16.h>

#include "kernels/cuda/gemm/gemm_device.cuh"
#include "kernels/cuda/ptx/mma_ptx.cuh"

namespace vosti::gemm_planted {

using gemm_detail::GemmParams;
using gemm_detail::load_stage;
using gemm_detail::part_begin;
using gemm_detail::store_pair;
using gemm_detail::swz;

template <int BM, int WM, int WN, int STAGES>
struct TileConfig {
  static constexpr int kThreads = WM * WN * 32;
  static constexpr int kWarpM = BM / WM;
  static constexpr int kWarpN = kGemmBlockN / WN;
  static constexpr int kMi = kWarpM / 16;
  static constexpr int kNi = kWarpN / 8;
  static constexpr int kStageElems = (BM + kGemmBlockN) * kGemmBlockK;
};

template <class C, int BM, int kPlant>
__device__ __forceinline__ void mma_stage(float (&acc)[C::kMi][C::kNi][4], const __nv_bfloat16* stage, int warp_m,
                                          int warp_n, int lane) {
  const __nv_bfloat16* sa = stage;
  const __nv_bfloat16* sb = stage + BM * kGemmBlockK;
#pragma unroll
  for (int step = 0; step < kGemmBlockK / 16; ++step) {
    const int kk = kPlant == 2 && BM == 16 ? (step + 1) % (kGemmBlockK / 16) : step;
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

template <class C>
__device__ __forceinline__ void store_partial(const GemmParams& p, const float (&acc)[C::kMi][C::kNi][4], int seg,
                                              int row0, int col0, int lane) {
  const size_t plane = static_cast<size_t>(p.m) * p.n;
#pragma unroll
  for (int mi = 0; mi < C::kMi; ++mi)
#pragma unroll
    for (int ni = 0; ni < C::kNi; ++ni)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int row = row0 + mi * 16 + (lane >> 2) + h * 8;
        const int col = col0 + ni * 8 + (lane & 3) * 2;
        if (row < p.m && col < p.n) {
          float* dst = p.partials + seg * plane + static_cast<size_t>(row) * p.n + col;
          __stcg(reinterpret_cast<float2*>(dst), make_float2(acc[mi][ni][2 * h], acc[mi][ni][2 * h + 1]));
        }
      }
}

// The combine: P_0 + P_1 + ... (kPlant 1: P_{S-1} + P_{S-2} + ... + P_0).
template <int kPlant>
__device__ __forceinline__ float2 sum_segments(const GemmParams& p, int row, int col) {
  const size_t plane = static_cast<size_t>(p.m) * p.n;
  const float* src = p.partials + static_cast<size_t>(row) * p.n + col;
  const int first = kPlant == 1 ? p.num_segments - 1 : 0;
  float2 t = __ldcg(reinterpret_cast<const float2*>(src + first * plane));
  for (int i = 1; i < p.num_segments; ++i) {
    const int s = kPlant == 1 ? p.num_segments - 1 - i : i;
    const float2 v = __ldcg(reinterpret_cast<const float2*>(src + s * plane));
    t.x = t.x + v.x;
    t.y = t.y + v.y;
  }
  return t;
}

template <int BM, int WM, int WN, int STAGES, int kPlant>
__global__ void __launch_bounds__(WM* WN * 32) gemm_bf16_kernel(GemmParams p) {
  using C = TileConfig<BM, WM, WN, STAGES>;
  extern __shared__ __align__(128) unsigned char smem_raw[];
  __nv_bfloat16* smem = reinterpret_cast<__nv_bfloat16*>(smem_raw);
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  const int warp_m = warp / WN;
  const int warp_n = warp % WN;
  const int m0 = blockIdx.x * BM;
  const int n0 = blockIdx.y * kGemmBlockN;
  const int group = p.split ? static_cast<int>(blockIdx.z) : 0;
  const int seg_lo = part_begin(group, p.num_segments, p.num_groups);
  const int seg_hi = part_begin(group + 1, p.num_segments, p.num_groups);
  const int kbs = p.num_k_blocks / p.num_segments;
  const int kb_begin = seg_lo * kbs;
  const int kb_end = seg_hi * kbs;
  const int row0 = m0 + warp_m * C::kWarpM;
  const int col0 = n0 + warp_n * C::kWarpN;

  float total[C::kMi][C::kNi][4];
#pragma unroll
  for (int s = 0; s < STAGES - 1; ++s) {
    if (kb_begin + s < kb_end) load_stage<BM, C::kThreads>(smem + s * C::kStageElems, p, m0, n0, kb_begin + s);
    mma_ptx::cp_async_commit();
  }
  int kb = kb_begin;
  for (int seg = seg_lo; seg < seg_hi; ++seg) {
    float acc[C::kMi][C::kNi][4];
#pragma unroll
    for (int mi = 0; mi < C::kMi; ++mi)
#pragma unroll
      for (int ni = 0; ni < C::kNi; ++ni)
#pragma unroll
        for (int e = 0; e < 4; ++e) acc[mi][ni][e] = 0.f;
    for (int j = 0; j < kbs; ++j, ++kb) {
      mma_ptx::cp_async_wait<STAGES - 2>();
      __syncthreads();
      const int pf = kb + STAGES - 1;
      if (pf < kb_end) load_stage<BM, C::kThreads>(smem + ((pf - kb_begin) % STAGES) * C::kStageElems, p, m0, n0, pf);
      mma_ptx::cp_async_commit();
      mma_stage<C, BM, kPlant>(acc, smem + ((kb - kb_begin) % STAGES) * C::kStageElems, warp_m, warp_n, lane);
    }
    if (p.split) {
      store_partial<C>(p, acc, seg, row0, col0, lane);
    } else {
#pragma unroll
      for (int mi = 0; mi < C::kMi; ++mi)
#pragma unroll
        for (int ni = 0; ni < C::kNi; ++ni)
#pragma unroll
          for (int e = 0; e < 4; ++e) total[mi][ni][e] = seg == 0 ? acc[mi][ni][e] : total[mi][ni][e] + acc[mi][ni][e];
    }
  }
  mma_ptx::cp_async_wait<0>();

  const int g = lane >> 2;
  const int q = (lane & 3) * 2;
  if (!p.split) {
#pragma unroll
    for (int mi = 0; mi < C::kMi; ++mi)
#pragma unroll
      for (int ni = 0; ni < C::kNi; ++ni)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int row = m0 + warp_m * C::kWarpM + mi * 16 + g + h * 8;
          const int col = n0 + warp_n * C::kWarpN + ni * 8 + q;
          if (row < p.m && col < p.n) store_pair(p, row, col, total[mi][ni][2 * h], total[mi][ni][2 * h + 1]);
        }
    return;
  }
  __threadfence();
  __syncthreads();
  __shared__ int s_is_last;
  const unsigned tile = blockIdx.y * gridDim.x + blockIdx.x;
  if (threadIdx.x == 0) s_is_last = atomicAdd(&p.counters[tile], 1u) == static_cast<unsigned>(p.num_groups - 1);
  __syncthreads();
  if (!s_is_last) return;
  __threadfence();
#pragma unroll
  for (int mi = 0; mi < C::kMi; ++mi)
#pragma unroll
    for (int ni = 0; ni < C::kNi; ++ni)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int row = m0 + warp_m * C::kWarpM + mi * 16 + g + h * 8;
        const int col = n0 + warp_n * C::kWarpN + ni * 8 + q;
        if (row < p.m && col < p.n) {
          const float2 t = sum_segments<kPlant>(p, row, col);
          store_pair(p, row, col, t.x, t.y);
        }
      }
  if (threadIdx.x == 0) p.counters[tile] = 0;
}

#define VOSTI_PLANTED_GEMM(plant)                                            \
  template __global__ void gemm_bf16_kernel<16, 1, 4, 4, plant>(GemmParams); \
  template __global__ void gemm_bf16_kernel<64, 2, 4, 4, plant>(GemmParams); \
  template __global__ void gemm_bf16_kernel<128, 2, 4, 4, plant>(GemmParams);
VOSTI_PLANTED_GEMM(0)
VOSTI_PLANTED_GEMM(1)
VOSTI_PLANTED_GEMM(2)
#undef VOSTI_PLANTED_GEMM

}  // namespace vosti::gemm_planted
