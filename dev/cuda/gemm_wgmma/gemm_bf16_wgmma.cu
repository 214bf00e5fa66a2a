// The wgmma (sm_90a) bf16 GEMM kernel: the same tiles, cp.async pipeline, k segments and
// split/loop launch plans as the mma.sync kernel (gemm_bf16.cu), with each warpgroup
// computing 64 rows x kGemmBlockN columns by wgmma.mma_async m64n128k16 from shared-memory
// descriptors (128-byte swizzle, K-major A and B). Per output element: one k16 tensor-core
// step per 16 columns of k, in increasing k, from a zero accumulator per segment; the
// segment results are added in segment order (gemm_schedule.h). Built for every target;
// the kernel body exists only for sm_90a, and the launcher refuses other devices.
#include <cstdint>

#include "kernels/cuda/gemm/gemm_device.cuh"
#include "kernels/cuda/ptx/wgmma_ptx.cuh"

#if defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 900) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define VOSTI_HAVE_WGMMA 1
#endif

namespace vosti::gemm_detail {
namespace {

#ifdef VOSTI_HAVE_WGMMA  // the device helpers exist only in the sm_90a compilation

constexpr int kWgmmaAcc = 64;  // f32 accumulators per thread of an m64n128 warpgroup tile

using wgmma_ptx::fence_operands;
using wgmma_ptx::fence_proxy_async;

// Shared-memory matrix descriptor of a 1024-byte aligned [rows][64] bf16 tile, 128-byte swizzle
// (K-major: the leading byte offset is unused; the stride is one 8-row x 128-byte atom).
__device__ __forceinline__ uint64_t smem_desc(const void* tile) {
  return wgmma_ptx::desc_sw128(static_cast<uint32_t>(__cvta_generic_to_shared(tile)), 16, 1024);
}

__device__ __forceinline__ void wgmma_m64n128k16(float (&d)[kWgmmaAcc], uint64_t desc_a, uint64_t desc_b) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, "
      "%13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, "
      "%35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, "
      "%57, %58, %59, %60, %61, %62, %63}, %64, %65, p, 1, 1, 0, 0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]),
        "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]),
        "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]),
        "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]),
        "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]),
        "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]),
        "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]),
        "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
      : "l"(desc_a), "l"(desc_b), "r"(1));
}

// Calls f(row, col, i) for this thread's accumulator pairs (acc[i], acc[i + 1]) at (row, col..col+1).
template <typename F>
__device__ __forceinline__ void for_each_pair(int row0, int col0, F&& f) {
  const int t = threadIdx.x & 127;
  const int r = row0 + (t >> 5) * 16 + ((t & 31) >> 2);
  const int c = col0 + (t & 3) * 2;
#pragma unroll
  for (int nb = 0; nb < kGemmBlockN / 8; ++nb) {
#pragma unroll
    for (int h = 0; h < 2; ++h) f(r + 8 * h, c + 8 * nb, 4 * nb + 2 * h);
  }
}

#endif  // VOSTI_HAVE_WGMMA

// One CTA: BM / 64 warpgroups, each 64 rows of a BM x kGemmBlockN tile, over the segments of
// its k-group (blockIdx.z) or all segments; blockIdx.x is the m-tile, blockIdx.y the n-tile.
// IN_FLIGHT (0 or 1) wgmma batches may still run while the next k-block is waited for and
// issued; it changes timing only (the batches of one accumulator execute in issue order).
template <int BM, int STAGES, int IN_FLIGHT>
__global__ void __launch_bounds__(BM / 64 * 128) gemm_bf16_wgmma_kernel(GemmParams p) {
#ifdef VOSTI_HAVE_WGMMA
  constexpr int kThreads = BM / 64 * 128;
  constexpr int kStageElems = (BM + kGemmBlockN) * kGemmBlockK;
  constexpr int kAhead = STAGES - 1 - IN_FLIGHT;  // k-blocks loaded ahead; slots of running batches stay untouched
  extern __shared__ unsigned char smem_raw[];
  const uint32_t raw = static_cast<uint32_t>(__cvta_generic_to_shared(smem_raw));
  __nv_bfloat16* smem = reinterpret_cast<__nv_bfloat16*>(smem_raw + ((1024 - (raw & 1023)) & 1023));
  const int wg = threadIdx.x >> 7;
  const int m0 = blockIdx.x * BM;
  const int n0 = blockIdx.y * kGemmBlockN;
  const int group = p.split ? static_cast<int>(blockIdx.z) : 0;
  const int seg_lo = part_begin(group, p.num_segments, p.num_groups);
  const int seg_hi = part_begin(group + 1, p.num_segments, p.num_groups);
  const int kb_begin = part_begin(seg_lo, p.num_k_blocks, p.num_segments);
  const int kb_end = part_begin(seg_hi, p.num_k_blocks, p.num_segments);
  const int row0 = m0 + wg * 64;
  const size_t plane = static_cast<size_t>(p.m) * p.n;

  float acc[kWgmmaAcc];
  float total[kWgmmaAcc];
#pragma unroll
  for (int i = 0; i < kWgmmaAcc; ++i) acc[i] = 0.f, total[i] = 0.f;

#pragma unroll
  for (int s = 0; s < kAhead; ++s) {
    if (kb_begin + s < kb_end) load_stage<BM, kThreads>(smem + s * kStageElems, p, m0, n0, kb_begin + s);
    cp_async_commit();
  }
  int seg = seg_lo;
  int seg_end = part_begin(seg + 1, p.num_k_blocks, p.num_segments);
  for (int kb = kb_begin; kb < kb_end; ++kb) {
    cp_async_wait<kAhead - 1>();
    fence_proxy_async();
    __syncthreads();
    const int pf = kb + kAhead;
    if (pf < kb_end) load_stage<BM, kThreads>(smem + ((pf - kb_begin) % STAGES) * kStageElems, p, m0, n0, pf);
    cp_async_commit();
    const __nv_bfloat16* stage = smem + ((kb - kb_begin) % STAGES) * kStageElems;
    const uint64_t desc_a = smem_desc(stage + wg * 64 * kGemmBlockK);
    const uint64_t desc_b = smem_desc(stage + BM * kGemmBlockK);
    fence_operands(acc);
    wgmma_ptx::fence();
#pragma unroll
    for (int kk = 0; kk < kGemmBlockK / 16; ++kk) wgmma_m64n128k16(acc, desc_a + 2 * kk, desc_b + 2 * kk);  // +32 B
    wgmma_ptx::commit();
    if (kb + 1 == seg_end) {  // segment finished: publish P_s (split) or S_s = S_{s-1} + P_s (S_0 = P_0)
      wgmma_ptx::wait<0>();
      fence_operands(acc);
      if (p.split) {
        for_each_pair(row0, n0, [&](int row, int col, int i) {
          if (row < p.m && col < p.n) {
            float* dst = p.partials + seg * plane + static_cast<size_t>(row) * p.n + col;
            __stcg(reinterpret_cast<float2*>(dst), make_float2(acc[i], acc[i + 1]));
          }
        });
      }
      const bool first = seg == seg_lo;
#pragma unroll
      for (int i = 0; i < kWgmmaAcc; ++i) {
        total[i] = first ? acc[i] : total[i] + acc[i];
        acc[i] = 0.f;
      }
      ++seg;
      seg_end = part_begin(seg + 1, p.num_k_blocks, p.num_segments);
    } else {
      wgmma_ptx::wait<IN_FLIGHT>();
      fence_operands(acc);
    }
  }
  cp_async_wait<0>();
  wgmma_ptx::wait<0>();

  if (!p.split) {
    for_each_pair(row0, n0, [&](int row, int col, int i) {
      if (row < p.m && col < p.n) store_pair(p, row, col, total[i], total[i + 1]);
    });
    return;
  }
  // Split launch: the tile's last CTA (by an integer counter) sums P_0 + P_1 + ... in order.
  __threadfence();
  __syncthreads();
  __shared__ int s_is_last;
  const unsigned tile = blockIdx.y * gridDim.x + blockIdx.x;
  if (threadIdx.x == 0) s_is_last = atomicAdd(&p.counters[tile], 1u) == static_cast<unsigned>(p.num_groups - 1);
  __syncthreads();
  if (!s_is_last) return;
  __threadfence();
  for_each_pair(row0, n0, [&](int row, int col, int) {
    if (row < p.m && col < p.n) {
      const float2 t = sum_segments_in_order(p, row, col);
      store_pair(p, row, col, t.x, t.y);
    }
  });
  if (threadIdx.x == 0) p.counters[tile] = 0;  // ready for the next call on this workspace
#else
  __trap();  // not built for this device: the launcher checks the compute capability first
#endif
}

template <int BM, int STAGES, int IN_FLIGHT>
Status launch(const GemmParams& p, const GemmLaunch& l, cudaStream_t stream) {
  constexpr int kSmemBytes = STAGES * (BM + kGemmBlockN) * kGemmBlockK * 2 + 1024;  // + alignment slack
  auto kernel = gemm_bf16_wgmma_kernel<BM, STAGES, IN_FLIGHT>;
  VOSTI_CUDA_RETURN_IF_ERROR(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes));
  const dim3 grid(l.num_m_tiles, l.num_n_tiles, l.num_groups);
  kernel<<<grid, BM / 64 * 128, kSmemBytes, stream>>>(p);
  return cuda_launch_status("gemm_bf16_wgmma_kernel");
}

}  // namespace

Status launch_wgmma(const GemmParams& p, const GemmLaunch& l, cudaStream_t stream) {
  int device = 0, major = 0, minor = 0;
  VOSTI_CUDA_RETURN_IF_ERROR(cudaGetDevice(&device));
  VOSTI_CUDA_RETURN_IF_ERROR(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  VOSTI_CUDA_RETURN_IF_ERROR(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device));
  if (major != 9 || minor != 0) {
    return failed_precondition(
        "gemm_bf16: the wgmma schedule needs an sm_90 GPU (H100/H200); select the mma.sync "
        "schedule for this device");
  }
  if (l.wgmma_batches_in_flight == 1) {
    return l.block_m == 64 ? launch<64, 4, 1>(p, l, stream) : launch<128, 4, 1>(p, l, stream);
  }
  return l.block_m == 64 ? launch<64, 4, 0>(p, l, stream) : launch<128, 4, 0>(p, l, stream);
}

}  // namespace vosti::gemm_detail
