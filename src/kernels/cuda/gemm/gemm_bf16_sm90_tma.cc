// Dispatch of the kWgmmaTmaWarpSpecialized family to its CUTLASS instantiations (host code;
// the instantiations live in gemm_bf16_sm90_tma_<tile>.cu, built for sm_90a only).
#include "kernels/cuda/gemm/gemm_bf16_sm90_tma.h"

#include <cstddef>
#include <cstdint>
#include <utility>

namespace vosti::gemm_detail {

namespace {
template <GemmTmaTile Tile>
Status run_out(const TmaGemmCall& call, bool out_f32, cudaStream_t stream) {
  return out_f32 ? run_tma_gemm<Tile, float>(call, stream) : run_tma_gemm<Tile, uint16_t>(call, stream);
}

// The instantiation kAllGemmTmaTiles[I] that equals `tile`, else an error: the dispatch covers
// exactly the list the tests and the benchmark iterate.
template <size_t... I>
Status launch_listed(const TmaGemmCall& call, GemmTmaTile tile, bool out_f32, cudaStream_t stream,
                     std::index_sequence<I...>) {
  Status s;
  const bool listed =
      ((tile == kAllGemmTmaTiles[I] && (s = run_out<kAllGemmTmaTiles[I]>(call, out_f32, stream), true)) || ...);
  return listed ? s : invalid_argument("gemm_bf16: unknown GemmTmaTile");
}
}  // namespace

Status launch_wgmma_tma(const TmaGemmCall& call, GemmTmaTile tile, bool out_f32, cudaStream_t stream) {
  return launch_listed(call, tile, out_f32, stream, std::make_index_sequence<kAllGemmTmaTiles.size()>{});
}

}  // namespace vosti::gemm_detail
