// The grouped expert GEMM (moe_kernels.h, step 4): the launch over the tile list's upper bound and
// the schedule of an expert weight shape. The tile's arithmetic: moe_grouped_gemm.cuh.
#include <algorithm>
#include <string>

#include "kernels/cuda/cuda_status.h"
#include "kernels/cuda/moe/moe_grouped_gemm.cuh"
#include "kernels/cuda/moe/moe_kernels.h"

namespace vosti {
namespace moe_detail {
namespace {

constexpr int kStages = 4;

// blockIdx.x: the tile of the list (past *num_tiles: nothing to do), blockIdx.y: the n-tile.
__global__ void __launch_bounds__(MoeTileConfig::kThreads) moe_grouped_gemm_kernel(MoeGemmParams g) {
  extern __shared__ __align__(128) unsigned char smem_raw[];
  if (static_cast<int>(blockIdx.x) >= *g.num_tiles) return;
  const MoeTile t = g.tiles[blockIdx.x];
  moe_expert_tile<MoeTileConfig, kMoeBlockM, kStages>(g, t, static_cast<int>(blockIdx.y) * kGemmBlockN, 1, smem_raw);
}

}  // namespace
}  // namespace moe_detail

Result<MoeGemmSchedule> select_moe_gemm_schedule(int64_t n, int64_t k) {
  if (n <= 0 || n % 8 != 0 || n > (int64_t{1} << 24))
    return invalid_argument("MoE expert GEMM: weight rows n=" + std::to_string(n) +
                            " must be a positive multiple of 8 (pad the expert weight)");
  if (k <= 0 || k % kGemmBlockK != 0 || k > (int64_t{1} << 24))
    return invalid_argument("MoE expert GEMM: inner dimension k=" + std::to_string(k) +
                            " must be a positive multiple of " + std::to_string(kGemmBlockK) +
                            " (pad the expert weight and activations)");
  MoeGemmSchedule s;
  s.n = n;
  s.k = k;
  s.num_k_blocks = static_cast<int>(k / kGemmBlockK);
  s.block_m = moe_detail::kMoeBlockM;
  return s;
}

int64_t moe_max_tiles(int64_t entries, int64_t num_experts, int block_m) {
  return (entries + block_m - 1) / block_m + std::min(num_experts, entries);
}

Status moe_grouped_gemm(const MoeGemmSchedule& s, const MoeGroupedGemmArgs& a, cudaStream_t stream) {
  if (a.x == nullptr || a.w == nullptr || a.y == nullptr || a.tiles == nullptr || a.num_tiles == nullptr)
    return invalid_argument("moe_grouped_gemm: x, w, y, tiles and num_tiles must be device pointers");
  if (a.out_dtype != DType::kF32 && a.out_dtype != DType::kBF16)
    return invalid_argument("moe_grouped_gemm: out_dtype must be f32 or bf16");
  if (s.block_m != moe_detail::kMoeBlockM || s.num_k_blocks < 1 || s.k != int64_t{s.num_k_blocks} * kGemmBlockK ||
      s.n % 8 != 0)
    return invalid_argument("moe_grouped_gemm: schedule not made by select_moe_gemm_schedule()");
  if (a.max_tiles < 1 || a.max_tiles > 0x7fffffff) return invalid_argument("moe_grouped_gemm: max_tiles out of range");
  if (a.scratch_row < 0 || a.scratch_row > 0x7fffffff - s.block_m)
    return invalid_argument("moe_grouped_gemm: scratch_row out of range");
  moe_detail::MoeGemmParams g{};
  g.x = reinterpret_cast<const __nv_bfloat16*>(a.x);
  g.w = reinterpret_cast<const __nv_bfloat16*>(a.w);
  g.y = a.y;
  g.tiles = a.tiles;
  g.num_tiles = a.num_tiles;
  g.n = static_cast<int>(s.n);
  g.k = static_cast<int>(s.k);
  g.num_k_blocks = s.num_k_blocks;
  g.out_f32 = a.out_dtype == DType::kF32 ? 1 : 0;
  g.scratch_row = static_cast<int>(a.scratch_row);
  using C = moe_detail::MoeTileConfig;
  constexpr int kSmem = moe_detail::kStages * C::kStageElems * 2;
  auto kernel = moe_detail::moe_grouped_gemm_kernel;
  VOSTI_CUDA_RETURN_IF_ERROR(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem));
  const dim3 grid(static_cast<unsigned>(a.max_tiles), static_cast<unsigned>((s.n + kGemmBlockN - 1) / kGemmBlockN));
  kernel<<<grid, C::kThreads, kSmem, stream>>>(g);
  return cuda_launch_status("moe_grouped_gemm_kernel");
}

}  // namespace vosti
