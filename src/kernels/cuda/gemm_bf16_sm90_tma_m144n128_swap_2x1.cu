// The kWgmmaTmaWarpSpecialized instantiations with GemmTmaTile::kSwapM144N128Cooperative2x1, bf16 and f32 output
// (one translation unit per tile so a build compiles them in parallel; sm_90a only).
#include <cstdint>

#include "kernels/cuda/gemm_bf16_sm90_tma.cuh"

namespace vosti::gemm_detail {

template Status run_tma_gemm<GemmTmaTile::kSwapM144N128Cooperative2x1, uint16_t>(const TmaGemmCall&, cudaStream_t);
template Status run_tma_gemm<GemmTmaTile::kSwapM144N128Cooperative2x1, float>(const TmaGemmCall&, cudaStream_t);

}  // namespace vosti::gemm_detail
