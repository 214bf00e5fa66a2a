#include "kernels/cuda/gemm_schedule.h"

#include <algorithm>
#include <string>

namespace vosti {

namespace {
// One wave of the smallest m-tile configuration on a 132-multiprocessor Hopper (mma.sync
// m16: 3 resident CTAs each; wgmma m64: 2): at small m the segments of every tile run side
// by side and the weight stream is the cost.
constexpr int64_t kTargetSmallMCtasMmaSync = 396;
constexpr int64_t kTargetSmallMCtasWgmma = 264;
constexpr int kMinKBlocksPerSegment = 3;
constexpr int kMaxSegments = 16;
constexpr size_t kWorkspaceAlign = 256;
// Launch-plan thresholds, from the plan sweep of bench/gemm_cuda_bench.cu on the H200
// (dev/cuda/NOTES.md); they move time, never bits.
constexpr int64_t kMaxMForM16Tiles = 32;
constexpr int64_t kMaxMForM64Tiles = 256;
constexpr int64_t kMaxMForSplit = 128;
constexpr int64_t kMaxMForWgmmaM64Tiles = 64;
// kWgmmaTmaWarpSpecialized instantiation rule constants, from `gemm_cuda_bench --sweep` on the
// H200 (dev/cuda/NOTES.md v9-v10); they move time, never bits.
constexpr int64_t kMaxMForTmaM64Tiles = 64;  // one 64-row m-tile: the weight stream is the cost
constexpr int64_t kMaxMForTmaM128N32 = 128;  // one 128-row m-tile
constexpr double kTmaWaveFillMargin = 0.05;  // the alternative tile must fill the waves this much better

// The largest divisor d of `value` with d <= limit (>= 1).
int largest_divisor_at_most(int value, int64_t limit) {
  for (int d = static_cast<int>(std::min<int64_t>(value, std::max<int64_t>(limit, 1))); d > 1; --d) {
    if (value % d == 0) return d;
  }
  return 1;
}
}  // namespace

Result<GemmSchedule> select_schedule(int64_t n, int64_t k, GemmInstruction instruction) {
  if (n <= 0 || n % 8 != 0) {
    return invalid_argument("GEMM weight rows n=" + std::to_string(n) +
                            ": must be a positive multiple of 8 (pad the weight)");
  }
  if (k <= 0 || k % kGemmBlockK != 0) {
    return invalid_argument("GEMM inner dimension k=" + std::to_string(k) + ": must be a positive multiple of " +
                            std::to_string(kGemmBlockK) + " (pad the weight and activations)");
  }
  GemmSchedule s;
  s.n = n;
  s.k = k;
  s.instruction = instruction;
  s.num_k_blocks = static_cast<int>(k / kGemmBlockK);
  if (instruction == GemmInstruction::kWgmmaTmaWarpSpecialized) return s;  // one chain over all of k
  // Equal segments (a divisor of the k-block count), as many as one small-m wave holds.
  const int64_t n_tiles = (n + kGemmBlockN - 1) / kGemmBlockN;
  const int64_t target =
      instruction == GemmInstruction::kWgmmaM64N128K16 ? kTargetSmallMCtasWgmma : kTargetSmallMCtasMmaSync;
  const int64_t limit = std::min<int64_t>({target / n_tiles, kMaxSegments, s.num_k_blocks / kMinKBlocksPerSegment});
  s.num_segments = largest_divisor_at_most(s.num_k_blocks, limit);
  return s;
}

GemmInstruction select_instruction(int64_t n, int64_t k, bool has_wgmma) {
  if (has_wgmma && n % 8 == 0 && k % kGemmBlockK == 0) return GemmInstruction::kWgmmaTmaWarpSpecialized;
  return GemmInstruction::kMmaSyncM16N8K16;
}

GemmTmaTileShape gemm_tma_tile_shape(GemmTmaTile tile) {
  switch (tile) {
    case GemmTmaTile::kM64N32Pingpong:
      return {64, 32};
    case GemmTmaTile::kM64N48Pingpong:
      return {64, 48};
    case GemmTmaTile::kM128N32Cooperative:
      return {128, 32};
    case GemmTmaTile::kM128N64Cooperative:
      return {128, 64};
    case GemmTmaTile::kM128N128Cooperative2x1:
      return {128, 128};
    case GemmTmaTile::kM128N256Cooperative2x1:
      return {128, 256};
  }
  return {0, 0};
}

const char* gemm_tma_tile_name(GemmTmaTile tile) {
  switch (tile) {
    case GemmTmaTile::kM64N32Pingpong:
      return "64x32 pingpong";
    case GemmTmaTile::kM64N48Pingpong:
      return "64x48 pingpong";
    case GemmTmaTile::kM128N32Cooperative:
      return "128x32 cooperative";
    case GemmTmaTile::kM128N64Cooperative:
      return "128x64 cooperative";
    case GemmTmaTile::kM128N128Cooperative2x1:
      return "128x128 cooperative 2x1";
    case GemmTmaTile::kM128N256Cooperative2x1:
      return "128x256 cooperative 2x1";
  }
  return "?";
}

GemmTmaTile gemm_plan_tma_tile(const GemmSchedule& schedule, int64_t m, int num_sms) {
  const auto tiles = [&](GemmTmaTile tile) {
    const GemmTmaTileShape t = gemm_tma_tile_shape(tile);
    return ((m + t.m - 1) / t.m) * ((schedule.n + t.n - 1) / t.n);
  };
  const auto fits_one_wave = [&](GemmTmaTile tile) { return tiles(tile) <= num_sms; };
  // Fraction of the CTA slots of all waves that hold a tile (1 = whole waves; one CTA per SM).
  const auto wave_fill = [&](GemmTmaTile tile) {
    const int64_t count = tiles(tile);
    const int64_t waves = (count + num_sms - 1) / num_sms;
    return static_cast<double>(count) / static_cast<double>(waves * num_sms);
  };
  // `alternative` where it fills the waves clearly better than `preferred`, else `preferred`.
  const auto unless_fills_better = [&](GemmTmaTile preferred, GemmTmaTile alternative) {
    return wave_fill(alternative) > wave_fill(preferred) + kTmaWaveFillMargin ? alternative : preferred;
  };
  // One 64-row m-tile: every SM streams its columns of the weight. 64 x 32, unless 32-wide tiles
  // spill into a partial second wave that 48-wide ones avoid (qkv: 192 tiles vs 128 on 132 SMs).
  if (m <= kMaxMForTmaM64Tiles) return unless_fills_better(GemmTmaTile::kM64N32Pingpong, GemmTmaTile::kM64N48Pingpong);
  // One 128-row m-tile, still weight-bound: 128 x 32 where its tiles fit one wave (o, down: 128),
  // so every SM streams one strip; else 128 x 64 (>= 72 KB of weight in flight per SM; qkv, gate_up).
  if (m <= kMaxMForTmaM128N32) {
    return fits_one_wave(GemmTmaTile::kM128N32Cooperative) ? GemmTmaTile::kM128N32Cooperative
                                                           : GemmTmaTile::kM128N64Cooperative;
  }
  // Beyond, 128 x 64 while its tiles fit one wave (o and down at m = 256); then the larger tiles
  // (fewer re-reads of x and w, better wgmma shapes): 128 x 256, unless 128 x 128 fills the waves
  // clearly better (qkv at m = 192-1024: 192 wide tiles on 132 SMs).
  if (fits_one_wave(GemmTmaTile::kM128N64Cooperative)) return GemmTmaTile::kM128N64Cooperative;
  return unless_fills_better(GemmTmaTile::kM128N256Cooperative2x1, GemmTmaTile::kM128N128Cooperative2x1);
}

GemmLaunch make_gemm_tma_launch(const GemmSchedule& schedule, int64_t m, GemmTmaTile tile) {
  const GemmTmaTileShape shape = gemm_tma_tile_shape(tile);
  GemmLaunch l;
  l.block_m = shape.m;
  l.num_m_tiles = static_cast<int>((m + shape.m - 1) / shape.m);
  l.num_n_tiles = static_cast<int>((schedule.n + shape.n - 1) / shape.n);
  l.num_groups = 1;
  l.split_segments = false;
  l.counter_bytes = 0;
  l.workspace_bytes = 0;
  l.tma_tile = tile;
  return l;
}

int gemm_ctas_per_sm(GemmInstruction instruction, int block_m) {
  if (instruction == GemmInstruction::kWgmmaTmaWarpSpecialized) return 1;  // persistent: one CTA per SM
  if (instruction == GemmInstruction::kWgmmaM64N128K16) return block_m == 64 ? 2 : 1;
  return block_m == 16 ? 3 : (block_m == 64 ? 2 : 1);
}

GemmLaunch make_gemm_launch(const GemmSchedule& schedule, int64_t m, int block_m, int num_groups, int num_sms) {
  GemmLaunch l;
  l.block_m = block_m;
  l.num_m_tiles = static_cast<int>((m + block_m - 1) / block_m);
  l.num_n_tiles = static_cast<int>((schedule.n + kGemmBlockN - 1) / kGemmBlockN);
  l.num_groups = num_groups;
  l.split_segments = num_groups > 1;
  // Counters of every split launch fit 3 * num_sms tiles: one region size per device, so
  // a later call never finds a partial where its counter is.
  l.counter_bytes =
      (static_cast<size_t>(3) * num_sms * sizeof(uint32_t) + kWorkspaceAlign - 1) / kWorkspaceAlign * kWorkspaceAlign;
  if (l.split_segments) {
    l.workspace_bytes = l.counter_bytes + static_cast<size_t>(schedule.num_segments) * static_cast<size_t>(m) *
                                              static_cast<size_t>(schedule.n) * sizeof(float);
  }
  return l;
}

GemmLaunch plan_gemm_launch(const GemmSchedule& schedule, int64_t m, int num_sms) {
  if (schedule.instruction == GemmInstruction::kWgmmaTmaWarpSpecialized) {
    return make_gemm_tma_launch(schedule, m, gemm_plan_tma_tile(schedule, m, num_sms));
  }
  const bool wgmma = schedule.instruction == GemmInstruction::kWgmmaM64N128K16;
  const int block_m = wgmma ? (m <= kMaxMForWgmmaM64Tiles ? 64 : 128)
                            : (m <= kMaxMForM16Tiles ? 16 : (m <= kMaxMForM64Tiles ? 64 : 128));
  const int64_t tiles = ((m + block_m - 1) / block_m) * ((schedule.n + kGemmBlockN - 1) / kGemmBlockN);
  const int64_t slots = static_cast<int64_t>(num_sms) * gemm_ctas_per_sm(schedule.instruction, block_m);
  // Whole groups of equal size (a divisor of S), as many as one wave of resident CTAs holds,
  // while the partials (S planes of m x n f32, written and read) stay cheap next to the weight.
  const int groups =
      (tiles >= slots || m > kMaxMForSplit) ? 1 : largest_divisor_at_most(schedule.num_segments, slots / tiles);
  return make_gemm_launch(schedule, m, block_m, groups, num_sms);
}

}  // namespace vosti
