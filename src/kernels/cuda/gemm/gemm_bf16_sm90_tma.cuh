// The CUTLASS 3 definition of the kWgmmaTmaWarpSpecialized family's kernels (see
// gemm_bf16_sm90_tma.h for the reduction order). Included only by the per-tile translation
// units generated per tile from gemm_tma_tiles.def (gemm_tma_tiles.cmake), which are built for
// sm_90a alone (CUTLASS headers from scripts/fetch-cutlass).
//
// Operands as CUTLASS sees them: A = x [m, k] row-major (K-major), B = w [n, k] as a k x n
// column-major matrix (K-major), D = y [m, n] row-major, no C; swapped (TmaTileShape's kSwap):
// A = w [n, k], B = x [m, k] as a k x m column-major matrix, D = y^T [n, m] column-major. The
// mainloop types are the same either way. Epilogue (one visitor tree for bias and no bias):
// D = convert_rn(acc + bias[col of y]) with bias a row broadcast (swapped: column broadcast)
// whose null pointer reads as 0.
#pragma once

#include <cute/tensor.hpp>
#include <cutlass/bfloat16.h>
#include <cutlass/cutlass.h>
#include <cutlass/epilogue/collective/collective_builder.hpp>
#include <cutlass/epilogue/fusion/sm90_callbacks_tma_warpspecialized.hpp>
#include <cutlass/gemm/collective/collective_builder.hpp>
#include <cutlass/gemm/device/gemm_universal_adapter.h>
#include <cutlass/gemm/dispatch_policy.hpp>
#include <cutlass/gemm/kernel/gemm_universal.hpp>
#include <cutlass/gemm/kernel/tile_scheduler.hpp>

#include <atomic>
#include <cstdint>
#include <string>
#include <type_traits>

#include "kernels/cuda/gemm/gemm_bf16_sm90_tma.h"

namespace vosti::gemm_detail {

// Tile shape (kM x kN x kK: kK = 64 or 128 columns of k per pipeline stage), cluster shape
// (kClusterM x kClusterN) and kernel schedule of one GemmTmaTile; the epilogue schedule follows
// the kernel schedule. A cluster along CUTLASS's M multicasts the B tile to its CTAs, one along N
// the A tile (unswapped B = w and A = x; swapped, kSwap, the reverse).
template <int kM, int kN, int kClusterM, int kClusterN, typename Schedule, bool kSwap = false, int kK = 64>
struct TmaTileShape {
  static constexpr bool kSwapAB = kSwap;
  // The tile of y (swapped: CUTLASS's N is y's rows) and the k-tile, as kGemmTmaTileInfo lists them.
  static constexpr GemmTmaTileShape kYTile = {kSwap ? kN : kM, kSwap ? kM : kN, kK};
  // CTAs of the cluster along y's rows (CUTLASS's N when swapped), sharing each weight tile.
  static constexpr int kXCluster = kSwap ? kClusterN : kClusterM;
  using TileShape = cute::Shape<cute::Int<kM>, cute::Int<kN>, cute::Int<kK>>;
  using ClusterShape = cute::Shape<cute::Int<kClusterM>, cute::Int<kClusterN>, cute::_1>;
  using KernelSchedule = Schedule;
  using EpilogueSchedule =
      std::conditional_t<std::is_same_v<Schedule, cutlass::gemm::KernelTmaWarpSpecializedCooperative>,
                         cutlass::epilogue::TmaWarpSpecializedCooperative, cutlass::epilogue::TmaWarpSpecialized>;
};
using Pingpong = cutlass::gemm::KernelTmaWarpSpecializedPingpong;
using Cooperative = cutlass::gemm::KernelTmaWarpSpecializedCooperative;
using Basic = cutlass::gemm::KernelTmaWarpSpecialized;  // non-persistent, one consumer warpgroup, one tile per CTA

template <GemmTmaTile Tile>
struct TmaTileTraits;
#define VOSTI_GEMM_TMA_TILE(tile, cutlass_m, cutlass_n, cluster_m, cluster_n, schedule, swapped, k_tile, name) \
  template <>                                                                                                  \
  struct TmaTileTraits<GemmTmaTile::tile>                                                                      \
      : TmaTileShape<cutlass_m, cutlass_n, cluster_m, cluster_n, schedule, swapped, k_tile> {};
#include "kernels/cuda/gemm/gemm_tma_tiles.def"
#undef VOSTI_GEMM_TMA_TILE

// CUTLASS's warp-specialized mainloop with an L2 eviction hint on the weight's TMA loads (A when
// swapped, else B): evict-first where Params::weight_hint says so (TmaGemmCall::stream_weights),
// else CUTLASS's normal hint; x's loads keep the normal one. The producer below issues what the
// collective's own load issues (one elected lane; per k-tile: acquire the stage, load A and B to
// it, multicast to the CTAs of the cluster that share the tile), in the same order, with the hint
// as the one difference. A hint moves where lines stay in the L2, not the values loaded.
template <class Base, bool kWeightIsA>
struct WeightHintMainloop : Base {
  using Base::Base;
  struct Arguments : Base::Arguments {
    bool stream_weights = false;
  };
  struct Params : Base::Params {
    cute::TMA::CacheHintSm90 weight_hint = cute::TMA::CacheHintSm90::EVICT_NORMAL;
  };
  template <class ProblemShape>
  static Params to_underlying_arguments(ProblemShape const& shape, Arguments const& args, void* workspace) {
    return {Base::to_underlying_arguments(shape, args, workspace),
            args.stream_weights ? cute::TMA::CacheHintSm90::EVICT_FIRST : cute::TMA::CacheHintSm90::EVICT_NORMAL};
  }

  template <class TensorA, class TensorB, class KTileIterator, class BlockCoord>
  CUTLASS_DEVICE void load(Params const& params, typename Base::MainloopPipeline pipeline,
                           typename Base::PipelineState write, cute::tuple<TensorA, TensorB> const& inputs,
                           BlockCoord const& blk_coord, KTileIterator k_tile_iter, int k_tile_count, int /*thread_idx*/,
                           uint32_t block_rank_in_cluster, typename Base::TensorStorage& shared_tensors) {
    using namespace cute;
    if (!elect_one_sync()) return;
    using Cluster = typename Base::DispatchPolicy::ClusterShape;
    constexpr uint32_t kClusterM = size<0>(Cluster{});
    constexpr uint32_t kClusterN = size<1>(Cluster{});
    // This CTA's place in the cluster: (cm, cn), rank = cm + cn * kClusterM.
    const uint32_t cm = block_rank_in_cluster % kClusterM;
    const uint32_t cn = block_rank_in_cluster / kClusterM;
    // A's tile goes to the CTAs of this cluster row (same cm), B's to those of this column.
    uint16_t mask_a = 0;
    uint16_t mask_b = 0;
    if constexpr (is_same_v<typename Base::GmemTiledCopyA, SM90_TMA_LOAD_MULTICAST>) {
      for (uint32_t j = 0; j < kClusterN; ++j) mask_a |= uint16_t(1u << (cm + j * kClusterM));
    }
    if constexpr (is_same_v<typename Base::GmemTiledCopyB, SM90_TMA_LOAD_MULTICAST>) {
      for (uint32_t i = 0; i < kClusterM; ++i) mask_b |= uint16_t(1u << (i + cn * kClusterM));
    }
    const auto normal = TMA::CacheHintSm90::EVICT_NORMAL;
    const auto hint_a = kWeightIsA ? params.weight_hint : normal;
    const auto hint_b = kWeightIsA ? normal : params.weight_hint;

    auto [m_coord, n_coord, k_coord, l_coord] = blk_coord;
    (void)k_coord;
    auto tma_a = params.tma_load_a.get_slice(cn);
    auto tma_b = params.tma_load_b.get_slice(cm);
    Tensor src_a = tma_a.partition_S(get<0>(inputs)(_, _, m_coord, _, l_coord));
    Tensor src_b = tma_b.partition_S(get<1>(inputs)(_, _, n_coord, _, l_coord));
    Tensor dst_a =
        tma_a.partition_D(make_tensor(make_smem_ptr(shared_tensors.smem_A.data()), typename Base::SmemLayoutA{}));
    Tensor dst_b =
        tma_b.partition_D(make_tensor(make_smem_ptr(shared_tensors.smem_B.data()), typename Base::SmemLayoutB{}));
    CUTLASS_PRAGMA_NO_UNROLL
    for (; k_tile_count > 0; --k_tile_count) {
      pipeline.producer_acquire(write);
      auto* barrier = pipeline.producer_get_barrier(write);
      const int stage = write.index();
      copy(params.tma_load_a.with(*barrier, mask_a, hint_a), src_a(_, _, _, *k_tile_iter), dst_a(_, _, _, stage));
      copy(params.tma_load_b.with(*barrier, mask_b, hint_b), src_b(_, _, _, *k_tile_iter), dst_b(_, _, _, stage));
      ++k_tile_iter;
      ++write;
    }
  }
};

template <GemmTmaTile Tile, typename Out>
struct TmaGemm {
  using T = TmaTileTraits<Tile>;
  static_assert(T::kYTile.m == gemm_tma_tile_shape(Tile).m && T::kYTile.n == gemm_tma_tile_shape(Tile).n &&
                    T::kYTile.k == gemm_tma_tile_shape(Tile).k && T::kXCluster == gemm_tma_tile_x_cluster(Tile),
                "the GemmTmaTile's row of kGemmTmaTileInfo (the plan's tile) must describe its CUTLASS tile");
  using ElementD = std::conditional_t<std::is_same_v<Out, float>, float, cutlass::bfloat16_t>;
  static constexpr int kAlignAB = 8;  // bf16 elements in 16 bytes
  static constexpr int kAlignD = 16 / static_cast<int>(sizeof(ElementD));
  static constexpr auto kRound = cutlass::FloatRoundStyle::round_to_nearest;

  // D = convert(acc + bias[col of y]); bias == nullptr reads as 0. Swapped, y's columns are D's rows.
  using Bias =
      std::conditional_t<T::kSwapAB,
                         cutlass::epilogue::fusion::Sm90ColBroadcast<0, typename T::TileShape, float, float,
                                                                     cute::Stride<cute::_1, cute::_0, int64_t>>,
                         cutlass::epilogue::fusion::Sm90RowBroadcast<0, typename T::TileShape, float, float,
                                                                     cute::Stride<cute::_0, cute::_1, int64_t>>>;
  // y [m, n] row-major is D; swapped, D = y^T [n, m] column-major.
  using LayoutD = std::conditional_t<T::kSwapAB, cutlass::layout::ColumnMajor, cutlass::layout::RowMajor>;
  using Epilogue =
      cutlass::epilogue::fusion::Sm90EVT<cutlass::epilogue::fusion::Sm90Compute<cutlass::plus, ElementD, float, kRound>,
                                         cutlass::epilogue::fusion::Sm90AccFetch, Bias>;

  using CollectiveEpilogue = typename cutlass::epilogue::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, typename T::TileShape, typename T::ClusterShape,
      cutlass::epilogue::collective::EpilogueTileAuto, float, float, void, LayoutD, kAlignD, ElementD, LayoutD, kAlignD,
      typename T::EpilogueSchedule, Epilogue>::CollectiveOp;

  using CollectiveMainloop = typename cutlass::gemm::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, cutlass::bfloat16_t, cutlass::layout::RowMajor, kAlignAB,
      cutlass::bfloat16_t, cutlass::layout::ColumnMajor, kAlignAB, float, typename T::TileShape,
      typename T::ClusterShape,
      cutlass::gemm::collective::StageCountAutoCarveout<static_cast<int>(
          sizeof(typename CollectiveEpilogue::SharedStorage))>,
      typename T::KernelSchedule>::CollectiveOp;
  using Mainloop = WeightHintMainloop<CollectiveMainloop, T::kSwapAB>;

  using Kernel = cutlass::gemm::kernel::GemmUniversal<cute::Shape<int, int, int, int>, Mainloop, CollectiveEpilogue,
                                                      cutlass::gemm::PersistentScheduler>;
  using Device = cutlass::gemm::device::GemmUniversalAdapter<Kernel>;
};

inline Status cutlass_status(cutlass::Status s, const char* what) {
  if (s == cutlass::Status::kSuccess) return Status();
  return internal_error(std::string("gemm_bf16 (CUTLASS sm_90a): ") + what + ": " + cutlass::cutlassGetStatusString(s));
}

template <GemmTmaTile Tile, typename Out>
Status run_tma_gemm(const TmaGemmCall& c, cudaStream_t stream) {
  using G = TmaGemm<Tile, Out>;
  using Kernel = typename G::Kernel;
  // CUTLASS's problem: A [pm, k] row-major, B [pn, k] (a k x pn column-major matrix), D [pm, pn].
  // Unswapped A = x, B = w, D = y row-major; swapped A = w, B = x, D = y^T column-major.
  constexpr bool kSwap = G::T::kSwapAB;
  const int pm = kSwap ? c.n : c.m;
  const int pn = kSwap ? c.m : c.n;
  typename Kernel::StrideA stride_a{};
  cute::get<0>(stride_a) = static_cast<int64_t>(c.k);
  cute::get<2>(stride_a) = static_cast<int64_t>(pm) * c.k;
  typename Kernel::StrideB stride_b{};
  cute::get<0>(stride_b) = static_cast<int64_t>(c.k);
  cute::get<2>(stride_b) = static_cast<int64_t>(pn) * c.k;
  // y's rows are c.ldy elements apart (c.n columns of a wider y when the launch is split).
  typename Kernel::StrideD stride_d{};
  if constexpr (kSwap) {
    cute::get<1>(stride_d) = static_cast<int64_t>(c.ldy);
  } else {
    cute::get<0>(stride_d) = static_cast<int64_t>(c.ldy);
  }
  cute::get<2>(stride_d) = static_cast<int64_t>(c.m) * c.ldy;

  typename G::Device::Arguments args{};
  args.mode = cutlass::gemm::GemmUniversalMode::kGemm;
  args.problem_shape = {pm, pn, c.k, 1};
  args.mainloop.ptr_A = static_cast<const cutlass::bfloat16_t*>(kSwap ? c.w : c.x);
  args.mainloop.dA = stride_a;
  args.mainloop.ptr_B = static_cast<const cutlass::bfloat16_t*>(kSwap ? c.x : c.w);
  args.mainloop.dB = stride_b;
  args.mainloop.stream_weights = c.stream_weights;
  // Visitor-tree arguments: children first (acc fetch, bias), then the node (plus).
  args.epilogue.thread = {{}, {c.bias, 0.0f, {}}, {}};
  args.epilogue.ptr_C = nullptr;
  args.epilogue.dC = stride_d;
  args.epilogue.ptr_D = static_cast<typename G::ElementD*>(c.y);
  args.epilogue.dD = stride_d;
  args.hw_info.device_id = c.device;
  args.hw_info.sm_count = c.num_sms;

  typename G::Device gemm;
  cutlass::Status s = gemm.can_implement(args);
  if (s != cutlass::Status::kSuccess) return cutlass_status(s, "can_implement");
  if (G::Device::get_workspace_size(args) != 0) {
    return internal_error("gemm_bf16 (CUTLASS sm_90a): the data-parallel kernel asked for a workspace");
  }
  // CUTLASS's initialize() sets the kernel's dynamic shared-memory attribute (a driver call) on
  // every call; it is set once per device (bit d of `attribute_set`, devices 0..63), after which
  // update() only rebuilds the parameters (TMA descriptors included) for these pointers and m.
  static std::atomic<uint64_t> attribute_set{0};
  const uint64_t device_bit = c.device >= 0 && c.device < 64 ? uint64_t{1} << c.device : 0;
  if (device_bit != 0 && (attribute_set.load(std::memory_order_acquire) & device_bit) != 0) {
    s = gemm.update(args, nullptr);
    if (s != cutlass::Status::kSuccess) return cutlass_status(s, "update");
  } else {
    s = gemm.initialize(args, nullptr, stream);
    if (s != cutlass::Status::kSuccess) return cutlass_status(s, "initialize");
    attribute_set.fetch_or(device_bit, std::memory_order_acq_rel);
  }
  s = gemm.run(stream);
  if (s != cutlass::Status::kSuccess) return cutlass_status(s, "run");
  const cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) return internal_error(std::string("gemm_bf16 (CUTLASS sm_90a): ") + cudaGetErrorString(e));
  return Status();
}

}  // namespace vosti::gemm_detail
