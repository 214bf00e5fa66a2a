#include "kernels/cuda/gemm/gemm_schedule.h"

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <string>

namespace vosti {

namespace {
// One wave of the smallest m-tile configuration on a 132-multiprocessor Hopper (mma.sync
// m16: 3 resident CTAs each): at small m the segments of every tile run side by side and the
// weight stream is the cost.
constexpr int64_t kTargetSmallMCtasMmaSync = 396;
constexpr int kMinKBlocksPerSegment = 3;
constexpr int kMaxSegments = 16;
constexpr size_t kWorkspaceAlign = 256;
// Launch-plan thresholds, from the plan sweep of bench/gemm_cuda_bench.cu on the H200
// (dev/cuda/NOTES.md); they move time, never bits.
constexpr int64_t kMaxMForM16Tiles = 32;
constexpr int64_t kMaxMForM64Tiles = 256;
constexpr int64_t kMaxMForSplit = 128;
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
  const int64_t limit =
      std::min<int64_t>({kTargetSmallMCtasMmaSync / n_tiles, kMaxSegments, s.num_k_blocks / kMinKBlocksPerSegment});
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

namespace {

// The kWgmmaTmaWarpSpecialized instantiation rule as data: the first row (in order) whose
// conditions hold for the call names its tile. A row applies to m <= max_m; `k128` and `wide`
// ask for k % 128 == 0 and for n / 128 >= the SM count (kAny: either); `fit` asks that the
// row's tile fit one wave (kOneWave), fit one wave or fill >= kTmaMinWaveFill of its waves
// (kFillsWaves), or nothing (kAlways); kFillsBetter (the last row) takes the row's tile unless
// each of `alternatives` in turn fills the waves more than kTmaWaveFillMargin better. Measured
// in dev/cuda/NOTES.md v9-v22 (the version named per row); every row computes the same bits.
enum class Need : uint8_t { kAny, kYes, kNo };
enum class Fit : uint8_t { kAlways, kOneWave, kFillsWaves, kFillsBetter };
struct TmaRuleRow {
  int64_t max_m;
  Need k128;
  Need wide;
  Fit fit;
  GemmTmaTile tile;
  GemmTmaTile alternatives[2] = {tile, tile};  // kFillsBetter only
};
using Tile = GemmTmaTile;
constexpr int64_t kAnyM = INT64_MAX;
constexpr TmaRuleRow kTmaRule[] = {
    // m <= 16: one 16-row x tile per weight tile, 128-column k-tiles where k allows (v13).
    {kMaxMForTmaM16, Need::kNo, Need::kYes, Fit::kAlways, Tile::kSwapM32N128Cooperative2x1},
    {kMaxMForTmaM16, Need::kNo, Need::kNo, Fit::kAlways, Tile::kM64N32Pingpong},
    {kMaxMForTmaM16, Need::kYes, Need::kAny, Fit::kOneWave, Tile::kSwapM16N64Basic4x1K128},  // basic: v12b
    {kMaxMForTmaM16, Need::kYes, Need::kAny, Fit::kAlways, Tile::kSwapM16N64Pingpong4x1K128},
    // m <= 32.
    {kMaxMForTmaM32, Need::kYes, Need::kAny, Fit::kOneWave, Tile::kSwapM32N64Basic4x1K128},
    {kMaxMForTmaM32, Need::kAny, Need::kYes, Fit::kAlways, Tile::kSwapM32N128Cooperative2x1},
    {kMaxMForTmaM32, Need::kAny, Need::kAny, Fit::kAlways, Tile::kM64N32Pingpong},
    // m <= 64: a wide weight (gate_up) streams through 128-column tiles; else two 32-row tiles
    // sharing each weight tile (o, down), else one 64-row tile per weight tile (qkv).
    {kMaxMForTmaM64, Need::kAny, Need::kYes, Fit::kAlways, Tile::kSwapM64N128Cooperative2x1},
    {kMaxMForTmaM64, Need::kYes, Need::kAny, Fit::kOneWave, Tile::kSwapM32N64Basic1x2K128},
    {kMaxMForTmaM64, Need::kYes, Need::kAny, Fit::kOneWave, Tile::kSwapM64N64Basic4x1K128},
    {kMaxMForTmaM64, Need::kAny, Need::kAny, Fit::kAlways, Tile::kSwapM32N64Pingpong1x2},
    // m <= 128: one wave of 256-row weight tiles where they fit (v19: gate_up 1-3%), else 128;
    // else one wave of 64-row tiles (two sharing a weight tile, or two sharing a 96-column one).
    {kMaxMForTmaM128, Need::kAny, Need::kYes, Fit::kOneWave, Tile::kSwapM128N256Cooperative},
    {kMaxMForTmaM128, Need::kAny, Need::kYes, Fit::kAlways, Tile::kSwapM128N128Cooperative},
    {kMaxMForTmaM128, Need::kAny, Need::kAny, Fit::kOneWave, Tile::kSwapM64N64Basic1x2},
    {kMaxMForTmaM128, Need::kAny, Need::kAny, Fit::kOneWave, Tile::kM64N96Basic2x1},
    {kMaxMForTmaM128, Need::kAny, Need::kAny, Fit::kAlways, Tile::kSwapM128N64Pingpong},
    // m <= 192: a wide weight one 192-row x tile per weight tile (v14); 96-row x tiles (v18).
    {kMaxMForTmaM192, Need::kAny, Need::kYes, Fit::kAlways, Tile::kSwapM192N128Cooperative2x1},
    {kMaxMForTmaM192, Need::kAny, Need::kAny, Fit::kOneWave, Tile::kSwapM96N64Basic1x2},
    // m <= 256: two x tiles per weight tile where one wave holds them, else 128 x 256 (with
    // gemm_plan_tma_split's 128 x 192 tail).
    {kMaxMForTmaM256, Need::kAny, Need::kAny, Fit::kOneWave, Tile::kSwapM128N64Basic1x2},
    {kMaxMForTmaM256, Need::kAny, Need::kAny, Fit::kOneWave, Tile::kM128N96Basic2x1},
    {kMaxMForTmaM256, Need::kAny, Need::kAny, Fit::kAlways, Tile::kM128N256Cooperative2x1},
    // m <= 512: swapped 128 x 128 where it fills its waves well.
    {kMaxMForTmaSwap128, Need::kAny, Need::kAny, Fit::kFillsWaves, Tile::kSwapM128N128Cooperative},
    {kMaxMForTmaSwap128, Need::kAny, Need::kAny, Fit::kAlways, Tile::kM128N256Cooperative2x1},
    // Larger m: 128 x 256 unless 128 x 192 fills the waves clearly better (v17: qkv m = 1024),
    // then 128 x 128 unless it fills them clearly better still.
    {kAnyM,
     Need::kAny,
     Need::kAny,
     Fit::kFillsBetter,
     Tile::kM128N256Cooperative2x1,
     {Tile::kM128N192Cooperative2x1, Tile::kM128N128Cooperative2x1}},
};
static_assert(kTmaRule[std::size(kTmaRule) - 1].max_m == kAnyM, "the rule's last row applies to every m");

bool need_holds(Need need, bool value) { return need == Need::kAny || (need == Need::kYes) == value; }

}  // namespace

GemmTmaTile gemm_plan_tma_tile(const GemmSchedule& schedule, int64_t m, int num_sms) {
  const auto tiles = [&](GemmTmaTile tile) { return tma_tiles(tile, m, schedule.n); };
  // Fraction of the CTA slots of all waves that hold a tile (1 = whole waves; one CTA per SM).
  const auto wave_fill = [&](GemmTmaTile tile) {
    const int64_t count = tiles(tile);
    const int64_t waves = (count + num_sms - 1) / num_sms;
    return static_cast<double>(count) / static_cast<double>(waves * num_sms);
  };
  const bool wide = (schedule.n + 127) / 128 >= num_sms;
  const bool k128 = schedule.k % 128 == 0;
  for (const TmaRuleRow& row : kTmaRule) {
    if (m > row.max_m || !need_holds(row.k128, k128) || !need_holds(row.wide, wide)) continue;
    switch (row.fit) {
      case Fit::kAlways:
        return row.tile;
      case Fit::kOneWave:
        if (tiles(row.tile) <= num_sms) return row.tile;
        break;
      case Fit::kFillsWaves:
        if (tiles(row.tile) <= num_sms || wave_fill(row.tile) >= kTmaMinWaveFill) return row.tile;
        break;
      case Fit::kFillsBetter: {
        GemmTmaTile chosen = row.tile;
        for (const GemmTmaTile alternative : row.alternatives)
          if (wave_fill(alternative) > wave_fill(chosen) + kTmaWaveFillMargin) chosen = alternative;
        return chosen;
      }
    }
  }
  return GemmTmaTile::kM128N256Cooperative2x1;  // not reached: the last row applies to every m
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
  const int block_m = m <= kMaxMForM16Tiles ? 16 : (m <= kMaxMForM64Tiles ? 64 : 128);
  const int64_t tiles = ((m + block_m - 1) / block_m) * ((schedule.n + kGemmBlockN - 1) / kGemmBlockN);
  const int64_t slots = static_cast<int64_t>(num_sms) * gemm_ctas_per_sm(schedule.instruction, block_m);
  // Whole groups of equal size (a divisor of S), as many as one wave of resident CTAs holds,
  // while the partials (S planes of m x n f32, written and read) stay cheap next to the weight.
  const int groups =
      (tiles >= slots || m > kMaxMForSplit) ? 1 : largest_divisor_at_most(schedule.num_segments, slots / tiles);
  return make_gemm_launch(schedule, m, block_m, groups, num_sms);
}

}  // namespace vosti
