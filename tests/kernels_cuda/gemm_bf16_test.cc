// Tests of the bf16 GEMM (src/kernels/cuda/gemm/gemm_bf16.h): the schedule table, accuracy
// against an f64 CPU reference, and bitwise batch invariance: row r of an m-row product
// equals the same row computed alone, for every m in 1..300 and samples up to 8192,
// at several row positions, with the other rows freshly drawn for every m.
#include "kernels/cuda/gemm/gemm_bf16.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <iterator>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "kernels/cuda/cuda_status.h"
#include "kernels/cuda/gemm/gemm_schedule.h"
#include "tests/kernels_cuda/cuda_test_util.h"

namespace vosti {
namespace {

using cuda_test::DeviceBuffer;

TEST(GemmSchedule, RejectsShapesItCannotRun) {
  EXPECT_EQ(select_schedule(0, 64).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(select_schedule(100, 64).status().code(), StatusCode::kInvalidArgument);  // n % 8 != 0
  EXPECT_EQ(select_schedule(128, 96).status().code(), StatusCode::kInvalidArgument);  // k % 64 != 0
  Result<GemmSchedule> bad = select_schedule(128, 100);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("k=100"), std::string::npos);
}

TEST(GemmSchedule, SegmentsTileTheKBlocksInOrder) {
  for (int64_t n : {8, 576, 960, 1024, 4096, 6144, 28672, 49152}) {
    for (int64_t k : {64, 576, 1536, 4096, 14336}) {
      Result<GemmSchedule> s = select_schedule(n, k);
      ASSERT_TRUE(s.ok()) << s.status().to_string();
      const GemmSchedule& g = s.value();
      EXPECT_EQ(g.num_k_blocks, k / kGemmBlockK);
      ASSERT_GE(g.num_segments, 1);
      ASSERT_LE(g.num_segments, g.num_k_blocks);
      EXPECT_EQ(g.num_k_blocks % g.num_segments, 0);
      EXPECT_EQ(gemm_segment_begin(g, 0), 0);
      EXPECT_EQ(gemm_segment_begin(g, g.num_segments), g.num_k_blocks);
      for (int seg = 0; seg < g.num_segments; ++seg)
        EXPECT_LT(gemm_segment_begin(g, seg), gemm_segment_begin(g, seg + 1));
      Result<GemmSchedule> again = select_schedule(n, k);
      EXPECT_EQ(again.value().num_segments, g.num_segments);
    }
  }
}

TEST(GemmSchedule, LlamaShapesSplitKAtSmallM) {
  struct Shape {
    int64_t n, k;
    int segments;
  };
  // The table as chosen (<= 396 CTAs at one m-tile, >= 3 k-blocks a segment, <= 16 equal segments).
  for (Shape s : {Shape{6144, 4096, 8}, Shape{4096, 4096, 8}, Shape{28672, 4096, 1}, Shape{4096, 14336, 8}}) {
    const GemmSchedule g = select_schedule(s.n, s.k).value();
    EXPECT_EQ(g.num_segments, s.segments) << s.n << "x" << s.k;
    EXPECT_EQ(plan_gemm_launch(g, 1, 132).split_segments, s.segments > 1);
    EXPECT_FALSE(plan_gemm_launch(g, 4096, 132).split_segments);
  }
}

TEST(GemmSchedule, CutlassTilesFollowTheMeasuredThresholds) {
  const auto plan = [](int64_t n, int64_t k, int64_t m) {
    return plan_gemm_launch(select_schedule(n, k, GemmInstruction::kWgmmaTmaWarpSpecialized).value(), m, 132).tma_tile;
  };
  // The v13 sweep's choices (dev/cuda/NOTES.md v11-v13) at the Llama-3-8B shapes: qkv 6144 x 4096,
  // o 4096 x 4096, gate_up 28672 x 4096 (wide: 224 tiles of 128 columns on 132 SMs), down 4096 x 14336.
  // The basic (non-persistent) kernels where their tiles fit one wave of 132 SMs.
  for (int64_t m : {1, 8, 16}) {
    for (int64_t n : {6144, 4096}) EXPECT_EQ(plan(n, 4096, m), GemmTmaTile::kSwapM16N64Basic4x1K128) << m;
    EXPECT_EQ(plan(4096, 14336, m), GemmTmaTile::kSwapM16N64Basic4x1K128) << m;
    EXPECT_EQ(plan(28672, 4096, m), GemmTmaTile::kSwapM16N64Pingpong4x1K128) << m;  // 448 tiles
  }
  for (int64_t m : {17, 32}) {
    for (int64_t n : {6144, 4096}) EXPECT_EQ(plan(n, 4096, m), GemmTmaTile::kSwapM32N64Basic4x1K128) << m;
    EXPECT_EQ(plan(4096, 14336, m), GemmTmaTile::kSwapM32N64Basic4x1K128) << m;  // 64 tiles
    EXPECT_EQ(plan(28672, 4096, m), GemmTmaTile::kSwapM32N128Cooperative2x1) << m;
  }
  for (int64_t m : {33, 64}) {
    EXPECT_EQ(plan(6144, 4096, m), GemmTmaTile::kSwapM64N64Basic4x1K128) << m;  // 96 tiles; 192 of 32 x 64
    EXPECT_EQ(plan(4096, 4096, m), GemmTmaTile::kSwapM32N64Basic1x2K128) << m;  // 2 x 64 tiles
    EXPECT_EQ(plan(4096, 14336, m), GemmTmaTile::kSwapM32N64Basic1x2K128) << m;
    EXPECT_EQ(plan(28672, 4096, m), GemmTmaTile::kSwapM64N128Cooperative2x1) << m;
  }
  for (int64_t m : {65, 96, 128}) {
    EXPECT_EQ(plan(4096, 4096, m), GemmTmaTile::kSwapM64N64Basic1x2) << m;  // 128 tiles: one wave
    EXPECT_EQ(plan(4096, 14336, m), GemmTmaTile::kSwapM64N64Basic1x2) << m;
    EXPECT_EQ(plan(6144, 4096, m), GemmTmaTile::kM64N96Basic2x1) << m;            // 128 tiles; 192 of 64 x 64
    EXPECT_EQ(plan(28672, 4096, m), GemmTmaTile::kSwapM128N256Cooperative) << m;  // 112 tiles: one wave
  }
  EXPECT_EQ(plan(40960, 4096, 128), GemmTmaTile::kSwapM128N128Cooperative);  // 160 wide tiles: not one wave
  // A weight too wide for one wave of basic tiles and too narrow to be "wide" (11008 x 4096):
  // the persistent kernels.
  EXPECT_EQ(plan(11008, 4096, 8), GemmTmaTile::kSwapM16N64Pingpong4x1K128);  // 172 tiles
  EXPECT_EQ(plan(11008, 4096, 32), GemmTmaTile::kM64N32Pingpong);            // 172 swapped tiles
  EXPECT_EQ(plan(11008, 4096, 64), GemmTmaTile::kSwapM32N64Pingpong1x2);     // 344 and 172 tiles
  EXPECT_EQ(plan(11008, 4096, 128), GemmTmaTile::kSwapM128N64Pingpong);
  for (int64_t m : {129, 160, 161, 192, 193, 256}) {
    // o, down: 2 x 64 tiles (one wave) of 96 rows up to 192 rows, then of 128.
    const GemmTmaTile two_x_tiles = m <= 192 ? GemmTmaTile::kSwapM96N64Basic1x2 : GemmTmaTile::kSwapM128N64Basic1x2;
    EXPECT_EQ(plan(4096, 4096, m), two_x_tiles) << m;
    EXPECT_EQ(plan(4096, 14336, m), two_x_tiles) << m;
    // qkv: 2 x 64 tiles of 128 x 96 (its swapped 64-column tiles would be 2 x 96).
    EXPECT_EQ(plan(6144, 4096, m), GemmTmaTile::kM128N96Basic2x1) << m;
    // gate_up: one 192-row tile of x per weight tile up to 192 rows, then 128 x 256 (split, below).
    EXPECT_EQ(plan(28672, 4096, m),
              m <= 192 ? GemmTmaTile::kSwapM192N128Cooperative2x1 : GemmTmaTile::kM128N256Cooperative2x1)
        << m;
  }
  EXPECT_EQ(plan(4096, 4096, 384), GemmTmaTile::kSwapM128N128Cooperative);   // 96 tiles: one wave
  EXPECT_EQ(plan(28672, 4096, 384), GemmTmaTile::kSwapM128N128Cooperative);  // 672 tiles: 85% of 6 waves
  EXPECT_EQ(plan(6144, 4096, 384), GemmTmaTile::kM128N256Cooperative2x1);    // 144 tiles: 55% of 2 waves
  EXPECT_EQ(plan(4096, 14336, 512), GemmTmaTile::kSwapM128N128Cooperative);
  EXPECT_EQ(plan(4096, 4096, 1024), GemmTmaTile::kM128N256Cooperative2x1);
  // qkv at m = 1024: 192 tiles of 128 x 256 fill 73% of two waves, 256 of 128 x 192 and 384 of
  // 128 x 128 97% of theirs: the wider of those two (v17).
  EXPECT_EQ(plan(6144, 4096, 1024), GemmTmaTile::kM128N192Cooperative2x1);
  EXPECT_EQ(plan(6144, 4096, 1536), GemmTmaTile::kM128N192Cooperative2x1);  // 288 x 256: 73%; 384 x 192: 97%
  EXPECT_EQ(plan(6144, 4096, 4096), GemmTmaTile::kM128N256Cooperative2x1);
  EXPECT_EQ(plan(28672, 4096, 4096), GemmTmaTile::kM128N256Cooperative2x1);
  // The rule reads the multiprocessor count: on 114 SMs qkv's 96 swapped 32 x 64 tiles still fit
  // one wave, o's 128 swapped tiles of 64 x 64 no longer do (its 86 of 64 x 96 do); qkv's 128 of
  // 64 x 96 do not either; on 64 SMs qkv's 96 tiles of 16 x 64 do not.
  const GemmSchedule qkv = select_schedule(6144, 4096, GemmInstruction::kWgmmaTmaWarpSpecialized).value();
  const GemmSchedule o = select_schedule(4096, 4096, GemmInstruction::kWgmmaTmaWarpSpecialized).value();
  EXPECT_EQ(gemm_plan_tma_tile(qkv, 32, 114), GemmTmaTile::kSwapM32N64Basic4x1K128);
  EXPECT_EQ(gemm_plan_tma_tile(o, 32, 60), GemmTmaTile::kM64N32Pingpong);  // 64 swapped tiles
  EXPECT_EQ(gemm_plan_tma_tile(o, 128, 114), GemmTmaTile::kM64N96Basic2x1);
  EXPECT_EQ(gemm_plan_tma_tile(qkv, 128, 114), GemmTmaTile::kSwapM128N64Pingpong);
  EXPECT_EQ(gemm_plan_tma_tile(qkv, 8, 64), GemmTmaTile::kSwapM16N64Pingpong4x1K128);  // 96 tiles on 64 SMs
}

// Calls f(launch, n, m, sms) for the CUTLASS family's plan over weight widths (k = 4096), row
// counts and SM counts far from the tuned shapes; stops at the first fatal failure f reports.
template <typename F>
void for_each_tma_plan(F f) {
  for (int sms : {16, 66, 114, 132}) {
    for (int64_t n = 8; n <= 60000; n += 104) {
      const GemmSchedule g = select_schedule(n, 4096, GemmInstruction::kWgmmaTmaWarpSpecialized).value();
      for (int64_t m = 1; m <= 600; m += (m < 64 ? 1 : 7)) {
        f(plan_gemm_launch(g, m, sms), n, m, sms);
        if (::testing::Test::HasFatalFailure()) return;
      }
    }
  }
}

// The basic kernels have no tile scheduler: one CTA per tile, so the rule may pick one only where
// all its tiles fit one wave of the multiprocessors (beyond, a second partial wave costs up to 2x:
// NOTES v12b).
TEST(GemmSchedule, BasicKernelsOnlyWhereTheirTilesFitOneWave) {
  int basic_picks = 0;
  for_each_tma_plan([&](const GemmLaunch& l, int64_t n, int64_t m, int sms) {
    if (std::string(gemm_tma_tile_name(l.tma_tile)).find("basic") == std::string::npos) return;
    ++basic_picks;
    const GemmTmaTileShape t = gemm_tma_tile_shape(l.tma_tile);
    ASSERT_LE(((m + t.m - 1) / t.m) * ((n + t.n - 1) / t.n), sms)
        << gemm_tma_tile_name(l.tma_tile) << " n=" << n << " m=" << m << " sms=" << sms;
  });
  EXPECT_GT(basic_picks, 0);
}

// A 128-column k-tile over a k that is not a multiple of 128 ends in zero-filled k16 steps that
// the 64-column tiles do not run (exact, except that they turn an exact -0 sum into +0), so the
// rule may pick one only where k is a multiple of 128 (gemm_bf16_sm90_tma.h).
TEST(GemmSchedule, K128TilesOnlyWhereKIsAMultipleOf128) {
  int k128_picks = 0;
  for (int64_t k : {64, 576, 1536, 4096, 4160, 14336}) {
    for (int64_t n : {576, 960, 4096, 6144, 11008, 28672}) {
      const GemmSchedule g = select_schedule(n, k, GemmInstruction::kWgmmaTmaWarpSpecialized).value();
      for (int64_t m = 1; m <= 600; m += (m < 64 ? 1 : 7)) {
        const GemmTmaTile tile = gemm_plan_tma_tile(g, m, 132);
        if (gemm_tma_tile_shape(tile).k != 128) continue;
        ++k128_picks;
        ASSERT_EQ(k % 128, 0) << gemm_tma_tile_name(tile) << " n=" << n << " k=" << k << " m=" << m;
      }
    }
  }
  EXPECT_GT(k128_picks, 0);
  // Where k is not a multiple of 128 the 64-column tiles stand in at small m.
  const GemmSchedule smol_qkv = select_schedule(960, 576, GemmInstruction::kWgmmaTmaWarpSpecialized).value();
  EXPECT_EQ(gemm_plan_tma_tile(smol_qkv, 1, 132), GemmTmaTile::kM64N32Pingpong);
  EXPECT_EQ(gemm_plan_tma_tile(smol_qkv, 64, 132), GemmTmaTile::kSwapM32N64Pingpong1x2);
}

// gate_up (28672 columns) at m = 193-256 on 132 SMs: 224 tiles of 128 x 256 are 1.7 waves; the plan
// runs one wave of them (66 column tiles x 2 m-tiles) and the other 11776 columns as 124 tiles of
// 128 x 192 (v14). Nothing else splits at the Llama-3-8B shapes.
TEST(GemmSchedule, GateUpColumnsSplitIntoOneWaveOfEachTile) {
  const GemmSchedule gate_up = select_schedule(28672, 4096, GemmInstruction::kWgmmaTmaWarpSpecialized).value();
  for (int64_t m = 193; m <= 256; ++m) {
    const GemmLaunch l = plan_gemm_launch(gate_up, m, 132);
    ASSERT_EQ(l.tma_tile, GemmTmaTile::kM128N256Cooperative2x1) << m;
    ASSERT_EQ(l.tma_split_n, 66 * 256) << m;
    ASSERT_EQ(l.tma_tail_tile, GemmTmaTile::kM128N192Cooperative2x1) << m;
  }
  for (int64_t n : {6144, 4096, 28672}) {
    const GemmSchedule g = select_schedule(n, 4096, GemmInstruction::kWgmmaTmaWarpSpecialized).value();
    for (int64_t m = 1; m <= 9000; m += (m < 300 ? 1 : 61)) {
      if (n == 28672 && m > 192 && m <= 256) continue;
      ASSERT_EQ(plan_gemm_launch(g, m, 132).tma_split_n, 0) << "n=" << n << " m=" << m;
    }
  }
  EXPECT_EQ(plan_gemm_launch(select_schedule(4096, 14336, GemmInstruction::kWgmmaTmaWarpSpecialized).value(), 200, 132)
                .tma_split_n,
            0);
}

// Wherever the rule splits (any width, row count and SM count): the head covers whole waves of
// whole tiles, the tail's tiles fit one wave, and the split is inside the weight.
TEST(GemmSchedule, ColumnSplitsCoverWholeWavesThenOneWave) {
  int splits = 0;
  for_each_tma_plan([&](const GemmLaunch& l, int64_t n, int64_t m, int sms) {
    if (l.tma_split_n == 0) return;
    ++splits;
    const GemmTmaTileShape h = gemm_tma_tile_shape(l.tma_tile), t = gemm_tma_tile_shape(l.tma_tail_tile);
    const int64_t m_tiles = (m + h.m - 1) / h.m;
    ASSERT_GT(l.tma_split_n, 0);
    ASSERT_LT(l.tma_split_n, n);
    ASSERT_EQ(l.tma_split_n % h.n, 0);
    const int64_t head_tiles = m_tiles * (l.tma_split_n / h.n);
    ASSERT_GE(head_tiles, sms - m_tiles + 1) << "n=" << n << " m=" << m << " sms=" << sms;  // >= one wave
    ASSERT_LE(((m + t.m - 1) / t.m) * ((n - l.tma_split_n + t.n - 1) / t.n), sms)
        << "n=" << n << " m=" << m << " sms=" << sms;
  });
  EXPECT_GT(splits, 0);
}

// The weight's loads carry the L2 hint evict-first exactly where every weight tile is loaded once:
// the m rows' x tiles all lie in one cluster (which shares the weight tile by multicast), for the
// head and the tail of a split. Elsewhere a weight tile is read again by another cluster and the
// L2 should keep it.
TEST(GemmSchedule, WeightsStreamEvictFirstWhereEachWeightTileIsLoadedOnce) {
  int streamed = 0, kept = 0;
  for_each_tma_plan([&](const GemmLaunch& l, int64_t n, int64_t m, int sms) {
    bool once = true;
    for (GemmTmaTile tile : {l.tma_tile, l.tma_tail_tile}) {
      const int64_t rows = gemm_tma_tile_shape(tile).m;
      once = once && (m + rows - 1) / rows <= gemm_tma_tile_x_cluster(tile);
      if (l.tma_split_n == 0) break;
    }
    ASSERT_EQ(l.tma_stream_weights, once)
        << gemm_tma_tile_name(l.tma_tile) << " n=" << n << " m=" << m << " sms=" << sms;
    ++(once ? streamed : kept);
  });
  EXPECT_GT(streamed, 0);
  EXPECT_GT(kept, 0);
  // The Llama-3-8B shapes on 132 SMs: streamed at every m of the benchmark up to 256, kept beyond.
  for (int64_t n : {6144, 4096, 28672}) {
    const GemmSchedule g = select_schedule(n, 4096, GemmInstruction::kWgmmaTmaWarpSpecialized).value();
    for (int64_t m : {1, 8, 32, 64, 128, 129, 192, 256})
      EXPECT_TRUE(plan_gemm_launch(g, m, 132).tma_stream_weights) << "n=" << n << " m=" << m;
    for (int64_t m : {1024, 4096})
      EXPECT_FALSE(plan_gemm_launch(g, m, 132).tma_stream_weights) << "n=" << n << " m=" << m;
  }
  for (GemmTmaTile tile : kAllGemmTmaTiles) {
    const int c = gemm_tma_tile_x_cluster(tile);
    EXPECT_TRUE(c == 1 || c == 2) << gemm_tma_tile_name(tile);
  }
}

TEST(GemmSchedule, CutlassTilesAreDistinctInstantiations) {
  std::set<std::string> names;
  for (GemmTmaTile tile : kAllGemmTmaTiles) {
    const GemmTmaTileShape t = gemm_tma_tile_shape(tile);
    EXPECT_TRUE(t.m == 16 || t.m == 32 || t.m == 64 || t.m == 96 || t.m == 128 || t.m == 192)
        << gemm_tma_tile_name(tile);
    EXPECT_EQ(t.n % 16, 0) << gemm_tma_tile_name(tile);
    EXPECT_TRUE(t.k == 64 || t.k == 128) << gemm_tma_tile_name(tile);
    EXPECT_EQ(std::string(gemm_tma_tile_name(tile)).find("k128") != std::string::npos, t.k == 128)
        << gemm_tma_tile_name(tile);
    names.insert(gemm_tma_tile_name(tile));
  }
  EXPECT_EQ(std::size(kAllGemmTmaTiles), 21u);
  EXPECT_EQ(names.size(), std::size(kAllGemmTmaTiles));
}

TEST(GemmSchedule, InstructionIsTheCutlassFamilyOnSm90) {
  for (int64_t n : {6144, 4096, 28672})
    EXPECT_EQ(select_instruction(n, 4096, true), GemmInstruction::kWgmmaTmaWarpSpecialized);
  EXPECT_EQ(select_instruction(4096, 14336, true), GemmInstruction::kWgmmaTmaWarpSpecialized);
  EXPECT_EQ(select_instruction(28672, 4096, false), GemmInstruction::kMmaSyncM16N8K16);
}

TEST(GemmSchedule, CutlassFamilyHasOneChainAndNoWorkspace) {
  for (int64_t n : {8, 960, 4096, 28672}) {
    for (int64_t k : {64, 576, 4096, 14336}) {
      const GemmSchedule g = select_schedule(n, k, GemmInstruction::kWgmmaTmaWarpSpecialized).value();
      EXPECT_EQ(g.num_segments, 1);
      EXPECT_EQ(g.num_k_blocks, k / kGemmBlockK);
      EXPECT_EQ(gemm_workspace_bytes(g, 8192, 132), 0u);
      for (int64_t m = 1; m <= 9000; m += 7) {
        const GemmLaunch l = plan_gemm_launch(g, m, 132);
        ASSERT_EQ(l.tma_tile, gemm_plan_tma_tile(g, m, 132));
        ASSERT_EQ(l.num_groups, 1);
        ASSERT_FALSE(l.split_segments);
        ASSERT_EQ(l.workspace_bytes, 0u);
        ASSERT_EQ(l.block_m, gemm_tma_tile_shape(l.tma_tile).m);
      }
    }
  }
}

TEST(GemmLaunch, WorkspaceCoversEveryRowCount) {
  const GemmSchedule g = select_schedule(4096, 4096).value();
  const size_t ws = gemm_workspace_bytes(g, 8192, 132);
  for (int64_t m = 1; m <= 8192; ++m) ASSERT_LE(plan_gemm_launch(g, m, 132).workspace_bytes, ws) << m;
}

TEST(GemmLaunch, GroupsFitOneWaveAndCountersStayPut) {
  for (int64_t n : {576, 1024, 4096, 6144}) {
    const GemmSchedule g = select_schedule(n, 4096).value();
    const size_t counters = plan_gemm_launch(g, 1, 132).counter_bytes;
    for (int64_t m = 1; m <= 3000; ++m) {
      const GemmLaunch l = plan_gemm_launch(g, m, 132);
      // The counters must not move with m: a later call would find a partial where a counter is.
      ASSERT_EQ(l.counter_bytes, counters);
      ASSERT_GE(l.num_groups, 1);
      ASSERT_LE(l.num_groups, g.num_segments);
      ASSERT_EQ(l.split_segments, l.num_groups > 1);
      const int64_t ctas = static_cast<int64_t>(l.num_m_tiles) * l.num_n_tiles * l.num_groups;
      if (l.split_segments) {
        ASSERT_LE(ctas, 132 * gemm_ctas_per_sm(g.instruction, l.block_m)) << "n=" << n << " m=" << m;
        ASSERT_LE(static_cast<size_t>(l.num_m_tiles) * l.num_n_tiles * 4, counters);
      }
    }
  }
}

// The instructions this device runs: mma.sync everywhere, wgmma on sm_90.
std::vector<GemmInstruction> device_instructions() {
  std::vector<GemmInstruction> v = {GemmInstruction::kMmaSyncM16N8K16};
  if (cuda_test::device().has_wgmma) v.push_back(GemmInstruction::kWgmmaTmaWarpSpecialized);
  return v;
}

const char* instruction_name(GemmInstruction i) {
  switch (i) {
    case GemmInstruction::kWgmmaTmaWarpSpecialized:
      return "wgmma tma warp-specialized (CUTLASS)";
    default:
      return "mma.sync";
  }
}

// A weight, bias and zeroed workspace on the device, for calls of up to max_m rows.
class GemmHarness {
 public:
  // segments > 0 replaces the schedule's k segment count (the same weights and bias for a seed).
  GemmHarness(int64_t n, int64_t k, int64_t max_m, uint64_t seed,
              GemmInstruction instruction = GemmInstruction::kMmaSyncM16N8K16, int segments = 0)
      : schedule_(with_segments(select_schedule(n, k, instruction).value(), segments)),
        w_(cuda_test::random_bf16(static_cast<size_t>(n * k), seed, 0.05f)),
        bias_(cuda_test::random_f32(static_cast<size_t>(n), seed + 1, 0.5f)),
        workspace_(std::max(gemm_workspace_bytes(schedule_, max_m, cuda_test::device().num_sms),
                            make_gemm_launch(schedule_, max_m, 64, schedule_.num_segments, cuda_test::device().num_sms)
                                .workspace_bytes)) {
    EXPECT_EQ(cudaMemset(workspace_.get(), 0, workspace_.size()), cudaSuccess);
  }
  static GemmSchedule with_segments(GemmSchedule s, int segments) {
    if (segments > 0) s.num_segments = segments;
    return s;
  }
  // Runs with the default plan, or with `launch` when given.
  Status run(const uint16_t* x, int64_t m, void* y, DType out, bool with_bias, const GemmLaunch* launch = nullptr,
             int64_t row_capacity = 0) {
    GemmArgs a;
    a.row_capacity = row_capacity;
    a.x = x;
    a.w = w_.get();
    a.bias = with_bias ? bias_.get() : nullptr;
    a.y = y;
    a.out_dtype = out;
    a.m = m;
    const GemmWorkspace ws{workspace_.get(), workspace_.size()};
    const Status s = launch ? gemm_bf16_with_launch(schedule_, a, *launch, ws, nullptr, cuda_test::device().gemm())
                            : gemm_bf16(schedule_, a, ws, nullptr, cuda_test::device().gemm());
    if (!s.ok()) return s;
    return cuda_status(cudaDeviceSynchronize(), "gemm_bf16");
  }
  const GemmSchedule& schedule() const { return schedule_; }
  std::vector<uint16_t> weight() const { return w_.download(); }
  std::vector<float> bias() const { return bias_.download(); }

 private:
  GemmSchedule schedule_;
  DeviceBuffer<uint16_t> w_;  // [n, k]
  DeviceBuffer<float> bias_;  // [n]
  DeviceBuffer<uint8_t> workspace_;
};

// f64 reference of rows `rows` of x[m, k] w[n, k]^T + bias.
std::vector<double> reference_rows(const std::vector<uint16_t>& x, const std::vector<uint16_t>& w,
                                   const std::vector<float>* bias, int64_t n, int64_t k,
                                   const std::vector<int64_t>& rows) {
  std::vector<double> out;
  std::vector<double> wd(w.size());
  for (size_t i = 0; i < w.size(); ++i) wd[i] = bf16_to_f32(w[i]);
  for (int64_t r : rows) {
    std::vector<double> xr(static_cast<size_t>(k));
    for (int64_t i = 0; i < k; ++i) xr[i] = bf16_to_f32(x[r * k + i]);
    for (int64_t c = 0; c < n; ++c) {
      double acc = bias ? (*bias)[c] : 0.0;
      const double* wc = wd.data() + c * k;
      for (int64_t i = 0; i < k; ++i) acc += xr[i] * wc[i];
      out.push_back(acc);
    }
  }
  return out;
}

struct AccuracyCase {
  int64_t m, n, k;
  DType out;
  bool bias;
};

class GemmAccuracy : public ::testing::TestWithParam<AccuracyCase> {};

void check_accuracy(const AccuracyCase& c, GemmInstruction instruction);

TEST_P(GemmAccuracy, MatchesF64Reference) {
  VOSTI_SKIP_WITHOUT_CUDA();
  const AccuracyCase c = GetParam();
  for (GemmInstruction instruction : device_instructions()) {
    SCOPED_TRACE(instruction_name(instruction));
    check_accuracy(c, instruction);
  }
}

void check_accuracy(const AccuracyCase& c, GemmInstruction instruction) {
  GemmHarness g(c.n, c.k, c.m, 1000 + c.m, instruction);
  const std::vector<uint16_t> x = cuda_test::random_bf16(static_cast<size_t>(c.m * c.k), 7 + c.n);
  DeviceBuffer<uint16_t> dx(x);
  const size_t esize = dtype_size(c.out);
  DeviceBuffer<uint8_t> dy(static_cast<size_t>(c.m * c.n) * esize);  // poisoned: every element must be written
  ASSERT_TRUE(g.run(dx.get(), c.m, dy.get(), c.out, c.bias).ok());
  std::vector<int64_t> rows;
  for (int64_t r = 0; r < c.m; r += std::max<int64_t>(1, c.m / 16)) rows.push_back(r);
  rows.push_back(c.m - 1);
  const std::vector<float> bias = g.bias();
  const std::vector<double> ref = reference_rows(x, g.weight(), c.bias ? &bias : nullptr, c.n, c.k, rows);
  const std::vector<uint8_t> y = dy.download();
  std::vector<double> got;
  for (int64_t r : rows) {
    for (int64_t col = 0; col < c.n; ++col) {
      const uint8_t* e = y.data() + static_cast<size_t>(r * c.n + col) * esize;
      got.push_back(c.out == DType::kF32 ? *reinterpret_cast<const float*>(e)
                                         : bf16_to_f32(*reinterpret_cast<const uint16_t*>(e)));
    }
  }
  const double err = cuda_test::relative_error(ref, got);
  EXPECT_LT(err, c.out == DType::kF32 ? 1e-5 : 4e-3) << "m=" << c.m << " n=" << c.n << " k=" << c.k;
  // Every element written (the poison is NaN in both dtypes).
  for (size_t i = 0; i < y.size(); i += esize) {
    const float v = c.out == DType::kF32 ? *reinterpret_cast<const float*>(&y[i])
                                         : bf16_to_f32(*reinterpret_cast<const uint16_t*>(&y[i]));
    ASSERT_FALSE(std::isnan(v)) << "element " << i / esize << " not written";
  }
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, GemmAccuracy,
    ::testing::Values(AccuracyCase{37, 320, 1024, DType::kBF16, true}, AccuracyCase{5, 960, 576, DType::kF32, false},
                      AccuracyCase{1, 4096, 4096, DType::kF32, true}, AccuracyCase{130, 256, 4096, DType::kF32, true},
                      // m = 65-128 on 132 SMs: swap 64x64 basic 1x2, 64x96 basic 2x1
                      AccuracyCase{100, 4096, 1024, DType::kBF16, true}, AccuracyCase{96, 6144, 576, DType::kF32, true},
                      // the 128-column k-tile plans the cases above do not reach (132 SMs): swap 32x64
                      // basic 4x1, swap 64x64 basic 4x1, swap 16x64 pingpong 4x1
                      AccuracyCase{24, 4096, 4096, DType::kBF16, false},
                      AccuracyCase{48, 6144, 1024, DType::kF32, true}, AccuracyCase{8, 11008, 1024, DType::kBF16, true},
                      // m = 65-128 of a wide weight: swap 128x256 cooperative
                      AccuracyCase{100, 16896, 256, DType::kBF16, true},
                      // m = 129-256 of a 4096-column weight: swap 96x64 and 128x64 basic 1x2
                      AccuracyCase{150, 4096, 1024, DType::kBF16, true},
                      AccuracyCase{240, 4096, 576, DType::kF32, true},
                      AccuracyCase{2200, 1024, 4096, DType::kF32, false},
                      AccuracyCase{300, 1536, 576, DType::kBF16, false}));

// Row invariance over `ms`: probe rows at positions {0, m/2, m-1} of fresh m-row batches.
// With with_capacity, the batch calls pass row_capacity = the rows x and y hold (the rows past m
// hold other data, the probe row's copies among them), the row alone does not.
void check_invariance_with(GemmInstruction instruction, int64_t n, int64_t k, const std::vector<int64_t>& ms, DType out,
                           bool bias, uint64_t seed, bool with_capacity = false) {
  SCOPED_TRACE(instruction_name(instruction));
  const int64_t max_m = *std::max_element(ms.begin(), ms.end());
  GemmHarness g(n, k, max_m, seed, instruction);
  const int64_t pool_rows = max_m + 97;
  DeviceBuffer<uint16_t> pool(cuda_test::random_bf16(static_cast<size_t>(pool_rows * k), seed + 2));
  const std::vector<uint16_t> probe = cuda_test::random_bf16(static_cast<size_t>(k), seed + 3);
  DeviceBuffer<uint16_t> dprobe(probe);
  const size_t row_bytes = static_cast<size_t>(n) * dtype_size(out);
  DeviceBuffer<uint8_t> alone(row_bytes);
  ASSERT_TRUE(g.run(dprobe.get(), 1, alone.get(), out, bias).ok());
  const std::vector<uint8_t> want = alone.download();
  DeviceBuffer<uint16_t> x(static_cast<size_t>(max_m * k));
  DeviceBuffer<uint8_t> y(static_cast<size_t>(max_m) * row_bytes);
  const size_t xrow = static_cast<size_t>(k) * sizeof(uint16_t);
  for (int64_t m : ms) {
    const int64_t offset = (m * 31) % 97;  // other rows differ from one m to the next
    ASSERT_EQ(cudaMemcpy(x.get(), pool.get() + offset * k, xrow * m, cudaMemcpyDeviceToDevice), cudaSuccess);
    const std::set<int64_t> positions = {0, m / 2, m - 1};
    for (int64_t p : positions) {
      ASSERT_EQ(cudaMemcpy(x.get() + p * k, dprobe.get(), xrow, cudaMemcpyDeviceToDevice), cudaSuccess);
    }
    Status s = g.run(x.get(), m, y.get(), out, bias, nullptr, with_capacity ? max_m : 0);
    ASSERT_TRUE(s.ok()) << s.to_string();
    for (int64_t p : positions) {
      const std::vector<uint8_t> got = y.download(static_cast<size_t>(p) * row_bytes, row_bytes);
      ASSERT_TRUE(cuda_test::same_bits(got.data(), want.data(), row_bytes))
          << "n=" << n << " k=" << k << ": row " << p << " of m=" << m << " differs from the row computed alone";
    }
  }
}

// The same for every instruction this device runs.
void check_invariance(int64_t n, int64_t k, const std::vector<int64_t>& ms, DType out, bool bias, uint64_t seed) {
  for (GemmInstruction instruction : device_instructions()) {
    check_invariance_with(instruction, n, k, ms, out, bias, seed);
    if (::testing::Test::HasFatalFailure()) return;
  }
}

std::vector<int64_t> range_m(int64_t lo, int64_t hi) {
  std::vector<int64_t> v;
  for (int64_t m = lo; m <= hi; ++m) v.push_back(m);
  return v;
}

const std::vector<int64_t> kSampledM = {301, 383, 512, 777, 1000, 1024, 2047, 2176, 3001, 4096, 5555, 8192};

TEST(GemmInvariance, QuickSplitAndLoopPlans) {  // the subset compute-sanitizer racecheck runs
  VOSTI_SKIP_WITHOUT_CUDA();
  check_invariance(1024, 4096, {1, 16, 17, 64, 65, 300, 2200}, DType::kF32, true, 11);
}

// The plans of a wide weight above 128 rows (forced here by a 6-SM plan on a 1000-column weight,
// whose last column tile is partial at every width): up to 192 rows the swapped 192 x 128 tile,
// then y's columns split between two instantiations (gemm_plan_tma_split(): 128 x 256 on columns
// 0-767, 128 x 192 on 768-999). Each gives the bits of one 128 x 256 launch over all columns and
// writes no row past m. compute-sanitizer runs it.
TEST(GemmInvariance, WidePlansAbove128RowsMatchOneLaunch) {
  VOSTI_SKIP_WITHOUT_CUDA();
  if (!cuda_test::device().has_wgmma) GTEST_SKIP() << "the CUTLASS family needs sm_90";
  const int64_t n = 1000, k = 576, rows = 300;
  GemmHarness g(n, k, rows, 91, GemmInstruction::kWgmmaTmaWarpSpecialized);
  DeviceBuffer<uint16_t> x(cuda_test::random_bf16(static_cast<size_t>(rows * k), 92));
  for (DType out : {DType::kBF16, DType::kF32}) {
    const size_t esize = dtype_size(out);
    DeviceBuffer<uint8_t> one(static_cast<size_t>(rows * n) * esize), plan(static_cast<size_t>(rows * n) * esize);
    for (int64_t m : {129, 150, 192, 193, 200, 256}) {
      const GemmLaunch l = plan_gemm_launch(g.schedule(), m, 6);
      if (m <= 192) {
        ASSERT_EQ(l.tma_tile, GemmTmaTile::kSwapM192N128Cooperative2x1) << m;
        ASSERT_EQ(l.tma_split_n, 0) << m;
      } else {
        ASSERT_EQ(l.tma_tile, GemmTmaTile::kM128N256Cooperative2x1) << m;
        ASSERT_EQ(l.tma_split_n, 768) << m;
        ASSERT_EQ(l.tma_tail_tile, GemmTmaTile::kM128N192Cooperative2x1) << m;
      }
      const GemmLaunch whole = make_gemm_tma_launch(g.schedule(), m, GemmTmaTile::kM128N256Cooperative2x1);
      for (bool bias : {false, true}) {
        one.poison();
        plan.poison();
        ASSERT_TRUE(g.run(x.get(), m, one.get(), out, bias, &whole).ok());
        const Status s = g.run(x.get(), m, plan.get(), out, bias, &l);
        ASSERT_TRUE(s.ok()) << s.to_string();
        const std::vector<uint8_t> a = one.download(0, static_cast<size_t>(rows * n) * esize);
        const std::vector<uint8_t> b = plan.download(0, static_cast<size_t>(rows * n) * esize);
        ASSERT_TRUE(cuda_test::same_bits(a.data(), b.data(), a.size()))
            << "m=" << m << " bias=" << bias << ": the plan differs from one 128 x 256 launch (or wrote past row m)";
      }
    }
  }
}

TEST(GemmInvariance, EveryMUpTo300F32Out) {
  VOSTI_SKIP_WITHOUT_CUDA();
  check_invariance(1024, 4096, range_m(1, 300), DType::kF32, true, 21);
}

TEST(GemmInvariance, EveryMUpTo300Bf16OutOddShape) {
  VOSTI_SKIP_WITHOUT_CUDA();
  check_invariance(960, 576, range_m(1, 300), DType::kBF16, false, 31);
}

// The CUTLASS family computing rows past m into the caller's spare rows (GemmArgs::row_capacity)
// leaves rows < m as computed alone, and writes nothing past the tile that holds row m - 1.
TEST(GemmInvariance, RowCapacityAddsOnlyScratchRows) {
  VOSTI_SKIP_WITHOUT_CUDA();
  if (!cuda_test::device().has_wgmma) GTEST_SKIP() << "the CUTLASS family needs sm_90";
  check_invariance_with(GemmInstruction::kWgmmaTmaWarpSpecialized, 1024, 4096, range_m(1, 300), DType::kF32, true, 23,
                        true);
  check_invariance_with(GemmInstruction::kWgmmaTmaWarpSpecialized, 960, 576, kSampledM, DType::kBF16, false, 25, true);
  const int64_t n = 960, k = 576, rows = 300;
  GemmHarness g(n, k, rows, 27, GemmInstruction::kWgmmaTmaWarpSpecialized);
  DeviceBuffer<uint16_t> x(static_cast<size_t>(rows * k));  // NaN past m
  x.upload(cuda_test::random_bf16(static_cast<size_t>(200 * k), 28));
  DeviceBuffer<float> alone(static_cast<size_t>(rows * n)), padded(static_cast<size_t>(rows * n));
  for (int64_t m : {1, 63, 64, 65, 129, 200}) {
    ASSERT_TRUE(g.run(x.get(), m, alone.get(), DType::kF32, true).ok());
    padded.poison();
    ASSERT_TRUE(g.run(x.get(), m, padded.get(), DType::kF32, true, nullptr, rows).ok());
    const std::vector<float> want = alone.download(0, static_cast<size_t>(m * n));
    const std::vector<float> got = padded.download();
    ASSERT_TRUE(cuda_test::same_bits(got.data(), want.data(), want.size() * sizeof(float))) << "m=" << m;
    const int64_t block_m = plan_gemm_launch(g.schedule(), m, 132).block_m;
    const int64_t end = std::min(rows, (m + block_m - 1) / block_m * block_m);
    for (size_t i = static_cast<size_t>(end * n); i < got.size(); ++i)
      ASSERT_TRUE(std::isnan(got[i])) << "m=" << m << ": row " << i / n << " past the last tile written";
  }
  GemmArgs a;
  a.x = x.get();
  a.w = x.get();
  a.y = padded.get();
  a.out_dtype = DType::kF32;
  a.m = 10;
  a.row_capacity = 9;
  EXPECT_EQ(gemm_bf16(g.schedule(), a, GemmWorkspace{nullptr, 0}, nullptr, cuda_test::device().gemm()).code(),
            StatusCode::kInvalidArgument);
}

TEST(GemmInvariance, SampledMUpTo8192) {
  VOSTI_SKIP_WITHOUT_CUDA();
  check_invariance(1024, 4096, kSampledM, DType::kF32, true, 41);
}

TEST(GemmInvariance, LlamaOProjectionSampledM) {
  VOSTI_SKIP_WITHOUT_CUDA();
  std::vector<int64_t> ms = {1, 2, 7, 8, 9, 31, 32, 63, 64, 100, 128, 129, 255, 256, 257, 1024, 4096, 8192};
  check_invariance(4096, 4096, ms, DType::kBF16, false, 51);
}

TEST(GemmInvariance, LlamaDownProjectionSampledM) {
  VOSTI_SKIP_WITHOUT_CUDA();
  check_invariance(4096, 14336, {1, 8, 33, 64, 200, 256, 1024, 4096}, DType::kBF16, false, 61);
}

TEST(GemmInvariance, WorkspaceReusedAcrossPlans) {  // m values whose plans differ in tiles and groups
  VOSTI_SKIP_WITHOUT_CUDA();
  check_invariance(4096, 4096, {1, 257, 3, 129, 8, 255, 1, 384, 2}, DType::kF32, true, 71);
}

void check_every_plan(GemmInstruction instruction);
void check_every_tma_tile(int64_t n, int64_t k, DType out, bool bias, uint64_t seed);

// Every launch plan (every m-tile height x every group count dividing S; for the CUTLASS
// family every instantiation) gives the default plan's bits for the whole output.
TEST(GemmInvariance, EveryLaunchPlanComputesTheSameBits) {
  VOSTI_SKIP_WITHOUT_CUDA();
  for (GemmInstruction instruction : device_instructions()) {
    SCOPED_TRACE(instruction_name(instruction));
    if (instruction == GemmInstruction::kWgmmaTmaWarpSpecialized) {
      check_every_tma_tile(1024, 4096, DType::kF32, true, 81);
    } else {
      check_every_plan(instruction);
    }
    if (HasFatalFailure()) return;
  }
}

// The CUTLASS family's instantiations (tile, cluster, kernel schedule; bf16 and f32 output)
// against each other, bit for bit on the whole output, at m values on and off every tile
// height, on shapes whose n is not a multiple of the widest tiles (1024: nor of 48) and one
// whose last column tile is partial at every width (1000).
TEST(GemmInvariance, EveryCutlassInstantiationComputesTheSameBits) {
  VOSTI_SKIP_WITHOUT_CUDA();
  if (!cuda_test::device().has_wgmma) GTEST_SKIP() << "the CUTLASS family needs sm_90";
  check_every_tma_tile(1024, 4096, DType::kBF16, false, 83);
  check_every_tma_tile(960, 576, DType::kF32, true, 85);
  check_every_tma_tile(4096, 14336, DType::kBF16, true, 87);
  check_every_tma_tile(1000, 576, DType::kBF16, true, 89);
}

void check_every_tma_tile(int64_t n, int64_t k, DType out, bool bias, uint64_t seed) {
  SCOPED_TRACE("n=" + std::to_string(n) + " k=" + std::to_string(k) + (out == DType::kF32 ? " f32" : " bf16"));
  const std::vector<GemmTmaTile> tiles(std::begin(kAllGemmTmaTiles), std::end(kAllGemmTmaTiles));
  const int64_t max_m = 300;
  GemmHarness g(n, k, max_m, seed, GemmInstruction::kWgmmaTmaWarpSpecialized);
  DeviceBuffer<uint16_t> x(cuda_test::random_bf16(static_cast<size_t>(max_m * k), seed + 1));
  const size_t esize = dtype_size(out);
  DeviceBuffer<uint8_t> want(static_cast<size_t>(max_m * n) * esize), got(static_cast<size_t>(max_m * n) * esize);
  std::vector<uint8_t> previous;  // the previous m's output: its rows are the first rows of this m's
  int m_index = 0;
  for (int64_t m : {1, 5, 31, 64, 65, 100, 129, 255, 256, 300}) {
    const size_t bytes = static_cast<size_t>(m * n) * esize;
    std::vector<uint8_t> first;
    GemmTmaTile first_tile = tiles[0];
    ++m_index;
    for (size_t t = 0; t < tiles.size(); ++t) {
      const GemmTmaTile tile = tiles[t];
      // Every instantiation runs with and without the weight's L2 hint (at alternate m).
      GemmLaunch l = make_gemm_tma_launch(g.schedule(), m, tile);
      l.tma_stream_weights = (m_index + t) % 2 == 0;
      got.poison();
      const Status s = g.run(x.get(), m, got.get(), out, bias, &l);
      ASSERT_TRUE(s.ok()) << s.to_string();
      const std::vector<uint8_t> y = got.download(0, bytes);
      if (first.empty()) {
        first = y;
        first_tile = tile;
        continue;
      }
      ASSERT_TRUE(cuda_test::same_bits(y.data(), first.data(), bytes))
          << "m=" << m << ": " << gemm_tma_tile_name(tile) << (l.tma_stream_weights ? " (weights evict-first)" : "")
          << " differs from " << gemm_tma_tile_name(first_tile);
    }
    // Rows do not depend on m: the previous m's rows are this m's first rows, bit for bit.
    if (!previous.empty()) {
      ASSERT_TRUE(cuda_test::same_bits(first.data(), previous.data(), previous.size()))
          << "m=" << m << ": the first rows differ from those computed with fewer rows";
    }
    previous = first;
    // Split launches: each instantiation on the columns before a split, the next one in the list on
    // the rest (every tile is a head once and a tail once).
    for (size_t i = 0; i < tiles.size(); ++i) {
      const GemmTmaTile head = tiles[i];
      const GemmTmaTile tail = tiles[(i + 1) % tiles.size()];
      const int64_t head_n = gemm_tma_tile_shape(head).n;
      const int64_t split_n = std::max<int64_t>(n / 2 / head_n, 1) * head_n;
      if (split_n >= n) continue;
      const GemmLaunch l = make_gemm_tma_split_launch(g.schedule(), m, head, split_n, tail);
      got.poison();
      const Status s = g.run(x.get(), m, got.get(), out, bias, &l);
      ASSERT_TRUE(s.ok()) << s.to_string();
      const std::vector<uint8_t> y = got.download(0, bytes);
      ASSERT_TRUE(cuda_test::same_bits(y.data(), first.data(), bytes))
          << "m=" << m << ": " << gemm_tma_tile_name(head) << " on columns [0, " << split_n << ") and "
          << gemm_tma_tile_name(tail) << " after differ from " << gemm_tma_tile_name(first_tile);
    }
    // The default plan is one of them.
    want.poison();
    ASSERT_TRUE(g.run(x.get(), m, want.get(), out, bias).ok());
    const std::vector<uint8_t> y = want.download(0, bytes);
    ASSERT_TRUE(cuda_test::same_bits(y.data(), first.data(), bytes)) << "m=" << m << ": default plan differs";
  }
}

void check_every_plan(GemmInstruction instruction) {
  const int64_t n = 1024, k = 4096, max_m = 300;
  GemmHarness g(n, k, max_m, 81, instruction);
  const int sms = cuda_test::device().num_sms;
  DeviceBuffer<uint16_t> x(cuda_test::random_bf16(static_cast<size_t>(max_m * k), 82));
  DeviceBuffer<float> want(static_cast<size_t>(max_m * n)), got(static_cast<size_t>(max_m * n));
  for (int64_t m : {1, 5, 16, 17, 40, 64, 100, 255, 300}) {
    ASSERT_TRUE(g.run(x.get(), m, want.get(), DType::kF32, true).ok());
    const std::vector<float> expected = want.download(0, static_cast<size_t>(m * n));
    for (int block_m : {16, 64, 128}) {
      for (int groups = 1; groups <= g.schedule().num_segments; ++groups) {
        if (g.schedule().num_segments % groups != 0) continue;
        const GemmLaunch l = make_gemm_launch(g.schedule(), m, block_m, groups, sms);
        got.poison();
        const Status s = g.run(x.get(), m, got.get(), DType::kF32, true, &l);
        ASSERT_TRUE(s.ok()) << s.to_string();
        const std::vector<float> out = got.download(0, static_cast<size_t>(m * n));
        ASSERT_TRUE(cuda_test::same_bits(out.data(), expected.data(), out.size() * sizeof(float)))
            << "m=" << m << " block_m=" << block_m << " groups=" << groups;
      }
    }
  }
}

TEST(GemmErrors, BadArgumentsAreReported) {
  VOSTI_SKIP_WITHOUT_CUDA();
  GemmHarness g(256, 1024, 64, 5);
  DeviceBuffer<uint16_t> x(64 * 1024);
  DeviceBuffer<float> y(64 * 256);
  EXPECT_EQ(g.run(nullptr, 4, y.get(), DType::kF32, false).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(g.run(x.get(), 0, y.get(), DType::kF32, false).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(g.run(x.get(), 4, y.get(), DType::kF16, false).code(), StatusCode::kInvalidArgument);
  GemmArgs a;
  a.x = x.get();
  a.w = x.get();
  a.y = y.get();
  a.out_dtype = DType::kF32;
  a.m = 4;
  const GemmDevice dev = cuda_test::device().gemm();
  const Status s = gemm_bf16(g.schedule(), a, GemmWorkspace{nullptr, 0}, nullptr, dev);  // this plan splits
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("workspace"), std::string::npos);
  const GemmLaunch wrong_m = make_gemm_launch(g.schedule(), 200, 16, 1, 132);
  EXPECT_EQ(gemm_bf16_with_launch(g.schedule(), a, wrong_m, GemmWorkspace{nullptr, 0}, nullptr, dev).code(),
            StatusCode::kInvalidArgument);
  // A column split of the CUTLASS family off the head tile's columns, or outside the weight.
  const GemmSchedule tma = select_schedule(256, 1024, GemmInstruction::kWgmmaTmaWarpSpecialized).value();
  for (int64_t split_n : {int64_t{96}, int64_t{256}, int64_t{-128}}) {
    const GemmLaunch bad = make_gemm_tma_split_launch(tma, 4, GemmTmaTile::kM128N128Cooperative2x1, split_n,
                                                      GemmTmaTile::kM128N192Cooperative2x1);
    const Status split = gemm_bf16_with_launch(tma, a, bad, GemmWorkspace{nullptr, 0}, nullptr, dev);
    EXPECT_EQ(split.code(), StatusCode::kInvalidArgument) << split_n;
    EXPECT_NE(split.message().find("column split"), std::string::npos) << split.message();
  }
  // A launch naming no instantiation (as head, or as the tail of a split).
  GemmLaunch unknown = make_gemm_tma_launch(tma, 4, GemmTmaTile::kM128N128Cooperative2x1);
  unknown.tma_tile = static_cast<GemmTmaTile>(200);
  EXPECT_EQ(gemm_bf16_with_launch(tma, a, unknown, GemmWorkspace{nullptr, 0}, nullptr, dev).code(),
            StatusCode::kInvalidArgument);
  unknown =
      make_gemm_tma_split_launch(tma, 4, GemmTmaTile::kM128N128Cooperative2x1, 128, static_cast<GemmTmaTile>(200));
  const Status tail = gemm_bf16_with_launch(tma, a, unknown, GemmWorkspace{nullptr, 0}, nullptr, dev);
  EXPECT_EQ(tail.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(tail.message().find("unknown GemmTmaTile"), std::string::npos) << tail.message();
  // A CUTLASS schedule of two k segments: the family evaluates one.
  GemmSchedule two = tma;
  two.num_segments = 2;
  const GemmLaunch one = make_gemm_tma_launch(two, 4, GemmTmaTile::kM128N128Cooperative2x1);
  const Status segments = gemm_bf16_with_launch(two, a, one, GemmWorkspace{nullptr, 0}, nullptr, dev);
  EXPECT_EQ(segments.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(segments.message().find("one k segment"), std::string::npos) << segments.message();
}

}  // namespace
}  // namespace vosti
