// GemmSchedule: the arithmetic of every bf16 GEMM y[m, n] = x[m, k] * w[n, k]^T (+ bias)
// that the CUDA backend runs, fixed per weight shape (n, k) when a model is loaded, and
// GemmLaunch: how one call with m rows is mapped onto the GPU.
//
// The arithmetic contract, the same for every m (DESIGN.md rules 1-3):
//   y[r, c] = round_out( S_{num_segments-1} + bias[c] ),  S_0 = P_0,  S_s = S_{s-1} + P_s  (f32 adds)
//   P_s = f32 accumulation, from a zero accumulator, of one tensor-core k16 step (the schedule's
//         instruction: mma.sync m16n8k16 or wgmma m64nNk16, bf16 in, f32 accumulate) per
//         16-column chunk of k, over the k-blocks of segment s in increasing k order;
//   segment s covers k-blocks [s * kb / S, (s + 1) * kb / S), kb = k / kBlockK, S = num_segments.
// The kWgmmaTmaWarpSpecialized family (CUTLASS 3 kernels, gemm_bf16_sm90_tma.h) evaluates the
// same contract with S = 1: one chain of wgmma k16 steps over all of k in increasing k order from
// a zero f32 accumulator, then + bias[c] (0 when there is no bias), then one rounding to the
// output dtype. (Instantiations evaluating S = 2, and the hand-written cp.async wgmma kernel with
// k segments, were never planned: they live in dev/cuda/gemm_wgmma, with their measurements.)
// The tensor core computes each output element from its own row of x and its own row of w,
// so other rows, the row's place in its m-tile and the number of rows never reach it.
//
// Schedule decisions live here and only here: select_instruction() and select_schedule()
// are pure functions of (n, k) and the GPU kind; plan_gemm_launch() may read m, but only to
// pick where an element is computed: the m-tile height and how the segments are grouped onto
// CTAs (partials summed in segment order by the tile's last CTA, or a running total in one CTA
// in the same order), or, for kWgmmaTmaWarpSpecialized, which CUTLASS instantiation (tile,
// cluster, kernel schedule) runs, and whether y's columns are split between two of them (each
// launch computes whole elements of its own columns; nothing is summed across launches). m and
// the row index appear in the kernels only in grid sizes, tile-scheduler bounds and the
// predicates (or TMA bounds) that zero-fill rows past m and skip their stores, never in a k-loop
// bound. Every launch plan evaluates the contract above, which tests/kernels_cuda checks bit for
// bit (every m in 1..300, samples up to 8192, and every plan against every other).
// Thread safety: value types and pure functions.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <iterator>

#include "core/status.h"

namespace vosti {

// The tensor-core instruction family a schedule accumulates with (one per schedule, never per
// call): mma.sync m16n8k16 (the hand-written kernel with k segments) runs on sm_80 and later;
// kWgmmaTmaWarpSpecialized (the CUTLASS 3 TMA warp-specialized kernels, one segment, no split)
// on sm_90a (H100/H200) only. Families may round differently, so a deployment uses one of them
// for every m.
enum class GemmInstruction : uint8_t { kMmaSyncM16N8K16, kWgmmaTmaWarpSpecialized };

// The CUTLASS instantiations of the kWgmmaTmaWarpSpecialized family: CTA tile, thread-block
// cluster, kernel schedule (pingpong: two consumer warpgroups on alternate tiles; cooperative: two
// consumer warpgroups on the two halves of one tile; both with CUTLASS's persistent data-parallel
// tile scheduler; basic: the non-persistent warp-specialized kernel, one consumer warpgroup and
// one tile per CTA, the lighter kernel where every tile fits one wave). The unswapped ones compute y = x w^T with x as
// wgmma's A operand (the tile's rows are rows of x); the swapped ones (kSwap...) compute y^T = w x^T with w as A, so
// that the weight fills wgmma's 64-row side and the shared-memory ring holds mostly weight at small m. Names give the
// tile of y (rows x columns) and the cluster as CUTLASS sees it (A's rows x B's rows: for the swapped ones, 4x1 is four
// CTAs on neighbouring column tiles sharing one x tile). Every one evaluates the same chain per element (above);
// plan_gemm_launch() picks one from m and how the deployment's n (and k) fills the waves. The 21 are those
// kept of the 71 swept in v11-v22 (dev/cuda/NOTES.md, v9-v22); "k128" ones load 128 columns of k per pipeline stage,
// the others 64. The list, with where the rule uses each, is gemm_tma_tiles.def.
enum class GemmTmaTile : uint8_t {
#define VOSTI_GEMM_TMA_TILE(tile, ...) tile,
#include "kernels/cuda/gemm/gemm_tma_tiles.def"
#undef VOSTI_GEMM_TMA_TILE
};
struct GemmTmaTileShape {
  int m, n, k;
};
// One row per GemmTmaTile, in enum order: the CTA's tile of y (rows, from x; columns, from w),
// its k-tile (columns of k per pipeline stage: 64 or 128) and a short name for logs and
// benchmarks. The CUTLASS traits (gemm_bf16_sm90_tma.cuh) are checked against it at compile time.
// x_cluster: the CTAs of one cluster side by side along y's rows (different x tiles), which
// share each weight tile through one multicast load.
struct GemmTmaTileInfo {
  GemmTmaTile tile;
  GemmTmaTileShape shape;
  int x_cluster;
  const char* name;
};
inline constexpr GemmTmaTileInfo kGemmTmaTileInfo[] = {
#define VOSTI_GEMM_TMA_TILE(tile, cutlass_m, cutlass_n, cluster_m, cluster_n, schedule, swapped, k_tile, name) \
  {GemmTmaTile::tile,                                                                                          \
   {(swapped) ? (cutlass_n) : (cutlass_m), (swapped) ? (cutlass_m) : (cutlass_n), (k_tile)},                   \
   (swapped) ? (cluster_n) : (cluster_m),                                                                      \
   name},
#include "kernels/cuda/gemm/gemm_tma_tiles.def"
#undef VOSTI_GEMM_TMA_TILE
};
inline constexpr size_t kNumGemmTmaTiles = 0
#define VOSTI_GEMM_TMA_TILE(...) +1
#include "kernels/cuda/gemm/gemm_tma_tiles.def"
#undef VOSTI_GEMM_TMA_TILE
    ;
constexpr bool gemm_tma_tile_info_in_enum_order() {
  for (size_t i = 0; i < std::size(kGemmTmaTileInfo); ++i)
    if (kGemmTmaTileInfo[i].tile != static_cast<GemmTmaTile>(i)) return false;
  return std::size(kGemmTmaTileInfo) == kNumGemmTmaTiles;
}
static_assert(gemm_tma_tile_info_in_enum_order(), "kGemmTmaTileInfo: one row per GemmTmaTile, in enum order");
// Every instantiation, in enum order: what the dispatch, the tests and the benchmark iterate.
inline constexpr auto kAllGemmTmaTiles = [] {
  std::array<GemmTmaTile, std::size(kGemmTmaTileInfo)> all{};
  for (size_t i = 0; i < all.size(); ++i) all[i] = kGemmTmaTileInfo[i].tile;
  return all;
}();
constexpr GemmTmaTileShape gemm_tma_tile_shape(GemmTmaTile tile) {
  const auto i = static_cast<size_t>(tile);
  return i < std::size(kGemmTmaTileInfo) ? kGemmTmaTileInfo[i].shape : GemmTmaTileShape{0, 0, 0};
}
constexpr const char* gemm_tma_tile_name(GemmTmaTile tile) {
  const auto i = static_cast<size_t>(tile);
  return i < std::size(kGemmTmaTileInfo) ? kGemmTmaTileInfo[i].name : "?";
}
constexpr int gemm_tma_tile_x_cluster(GemmTmaTile tile) {
  const auto i = static_cast<size_t>(tile);
  return i < std::size(kGemmTmaTileInfo) ? kGemmTmaTileInfo[i].x_cluster : 0;
}

inline constexpr int kGemmBlockN = 128;  // output columns per CTA tile
inline constexpr int kGemmBlockK = 64;   // k columns per pipeline stage (one smem tile)

struct GemmSchedule {
  int64_t n = 0;
  int64_t k = 0;
  GemmInstruction instruction = GemmInstruction::kMmaSyncM16N8K16;
  int num_k_blocks = 0;  // k / kGemmBlockK
  int num_segments = 1;  // S (divides num_k_blocks): k cut into S equal segments, summed in order 0..S-1
                         // (kWgmmaTmaWarpSpecialized: 1)
};

// The instruction for weight shape [n, k] on a GPU with or without wgmma (sm_90a): on sm_90a the
// CUTLASS family (kWgmmaTmaWarpSpecialized) where it wins at the measured m (dev/cuda/NOTES.md),
// else mma.sync. Pure.
GemmInstruction select_instruction(int64_t n, int64_t k, bool has_wgmma);

// The schedule for weight shape [n, k] with `instruction` (the deployment's choice, normally
// select_instruction()); a pure function of its arguments.
// Errors: kInvalidArgument unless n > 0, n % 8 == 0 and k is a positive multiple of 64.
Result<GemmSchedule> select_schedule(int64_t n, int64_t k,
                                     GemmInstruction instruction = GemmInstruction::kMmaSyncM16N8K16);

// First k-block of segment s (s in 0..num_segments; s == num_segments gives num_k_blocks).
inline int gemm_segment_begin(const GemmSchedule& s, int seg) {
  return static_cast<int>(static_cast<int64_t>(seg) * s.num_k_blocks / s.num_segments);
}

// How one call is laid out on the GPU; never changes the arithmetic.
// The S segments of a tile are cut into num_groups contiguous groups, one CTA each.
// num_groups == 1: one CTA runs all segments, adding each to a running f32 total.
// num_groups > 1: each CTA stores every P_s of its group to the workspace; the tile's
// last CTA (an integer counter decides which) sums P_0 + P_1 + ... in segment order.
// kWgmmaTmaWarpSpecialized: one group, no workspace; tma_tile names the CUTLASS instantiation.
struct GemmLaunch {
  int block_m = 16;  // rows per CTA tile: 16, 64 or 128 (mma.sync); the tile's M (TMA)
  int num_m_tiles = 0;
  int num_n_tiles = 0;
  int num_groups = 1;           // CTAs per tile along k, 1..num_segments
  bool split_segments = false;  // num_groups > 1
  size_t counter_bytes = 0;     // tile counters at the start of the workspace (fixed per device)
  size_t workspace_bytes = 0;   // counters + f32 partials [num_segments, m, n]; 0 when not split
  GemmTmaTile tma_tile = GemmTmaTile::kM64N32Pingpong;  // kWgmmaTmaWarpSpecialized only
  // kWgmmaTmaWarpSpecialized only: 0, or columns [0, tma_split_n) of y by tma_tile and
  // [tma_split_n, n) by tma_tail_tile, two launches in that order (a multiple of tma_tile's columns,
  // below n). Both run the same chain per element, so the split moves no bits.
  int64_t tma_split_n = 0;
  GemmTmaTile tma_tail_tile = GemmTmaTile::kM64N32Pingpong;
  // kWgmmaTmaWarpSpecialized only: the weight's TMA loads carry the L2 hint evict-first. Set by
  // make_gemm_tma_launch where every weight tile is loaded once (all x tiles of the m rows in one
  // cluster), so that the weight stream, which nothing reads again, displaces its own lines
  // rather than others' (NOTES v20). A cache hint: it moves no bits.
  bool tma_stream_weights = false;
};

// CTAs of each kernel configuration resident per multiprocessor on sm_90 (their registers
// and shared memory; see gemm_bf16.cu).
int gemm_ctas_per_sm(GemmInstruction instruction, int block_m);

// The launch for m rows on a device with num_sms multiprocessors: the m-tile height from m,
// then as many equal k-groups (a divisor of S) as one wave of resident CTAs holds; for
// kWgmmaTmaWarpSpecialized, the CUTLASS instantiation from m (gemm_plan_tma_tile()).
// REQUIRES: m >= 1, num_sms >= 1.
GemmLaunch plan_gemm_launch(const GemmSchedule& schedule, int64_t m, int num_sms);

// A launch with a given m-tile height (see GemmLaunch) and group count (1..S); for tests
// and benchmarks that check every plan computes the same bits.
GemmLaunch make_gemm_launch(const GemmSchedule& schedule, int64_t m, int block_m, int num_groups, int num_sms);

// The kWgmmaTmaWarpSpecialized instantiation plan_gemm_launch() runs for m rows on num_sms
// multiprocessors (one persistent CTA per SM; the basic kernel one per tile), from m, n and
// num_sms (rules fitted to `gemm_cuda_bench --sweep`, dev/cuda/NOTES.md v9-v13; "wide":
// n / 128 >= num_sms; "k128": the 128-column k-tile instantiations, only where k % 128 == 0):
//   m <= 16:   k128: swap 16 x 64 4x1 k128, basic where its tiles fit one wave, else pingpong;
//              otherwise as m <= 32 without k128;
//   m <= 32:   k128: swap 32 x 64 basic 4x1 k128 where its tiles fit one wave; else wide: swap
//              32 x 128 2x1; else 64 x 32;
//   m <= 64:   wide: swap 64 x 128 2x1; else (k128) swap 32 x 64 basic 1x2 k128, else swap 64 x 64
//              basic 4x1 k128, where its tiles fit one wave; else swap 32 x 64 pingpong 1x2;
//   m <= 128:  wide: swap 128 x 256 where its tiles fit one wave, else swap 128 x 128; else swap
//              64 x 64 basic 1x2, else 64 x 96 basic 2x1, where its tiles fit one wave; else swap
//              128 x 64;
//   m <= 256:  wide and m <= 192: swap 192 x 128 2x1; else (m <= 192) swap 96 x 64 basic 1x2, else
//              swap 128 x 64 basic 1x2, else 128 x 96 basic 2x1, where its tiles fit one wave; else
//              128 x 256 (with gemm_plan_tma_split()'s 128 x 192 tail where that applies);
//   m <= 512:  swap 128 x 128 where its tiles fit one wave or fill >= 80% of their waves, else
//              128 x 256;
//   m > 512:   128 x 256, or 128 x 192 where its tiles fill the waves > 5 points better, or 128 x
//              128 where its fill is > 5 points over that
// (wave fill = tiles / (waves * num_sms)). It moves where elements are computed, never their bits.
GemmTmaTile gemm_plan_tma_tile(const GemmSchedule& schedule, int64_t m, int num_sms);

// Where whole waves of `head` tiles leave a last partial wave, plan_gemm_launch() splits y's columns:
// the whole waves by `head`, the rest by a narrower tile that fits one wave, so that no SM runs a
// tile more than the others (gate_up at m = 193-256: one wave of 128 x 256, then one of 128 x 192,
// instead of 1.7 waves of 128 x 256; NOTES v14). Returns the split column (a multiple of head's
// columns) and the tail's tile, or split_n = 0 where no split applies. Pure.
struct GemmTmaSplit {
  int64_t split_n = 0;
  GemmTmaTile tail = GemmTmaTile::kM64N32Pingpong;
};
GemmTmaSplit gemm_plan_tma_split(const GemmSchedule& schedule, int64_t m, GemmTmaTile head, int num_sms);

// A kWgmmaTmaWarpSpecialized launch of a given instantiation, for tests and benchmarks that
// check every instantiation computes the same bits. REQUIRES: that instruction, m >= 1.
GemmLaunch make_gemm_tma_launch(const GemmSchedule& schedule, int64_t m, GemmTmaTile tile);

// The same with y's columns split at split_n between `head` and `tail` (see GemmLaunch), for tests
// and benchmarks. REQUIRES: as make_gemm_tma_launch; gemm_bf16_with_launch() checks split_n.
GemmLaunch make_gemm_tma_split_launch(const GemmSchedule& schedule, int64_t m, GemmTmaTile head, int64_t split_n,
                                      GemmTmaTile tail);

}  // namespace vosti
