// Dispatch of the kWgmmaTmaWarpSpecialized family to its CUTLASS instantiations (host code;
// the instantiations live in gemm_bf16_sm90_tma_<tile>.cu, built for sm_90a only).
#include "kernels/cuda/gemm_bf16_sm90_tma.h"

#include <cstdint>

namespace vosti::gemm_detail {

namespace {
template <GemmTmaTile Tile>
Status run_out(const TmaGemmCall& call, bool out_f32, cudaStream_t stream) {
  return out_f32 ? run_tma_gemm<Tile, float>(call, stream) : run_tma_gemm<Tile, uint16_t>(call, stream);
}
}  // namespace

Status launch_wgmma_tma(const TmaGemmCall& call, GemmTmaTile tile, bool out_f32, cudaStream_t stream) {
  switch (tile) {
    case GemmTmaTile::kSwapM16N64Basic4x1K128:
      return run_out<GemmTmaTile::kSwapM16N64Basic4x1K128>(call, out_f32, stream);
    case GemmTmaTile::kSwapM16N64Pingpong4x1K128:
      return run_out<GemmTmaTile::kSwapM16N64Pingpong4x1K128>(call, out_f32, stream);
    case GemmTmaTile::kSwapM32N64Basic4x1K128:
      return run_out<GemmTmaTile::kSwapM32N64Basic4x1K128>(call, out_f32, stream);
    case GemmTmaTile::kM64N32Pingpong:
      return run_out<GemmTmaTile::kM64N32Pingpong>(call, out_f32, stream);
    case GemmTmaTile::kSwapM32N128Cooperative2x1:
      return run_out<GemmTmaTile::kSwapM32N128Cooperative2x1>(call, out_f32, stream);
    case GemmTmaTile::kSwapM32N64Basic1x2K128:
      return run_out<GemmTmaTile::kSwapM32N64Basic1x2K128>(call, out_f32, stream);
    case GemmTmaTile::kSwapM64N64Basic4x1K128:
      return run_out<GemmTmaTile::kSwapM64N64Basic4x1K128>(call, out_f32, stream);
    case GemmTmaTile::kSwapM32N64Pingpong1x2:
      return run_out<GemmTmaTile::kSwapM32N64Pingpong1x2>(call, out_f32, stream);
    case GemmTmaTile::kSwapM64N128Cooperative2x1:
      return run_out<GemmTmaTile::kSwapM64N128Cooperative2x1>(call, out_f32, stream);
    case GemmTmaTile::kSwapM64N64Basic1x2:
      return run_out<GemmTmaTile::kSwapM64N64Basic1x2>(call, out_f32, stream);
    case GemmTmaTile::kM64N96Basic2x1:
      return run_out<GemmTmaTile::kM64N96Basic2x1>(call, out_f32, stream);
    case GemmTmaTile::kSwapM128N64Pingpong:
      return run_out<GemmTmaTile::kSwapM128N64Pingpong>(call, out_f32, stream);
    case GemmTmaTile::kSwapM128N128Cooperative:
      return run_out<GemmTmaTile::kSwapM128N128Cooperative>(call, out_f32, stream);
    case GemmTmaTile::kSwapM128N64Pingpong1x2:
      return run_out<GemmTmaTile::kSwapM128N64Pingpong1x2>(call, out_f32, stream);
    case GemmTmaTile::kM128N96Basic2x1:
      return run_out<GemmTmaTile::kM128N96Basic2x1>(call, out_f32, stream);
    case GemmTmaTile::kM128N128Cooperative2x1:
      return run_out<GemmTmaTile::kM128N128Cooperative2x1>(call, out_f32, stream);
    case GemmTmaTile::kM128N256Cooperative2x1:
      return run_out<GemmTmaTile::kM128N256Cooperative2x1>(call, out_f32, stream);
  }
  return invalid_argument("gemm_bf16: unknown GemmTmaTile");
}

}  // namespace vosti::gemm_detail
