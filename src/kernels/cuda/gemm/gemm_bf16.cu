// The mma.sync bf16 GEMM kernel and the public entry points; see gemm_bf16.h and
// gemm_schedule.h for the arithmetic contract and gemm_device.cuh for the tile layout.
// cp.async fills STAGES tiles ahead; ldmatrix feeds m16n8k16 tensor-core steps.
// Rows past m (or n) are zero-filled and never stored.
#include <cuda_bf16.h>

#include <algorithm>
#include <string>

#include "kernels/cuda/cuda_status.h"
#include "kernels/cuda/gemm/gemm_bf16.h"
#include "kernels/cuda/gemm/gemm_bf16_sm90_tma.h"
#include "kernels/cuda/gemm/gemm_device.cuh"
#include "kernels/cuda/ptx/mma_ptx.cuh"

namespace vosti {
namespace gemm_detail {
namespace {

// Stores one finished segment result P_seg of this thread's fragments to its workspace plane.
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

// One CTA computes a BM x kGemmBlockN tile of y over segments [seg_lo, seg_hi): blockIdx.x is
// the m-tile, blockIdx.y the n-tile, blockIdx.z the k-group of a split launch.
template <int BM, int WM, int WN, int STAGES>
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
  const int kbs = p.num_k_blocks / p.num_segments;  // k-blocks a segment (select_schedule: S divides them)
  const int kb_begin = seg_lo * kbs;
  const int kb_end = seg_hi * kbs;
  const int row0 = m0 + warp_m * C::kWarpM;  // this warp's first row and column
  const int col0 = n0 + warp_n * C::kWarpN;

  float total[C::kMi][C::kNi][4];
#pragma unroll
  for (int s = 0; s < STAGES - 1; ++s) {
    if (kb_begin + s < kb_end) load_stage<BM, C::kThreads>(smem + s * C::kStageElems, p, m0, n0, kb_begin + s);
    cp_async_commit();
  }
  // Segment by segment: P_s is the chain over the segment's k-blocks from a zero accumulator (the
  // same kbs steps whichever CTA runs it); the copies run STAGES - 1 k-blocks ahead across segments.
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
      cp_async_wait<STAGES - 2>();
      __syncthreads();
      const int pf = kb + STAGES - 1;
      if (pf < kb_end) load_stage<BM, C::kThreads>(smem + ((pf - kb_begin) % STAGES) * C::kStageElems, p, m0, n0, pf);
      cp_async_commit();
      mma_stage<C, BM>(acc, smem + ((kb - kb_begin) % STAGES) * C::kStageElems, warp_m, warp_n, lane);
    }
    if (p.split) {  // publish P_s
      store_partial<C>(p, acc, seg, row0, col0, lane);
    } else {  // S_s = S_{s-1} + P_s, S_0 = P_0 (one CTA: seg_lo = 0)
#pragma unroll
      for (int mi = 0; mi < C::kMi; ++mi)
#pragma unroll
        for (int ni = 0; ni < C::kNi; ++ni)
#pragma unroll
          for (int e = 0; e < 4; ++e) total[mi][ni][e] = seg == 0 ? acc[mi][ni][e] : total[mi][ni][e] + acc[mi][ni][e];
    }
  }
  cp_async_wait<0>();

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

  // Split launch: every P_s is published; the tile's last CTA (by an integer counter) sums
  // P_0 + P_1 + ... in segment order; which CTA is last does not change that order.
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
          const float2 t = sum_segments_in_order(p, row, col);
          store_pair(p, row, col, t.x, t.y);
        }
      }
  if (threadIdx.x == 0) p.counters[tile] = 0;  // ready for the next call on this workspace
}

template <int BM, int WM, int WN, int STAGES>
Status launch(const GemmParams& p, const GemmLaunch& l, cudaStream_t stream) {
  using C = TileConfig<BM, WM, WN, STAGES>;
  auto kernel = gemm_bf16_kernel<BM, WM, WN, STAGES>;
  VOSTI_CUDA_RETURN_IF_ERROR(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, C::kSmemBytes));
  const dim3 grid(l.num_m_tiles, l.num_n_tiles, l.num_groups);
  kernel<<<grid, C::kThreads, C::kSmemBytes, stream>>>(p);
  return cuda_launch_status("gemm_bf16_kernel");
}

}  // namespace

Status launch_mma_sync(const GemmParams& p, const GemmLaunch& l, cudaStream_t stream) {
  switch (l.block_m) {
    case 16:
      return launch<16, 1, 4, 4>(p, l, stream);
    case 64:
      return launch<64, 2, 4, 4>(p, l, stream);
    default:
      return launch<128, 2, 4, 4>(p, l, stream);
  }
}

}  // namespace gemm_detail

size_t gemm_workspace_bytes(const GemmSchedule& schedule, int64_t max_m, int num_sms) {
  size_t most = 0;
  // Split launches have fewer m-tiles than 3 * num_sms.
  const int64_t last_split_m = std::min<int64_t>(max_m, static_cast<int64_t>(128) * 3 * std::max(num_sms, 1));
  for (int64_t m = 1; m <= last_split_m; ++m)
    most = std::max(most, plan_gemm_launch(schedule, m, num_sms).workspace_bytes);
  return most;
}

Status gemm_bf16(const GemmSchedule& schedule, const GemmArgs& args, GemmWorkspace workspace, cudaStream_t stream,
                 const GemmDevice& device) {
  return gemm_bf16_with_launch(schedule, args, plan_gemm_launch(schedule, std::max<int64_t>(args.m, 1), device.num_sms),
                               workspace, stream, device);
}

namespace {
// The kWgmmaTmaWarpSpecialized family, sm_90a only: one k segment, no workspace.
Status launch_tma_family(const GemmSchedule& schedule, const GemmArgs& args, const GemmLaunch& l, cudaStream_t stream,
                         const GemmDevice& dev) {
  if (schedule.n % 8 != 0) return invalid_argument("gemm_bf16: schedule not made by select_schedule()");
  const bool split = l.tma_split_n != 0;
  if (gemm_tma_tile_shape(l.tma_tile).m == 0 || (split && gemm_tma_tile_shape(l.tma_tail_tile).m == 0)) {
    return invalid_argument("gemm_bf16: unknown GemmTmaTile in the launch");
  }
  // One segment, which may end in a partial, zero-filled k-tile (the rule avoids it, the tests run it).
  if (schedule.num_segments != 1) {
    return invalid_argument("gemm_bf16: the kWgmmaTmaWarpSpecialized family evaluates one k segment, the schedule " +
                            std::to_string(schedule.num_segments));
  }
  const GemmLaunch want = make_gemm_tma_launch(schedule, args.m, l.tma_tile);
  if (l.block_m != want.block_m || l.num_m_tiles != want.num_m_tiles || l.num_n_tiles != want.num_n_tiles ||
      l.num_groups != 1 || l.split_segments) {
    return invalid_argument("gemm_bf16: launch not made for this schedule and m (use make_gemm_tma_launch)");
  }
  const int64_t head_n = gemm_tma_tile_shape(l.tma_tile).n;
  if (l.tma_split_n < 0 || l.tma_split_n >= schedule.n || l.tma_split_n % head_n != 0) {
    return invalid_argument("gemm_bf16: column split " + std::to_string(l.tma_split_n) +
                            " is not a multiple of the head tile's " + std::to_string(head_n) +
                            " columns in [0, n=" + std::to_string(schedule.n) + ")");
  }
  if (!dev.has_wgmma) {
    return failed_precondition("gemm_bf16: the kWgmmaTmaWarpSpecialized schedule runs on sm_90 (H100/H200) only");
  }
  const bool out_f32 = args.out_dtype == DType::kF32;
  // Columns [col0, col1) of y by `tile`: w's rows, the bias and y's columns from col0 on.
  const auto run_part = [&](GemmTmaTile tile, int64_t col0, int64_t col1) {
    gemm_detail::TmaGemmCall c;
    c.x = args.x;
    c.w = static_cast<const uint16_t*>(args.w) + col0 * schedule.k;
    c.bias = args.bias != nullptr ? args.bias + col0 : nullptr;
    c.y = static_cast<char*>(args.y) + col0 * (out_f32 ? sizeof(float) : sizeof(uint16_t));
    // Rows computed: m rounded up to the tile height where the caller's buffers hold them (see
    // GemmArgs::row_capacity), so no TMA box reads past the end of x.
    const int64_t tile_m = gemm_tma_tile_shape(tile).m;
    c.m = static_cast<int>(std::min(std::max(args.row_capacity, args.m), (args.m + tile_m - 1) / tile_m * tile_m));
    c.n = static_cast<int>(col1 - col0);
    c.k = static_cast<int>(schedule.k);
    c.ldy = static_cast<int>(schedule.n);
    c.num_sms = dev.num_sms;
    c.device = dev.device;
    c.stream_weights = l.tma_stream_weights;
    return gemm_detail::launch_wgmma_tma(c, tile, out_f32, stream);
  };
  if (!split) return run_part(l.tma_tile, 0, schedule.n);
  const Status head = run_part(l.tma_tile, 0, l.tma_split_n);
  if (!head.ok()) return head;
  return run_part(l.tma_tail_tile, l.tma_split_n, schedule.n);
}
}  // namespace

Status gemm_bf16_with_launch(const GemmSchedule& schedule, const GemmArgs& args, const GemmLaunch& l,
                             GemmWorkspace workspace, cudaStream_t stream, const GemmDevice& device) {
  if (args.x == nullptr || args.w == nullptr || args.y == nullptr) {
    return invalid_argument("gemm_bf16: x, w and y must be device pointers, got a null one");
  }
  if (args.m < 1 || args.m > (int64_t{1} << 31) - 1 - 128) {
    return invalid_argument("gemm_bf16: row count m=" + std::to_string(args.m) + " out of range [1, 2^31 - 129]");
  }
  if (args.row_capacity != 0 && args.row_capacity < args.m) {
    return invalid_argument("gemm_bf16: row_capacity=" + std::to_string(args.row_capacity) +
                            " below m=" + std::to_string(args.m) + " (0, or the rows x and y hold)");
  }
  if (args.out_dtype != DType::kBF16 && args.out_dtype != DType::kF32) {
    return invalid_argument("gemm_bf16: out_dtype must be bf16 or f32");
  }
  if (schedule.num_k_blocks < 1 || schedule.num_segments < 1 || schedule.num_k_blocks % schedule.num_segments != 0 ||
      schedule.k != static_cast<int64_t>(schedule.num_k_blocks) * kGemmBlockK) {
    return invalid_argument("gemm_bf16: schedule not made by select_schedule()");
  }
  if (schedule.instruction == GemmInstruction::kWgmmaTmaWarpSpecialized) {
    return launch_tma_family(schedule, args, l, stream, device);
  }
  if ((l.block_m != 16 && l.block_m != 64 && l.block_m != 128) ||
      l.num_m_tiles != (args.m + l.block_m - 1) / l.block_m ||
      l.num_n_tiles != (schedule.n + kGemmBlockN - 1) / kGemmBlockN || l.num_groups < 1 ||
      l.num_groups > schedule.num_segments || l.split_segments != (l.num_groups > 1) ||
      (l.split_segments && static_cast<size_t>(l.num_m_tiles) * l.num_n_tiles * sizeof(unsigned) > l.counter_bytes)) {
    return invalid_argument("gemm_bf16: launch not made for this schedule and m (use make_gemm_launch)");
  }
  if (l.split_segments && (workspace.data == nullptr || workspace.bytes < l.workspace_bytes)) {
    return invalid_argument("gemm_bf16: workspace of " + std::to_string(workspace.bytes) + " bytes, this call needs " +
                            std::to_string(l.workspace_bytes) + " (size it with gemm_workspace_bytes())");
  }
  gemm_detail::GemmParams p{};
  p.x = reinterpret_cast<const __nv_bfloat16*>(args.x);
  p.w = reinterpret_cast<const __nv_bfloat16*>(args.w);
  p.bias = args.bias;
  p.y = args.y;
  p.m = static_cast<int>(args.m);
  p.n = static_cast<int>(schedule.n);
  p.k = static_cast<int>(schedule.k);
  p.num_k_blocks = schedule.num_k_blocks;
  p.num_segments = schedule.num_segments;
  p.out_f32 = args.out_dtype == DType::kF32 ? 1 : 0;
  p.num_groups = l.num_groups;
  p.split = l.split_segments ? 1 : 0;
  if (l.split_segments) {
    p.counters = static_cast<unsigned*>(workspace.data);
    p.partials = reinterpret_cast<float*>(static_cast<unsigned char*>(workspace.data) + l.counter_bytes);
  }
  return gemm_detail::launch_mma_sync(p, l, stream);
}

}  // namespace vosti
