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
// H200 (dev/cuda/NOTES.md v9-v11); they move time, never bits.
constexpr int64_t kMaxMForTmaM16 = 16;  // one 16-row tile of x per weight tile
constexpr int64_t kMaxMForTmaM32 = 32;
constexpr int64_t kMaxMForTmaM64 = 64;
constexpr int64_t kMaxMForTmaM128 = 128;
constexpr int64_t kMaxMForTmaM192 = 192;
constexpr int64_t kMaxMForTmaM256 = 256;
constexpr int64_t kMaxMForTmaSwap128 = 512;  // beyond, the unswapped 128-row tiles
constexpr double kTmaWaveFillMargin = 0.05;  // the alternative tile must fill the waves this much better
constexpr double kTmaMinWaveFill = 0.8;      // a swapped 128 x 128 plan must fill its waves this well

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

namespace {
// Whether `tile` loads each weight tile once for m rows: all its x tiles lie in one cluster,
// which shares the weight tile through one multicast load.
bool weight_tiles_loaded_once(GemmTmaTile tile, int64_t m) {
  const int64_t rows = gemm_tma_tile_shape(tile).m;
  return rows > 0 && (m + rows - 1) / rows <= gemm_tma_tile_x_cluster(tile);
}

// CTA tiles of `tile` over m rows and n columns of y.
int64_t tma_tiles(GemmTmaTile tile, int64_t m, int64_t n) {
  const GemmTmaTileShape t = gemm_tma_tile_shape(tile);
  return ((m + t.m - 1) / t.m) * ((n + t.n - 1) / t.n);
}
}  // namespace

GemmTmaTile gemm_plan_tma_tile(const GemmSchedule& schedule, int64_t m, int num_sms) {
  const auto tiles = [&](GemmTmaTile tile) { return tma_tiles(tile, m, schedule.n); };
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
  // Up to 128 rows the weight stream is the cost: tiles are chosen so that every SM streams its
  // own columns of w from a deep ring. A weight with at least one 128-column tile per SM (gate_up)
  // streams through the swapped 128-column tiles whatever the row count.
  const bool wide = (schedule.n + 127) / 128 >= num_sms;
  // Where its tiles fit one wave, a basic (non-persistent, one consumer warpgroup) kernel: measured
  // 1-5% faster than the pingpong kernel of the same tile there (v12b), slower where it needs waves.
  // Up to 64 rows, swapped basic tiles with 128-column k-tiles where their tiles fit one wave
  // (v13: 1-8% faster there than the 64-column ones and than the unswapped tiles).
  // Only where k is a multiple of 128: elsewhere their last k-tile adds zero-filled k16 steps that
  // the 64-column tiles do not (exact, but they would turn an exact -0 sum into +0).
  const bool k128 = schedule.k % 128 == 0;
  const GemmTmaTile k64_small_m = wide ? GemmTmaTile::kSwapM32N128Cooperative2x1 : GemmTmaTile::kM64N32Pingpong;
  if (m <= kMaxMForTmaM16) {
    if (!k128) return k64_small_m;
    return fits_one_wave(GemmTmaTile::kSwapM16N64Basic4x1K128) ? GemmTmaTile::kSwapM16N64Basic4x1K128
                                                               : GemmTmaTile::kSwapM16N64Pingpong4x1K128;
  }
  if (m <= kMaxMForTmaM32) {
    if (k128 && fits_one_wave(GemmTmaTile::kSwapM32N64Basic4x1K128)) return GemmTmaTile::kSwapM32N64Basic4x1K128;
    return k64_small_m;
  }
  if (m <= kMaxMForTmaM64) {
    if (wide) return GemmTmaTile::kSwapM64N128Cooperative2x1;
    // Two 32-row tiles sharing each weight tile where those fit one wave (o, down), else one
    // 64-row tile per weight tile (qkv).
    if (k128 && fits_one_wave(GemmTmaTile::kSwapM32N64Basic1x2K128)) return GemmTmaTile::kSwapM32N64Basic1x2K128;
    if (k128 && fits_one_wave(GemmTmaTile::kSwapM64N64Basic4x1K128)) return GemmTmaTile::kSwapM64N64Basic4x1K128;
    return GemmTmaTile::kSwapM32N64Pingpong1x2;
  }
  if (m <= kMaxMForTmaM128) {
    // A wide weight: one wave of 256-row weight tiles where those fit one (gate_up: 112 on 132
    // SMs) rather than 1.7 waves of 128-row ones: 1-3% (v19: 74.2-74.3 us against 75.7-76.5).
    if (wide && fits_one_wave(GemmTmaTile::kSwapM128N256Cooperative)) return GemmTmaTile::kSwapM128N256Cooperative;
    if (wide) return GemmTmaTile::kSwapM128N128Cooperative;
    // One wave of 64-row tiles: two row tiles sharing each weight tile (swapped 64 x 64), or,
    // where those need two waves, two sharing a 96-column one.
    if (fits_one_wave(GemmTmaTile::kSwapM64N64Basic1x2)) return GemmTmaTile::kSwapM64N64Basic1x2;
    if (fits_one_wave(GemmTmaTile::kM64N96Basic2x1)) return GemmTmaTile::kM64N96Basic2x1;
    return GemmTmaTile::kSwapM128N64Pingpong;
  }
  // Two x tiles per weight tile: one wave of swapped 96 x 64 (up to 192 rows) or 128 x 64 tiles,
  // the two x tiles of a weight tile sharing it through a 1 x 2 cluster (o, down), or of 128 x 96
  // sharing x's 128-row tiles through a 2 x 1 cluster (qkv), else 128 x 256.
  if (m <= kMaxMForTmaM256) {
    // Up to 192 rows of a wide weight, one 192-row tile of x per weight tile (swapped, two weight
    // tiles sharing it): 1.7 waves of 192 x 128 cost less than 128 x 256's (v14).
    if (wide && m <= kMaxMForTmaM192) return GemmTmaTile::kSwapM192N128Cooperative2x1;
    // 96-row x tiles bring 17% fewer bytes into each SM than 128-row ones (v18: o and down 8-9%
    // faster at m = 129-192); the 160-row qkv tile of v16 lost to 128 x 96 by 2% (v17a, v18).
    if (m <= kMaxMForTmaM192 && fits_one_wave(GemmTmaTile::kSwapM96N64Basic1x2))
      return GemmTmaTile::kSwapM96N64Basic1x2;
    if (fits_one_wave(GemmTmaTile::kSwapM128N64Basic1x2)) return GemmTmaTile::kSwapM128N64Basic1x2;
    if (fits_one_wave(GemmTmaTile::kM128N96Basic2x1)) return GemmTmaTile::kM128N96Basic2x1;
    return GemmTmaTile::kM128N256Cooperative2x1;
  }
  if (m <= kMaxMForTmaSwap128) {
    const GemmTmaTile swap = GemmTmaTile::kSwapM128N128Cooperative;
    return fits_one_wave(swap) || wave_fill(swap) >= kTmaMinWaveFill ? swap : GemmTmaTile::kM128N256Cooperative2x1;
  }
  // Larger m: the large unswapped tiles (fewer re-reads of x and w, 2 x 1 clusters): 128 x 256,
  // unless 128 x 192 fills the waves clearly better (qkv at m = 1024: 192 wide tiles on 132 SMs;
  // v17: 69.1 us against 72.1 for 128 x 128, the previous choice there), then 128 x 128 unless it
  // fills them clearly better still.
  const GemmTmaTile widest =
      unless_fills_better(GemmTmaTile::kM128N256Cooperative2x1, GemmTmaTile::kM128N192Cooperative2x1);
  return unless_fills_better(widest, GemmTmaTile::kM128N128Cooperative2x1);
}

GemmTmaSplit gemm_plan_tma_split(const GemmSchedule& schedule, int64_t m, GemmTmaTile head, int num_sms) {
  // Only the measured case: two 128-row tiles of 128 x 256 (gate_up at m = 193-256, v14).
  constexpr GemmTmaTile kTail = GemmTmaTile::kM128N192Cooperative2x1;
  if (head != GemmTmaTile::kM128N256Cooperative2x1 || m <= kMaxMForTmaM128 || m > kMaxMForTmaM256) return {};
  const GemmTmaTileShape h = gemm_tma_tile_shape(head);
  const int64_t m_tiles = (m + h.m - 1) / h.m;
  const int64_t column_tiles_per_wave = num_sms / m_tiles;
  if (column_tiles_per_wave < 1 || tma_tiles(head, m, schedule.n) <= num_sms) return {};
  // Whole waves of head tiles (whole column tiles of every m-tile), then the rest in one wave of
  // tail tiles.
  const int64_t whole_waves = (schedule.n / h.n) / column_tiles_per_wave;
  const int64_t split_n = whole_waves * column_tiles_per_wave * h.n;
  if (split_n == 0 || split_n >= schedule.n || tma_tiles(kTail, m, schedule.n - split_n) > num_sms) return {};
  return {split_n, kTail};
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
  l.tma_stream_weights = weight_tiles_loaded_once(tile, m);
  return l;
}

GemmLaunch make_gemm_tma_split_launch(const GemmSchedule& schedule, int64_t m, GemmTmaTile head, int64_t split_n,
                                      GemmTmaTile tail) {
  GemmLaunch l = make_gemm_tma_launch(schedule, m, head);
  l.tma_split_n = split_n;
  l.tma_tail_tile = tail;
  if (split_n != 0) l.tma_stream_weights = l.tma_stream_weights && weight_tiles_loaded_once(tail, m);
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
    const GemmTmaTile head = gemm_plan_tma_tile(schedule, m, num_sms);
    const GemmTmaSplit split = gemm_plan_tma_split(schedule, m, head, num_sms);
    return make_gemm_tma_split_launch(schedule, m, head, split.split_n, split.tail);
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
