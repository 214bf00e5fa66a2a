// Tests of the tensor-core attention's launch plan (kernels/cuda/attention/attention_plan.h) on the CPU:
// every query row is covered once per split it reads, items never mix tiles (of their last
// positions, nor under a sliding window of their first) or sequences, splits are cut at
// multiples of the deployment's split whatever the step, decodes run a CTA per split while
// partial slots last and fold otherwise (in the per-split kernel where enough of them fill its
// CTAs), and bad input is named.
#include "kernels/cuda/attention/attention_plan.h"

#include <gtest/gtest.h>

#include "kernels/kernel_backend.h"

#include <algorithm>
#include <map>
#include <random>
#include <tuple>
#include <utility>
#include <vector>

namespace vosti {
namespace {

struct Rows {
  std::vector<int32_t> positions, seq;
  void add(int32_t s, int32_t first, int32_t count) {
    for (int32_t i = 0; i < count; ++i) positions.push_back(first + i), seq.push_back(s);
  }
};

// For every row: the splits that compute it (in order) and how they end (output or partial).
struct Coverage {
  std::map<int32_t, std::vector<int32_t>> splits_of_row;
  std::map<int32_t, int32_t> merged_rows;  // row -> number of splits the merge folds
};

Coverage check_plan(const Rows& rows, const AttentionShape& shape, const AttentionPlan& plan, int32_t capacity) {
  Coverage cov;
  const int max_positions = kAttnRowsPerCta / shape.group();
  std::vector<bool> slot_used(static_cast<size_t>(capacity), false);
  const auto visit = [&](const AttentionWork& w, bool folded) {
    EXPECT_GE(w.num_positions, 1);
    EXPECT_LE(w.num_positions, max_positions);
    const int32_t last = w.first_position + w.num_positions - 1;
    EXPECT_EQ(w.first_position / kAttnKvTile, last / kAttnKvTile) << "an item spans two KV tiles";
    const int32_t first_tile = attention_window_first(w.first_position, shape.window) / kAttnKvTile;
    EXPECT_EQ(first_tile, attention_window_first(last, shape.window) / kAttnKvTile)
        << "an item's rows start in two KV tiles";
    EXPECT_EQ(w.split_end, folded ? attention_num_splits(last, shape.split) : w.split_end);
    if (folded) {
      EXPECT_EQ(w.split_begin, first_tile * kAttnKvTile / shape.split);
    }
    for (int32_t i = 0; i < w.num_positions; ++i) {
      const int32_t r = w.first_row + i;
      EXPECT_EQ(rows.positions[static_cast<size_t>(r)], w.first_position + i);
      EXPECT_EQ(rows.seq[static_cast<size_t>(r)], w.seq);
      for (int32_t s = w.split_begin; s < w.split_end; ++s) cov.splits_of_row[r].push_back(s);
    }
    if (w.partial >= 0) {
      EXPECT_FALSE(folded);
      EXPECT_EQ(w.num_positions, 1);
      EXPECT_EQ(w.split_end, w.split_begin + 1);
      EXPECT_LT(w.partial, capacity);
      if (w.partial >= capacity) return;
      EXPECT_FALSE(slot_used[static_cast<size_t>(w.partial)]) << "partial slot used twice";
      slot_used[static_cast<size_t>(w.partial)] = true;
    }
  };
  for (const AttentionWork& w : plan.folded) visit(w, true);
  for (const AttentionWork& w : plan.per_split) visit(w, false);
  for (const AttentionMerge& m : plan.merges) {
    cov.merged_rows[m.row] = m.num_splits;
    for (int32_t s = 0; s < m.num_splits; ++s)
      EXPECT_TRUE(slot_used[static_cast<size_t>(m.first_partial + s)]) << "merge of an unwritten slot";
  }
  EXPECT_LE(plan.num_partials, capacity);
  for (size_t r = 0; r < rows.positions.size(); ++r) {
    if (rows.positions[r] < 0) {
      EXPECT_EQ(cov.splits_of_row.count(static_cast<int32_t>(r)), 0u) << "padding row " << r << " got work";
      continue;
    }
    std::vector<int32_t> splits = cov.splits_of_row[static_cast<int32_t>(r)];
    std::sort(splits.begin(), splits.end());
    const int32_t s0 = attention_window_first(rows.positions[r], shape.window) / shape.split;
    const int32_t n = attention_num_splits(rows.positions[r], shape.split) - s0;
    EXPECT_EQ(static_cast<int32_t>(splits.size()), n) << "row " << r;
    if (static_cast<int32_t>(splits.size()) != n) continue;
    for (int32_t s = 0; s < n; ++s) EXPECT_EQ(splits[static_cast<size_t>(s)], s0 + s) << "row " << r;
  }
  return cov;
}

TEST(AttentionPlan, CoversEveryRowOnceInItsOwnSplits) {
  std::mt19937 rng(3);
  for (int group : {1, 3, 4, 7, 8, 16}) {
    for (int split : {64, 128, 512, 2048}) {
      for (int window : {0, 100, 333, 4096}) {
        AttentionShape shape{group * 2, 2, 128, split, kAttnRowsPerCta, window};
        Rows rows;
        int32_t s = 0;
        for (int i = 0; i < 40; ++i) {
          const int32_t context = static_cast<int32_t>(rng() % 5000);
          const int32_t count = rng() % 3 == 0 ? 1 : 1 + static_cast<int32_t>(rng() % 300);
          rows.add(s++, context, count);
          if (rng() % 5 == 0) rows.positions.push_back(-1), rows.seq.push_back(0);  // padding
        }
        for (const auto& [capacity, fold_ctas] :
             {std::pair{0, 0}, std::pair{7, 0}, std::pair{100000, 0}, std::pair{100000, 1}, std::pair{7, 33}}) {
          shape.decode_fold_ctas = fold_ctas;
          AttentionPlan plan;
          ASSERT_TRUE(plan_attention(rows.positions, rows.seq, shape, capacity, &plan).ok());
          EXPECT_EQ(plan.decode_folds, attention_decode_rows_fold(rows.positions, rows.seq, shape));
          if (plan.decode_folds) {
            EXPECT_TRUE(plan.merges.empty());
          }
          EXPECT_EQ(plan.split, split);
          const Coverage cov = check_plan(rows, shape, plan, capacity);
          if (capacity == 0) {
            EXPECT_TRUE(plan.merges.empty());
          }
          for (const auto& [row, n] : cov.merged_rows)
            EXPECT_EQ(n, attention_num_splits(rows.positions[row], split) -
                             attention_window_first(rows.positions[row], window) / split);
        }
      }
    }
  }
}

// The split cuts of a row depend on its position alone: the same row planned alone and in any
// company gets the same splits, tile and path-independent folding order.
TEST(AttentionPlan, AQueryGetsTheSameSplitsInAnyCompany) {
  const AttentionShape shape{32, 8, 128, 512};
  Rows alone;
  alone.add(0, 1700, 1);
  AttentionPlan a;
  ASSERT_TRUE(plan_attention(alone.positions, alone.seq, shape, 1000, &a).ok());
  ASSERT_EQ(a.merges.size(), 1u);
  EXPECT_EQ(a.merges[0].num_splits, 4);
  Rows crowd;
  crowd.add(0, 90, 200);  // a prefill chunk
  crowd.add(1, 1700, 1);  // the same decode query
  crowd.add(2, 3, 1);
  AttentionPlan b;
  ASSERT_TRUE(plan_attention(crowd.positions, crowd.seq, shape, 1000, &b).ok());
  bool found = false;
  for (const AttentionMerge& m : b.merges) {
    if (m.row == 200) {
      found = true;
      EXPECT_EQ(m.num_splits, 4);
    }
  }
  EXPECT_TRUE(found);
}

TEST(AttentionPlan, DecodesRunASplitPerCtaUntilTheSlotsRunOut) {
  const AttentionShape shape{32, 8, 128, 512};
  Rows rows;
  for (int s = 0; s < 10; ++s) rows.add(s, 2000, 1);  // 4 splits each
  AttentionPlan plan;
  ASSERT_TRUE(plan_attention(rows.positions, rows.seq, shape, 22, &plan).ok());
  EXPECT_EQ(plan.merges.size(), 5u);  // 5 x 4 slots fit in 22
  EXPECT_EQ(plan.per_split.size(), 20u);
  EXPECT_EQ(plan.folded.size(), 5u);
  EXPECT_EQ(plan.num_partials, 20);
  Rows short_rows;
  short_rows.add(0, 100, 1);  // one split: its own CTA writes the output
  ASSERT_TRUE(plan_attention(short_rows.positions, short_rows.seq, shape, 0, &plan).ok());
  ASSERT_EQ(plan.per_split.size(), 1u);
  EXPECT_EQ(plan.per_split[0].partial, -1);
  EXPECT_TRUE(plan.merges.empty());
}

// Decode rows stay whole items of the per-split kernel (which folds their splits) where the
// longest of them times the launch's CTAs is at most all of their tiles; otherwise they are cut
// per split for the merge kernel.
TEST(AttentionPlan, DecodesFoldInThePerSplitKernelWhenTheyFillItsCtas) {
  AttentionShape shape{32, 8, 128, 1024};
  shape.decode_fold_ctas = 33;
  Rows batch;
  for (int s = 0; s < 64; ++s) batch.add(s, 2047, 1);  // 2 splits, 32 tiles each: 64 x 32 >= 32 x 33
  AttentionPlan plan;
  ASSERT_TRUE(plan_attention(batch.positions, batch.seq, shape, 1000, &plan).ok());
  EXPECT_TRUE(plan.decode_folds);
  ASSERT_EQ(plan.per_split.size(), 64u);
  for (const AttentionWork& w : plan.per_split) {
    EXPECT_EQ(w.partial, -1);
    EXPECT_EQ(w.split_begin, 0);
    EXPECT_EQ(w.split_end, 2);
  }
  EXPECT_TRUE(plan.merges.empty());
  EXPECT_TRUE(plan.folded.empty());
  EXPECT_EQ(plan.num_partials, 0);
  Rows few;  // 32 rows: 32 x 32 < 32 x 33
  for (int s = 0; s < 32; ++s) few.add(s, 2047, 1);
  ASSERT_TRUE(plan_attention(few.positions, few.seq, shape, 1000, &plan).ok());
  EXPECT_FALSE(plan.decode_folds);
  EXPECT_EQ(plan.merges.size(), 32u);
  Rows long_one = batch;  // one row of 512 tiles beside them: it alone would outlast the rest
  long_one.add(64, 32767, 1);
  ASSERT_TRUE(plan_attention(long_one.positions, long_one.seq, shape, 1000, &plan).ok());
  EXPECT_FALSE(plan.decode_folds);
  EXPECT_EQ(plan.merges.size(), 65u);
  Rows one_split;  // no decode has two splits: nothing to fold
  for (int s = 0; s < 64; ++s) one_split.add(s, 1000, 1);
  ASSERT_TRUE(plan_attention(one_split.positions, one_split.seq, shape, 1000, &plan).ok());
  EXPECT_FALSE(plan.decode_folds);
  shape.decode_fold_ctas = 0;  // the per-split kernel cannot fold
  ASSERT_TRUE(plan_attention(batch.positions, batch.seq, shape, 1000, &plan).ok());
  EXPECT_FALSE(plan.decode_folds);
  EXPECT_EQ(plan.merges.size(), 64u);
  shape.decode_fold_ctas = -1;
  EXPECT_FALSE(plan_attention(batch.positions, batch.seq, shape, 1000, &plan).ok());
}

TEST(AttentionPlan, DecodeKernelFitsItsDeployments) {
  EXPECT_TRUE(attention_decode_fits(128, 4, 16));
  EXPECT_TRUE(attention_decode_fits(256, 16, 16));
  EXPECT_FALSE(attention_decode_fits(256, 4, 8));    // a loader thread's 16 rows span two pages
  EXPECT_FALSE(attention_decode_fits(128, 32, 16));  // two m16 blocks
  EXPECT_FALSE(attention_decode_fits(32, 4, 16));    // head_dim below 64
  EXPECT_FALSE(attention_decode_fits(128, 4, 24));   // not a power of two
  EXPECT_FALSE(attention_decode_fits(128, 4, 128));  // past a tile
}

TEST(AttentionPlan, ChunksAreCutAtTilesAndPackedByGroup) {
  const AttentionShape shape{12, 4, 64, 512};  // group 3: at most 21 positions per CTA
  Rows rows;
  rows.add(0, 60, 70);  // positions 60..129: tiles 0 (4 positions), 1 (64), 2 (2)
  AttentionPlan plan;
  ASSERT_TRUE(plan_attention(rows.positions, rows.seq, shape, 100, &plan).ok());
  std::vector<std::pair<int32_t, int32_t>> items;
  for (const AttentionWork& w : plan.folded) items.push_back({w.first_position, w.num_positions});
  // The longest first (the item at 128 reads tiles 0-2, those at 64-127 tiles 0-1, 60's tile 0).
  const std::vector<std::pair<int32_t, int32_t>> expect = {{128, 2}, {64, 16}, {80, 16}, {96, 16}, {112, 16}, {60, 4}};
  EXPECT_EQ(items, expect);
}

// Rows of one sequence with a gap between them are planned as two runs (the second a decode).
TEST(AttentionPlan, AGapStartsANewRun) {
  Rows rows;
  rows.add(0, 5, 2);
  rows.add(0, 900, 1);
  AttentionPlan plan;
  ASSERT_TRUE(plan_attention(rows.positions, rows.seq, AttentionShape{8, 2, 64, 512}, 10, &plan).ok());
  ASSERT_EQ(plan.folded.size(), 1u);
  EXPECT_EQ(plan.folded[0].num_positions, 2);
  ASSERT_EQ(plan.merges.size(), 1u);
  EXPECT_EQ(plan.merges[0].row, 2);
  check_plan(rows, AttentionShape{8, 2, 64, 512}, plan, 10);
}

TEST(AttentionPlan, BadInputIsNamed) {
  AttentionPlan plan;
  Rows rows;
  rows.add(0, 5, 3);
  Status s = plan_attention(rows.positions, rows.seq, AttentionShape{8, 3, 64, 512}, 10, &plan);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  s = plan_attention(rows.positions, rows.seq, AttentionShape{8, 2, 80, 512}, 10, &plan);
  EXPECT_EQ(s.code(), StatusCode::kUnimplemented);
  EXPECT_NE(s.message().find("head_dim 80"), std::string::npos) << s.to_string();
  s = plan_attention(rows.positions, rows.seq, AttentionShape{8, 2, 64, 100}, 10, &plan);
  EXPECT_NE(s.message().find("split 100"), std::string::npos) << s.to_string();
  s = plan_attention(rows.positions, rows.seq, AttentionShape{128, 1, 64, 512}, 10, &plan);
  EXPECT_EQ(s.code(), StatusCode::kUnimplemented);
  const std::vector<int32_t> one = {1};
  EXPECT_EQ(plan_attention(one, {}, AttentionShape{8, 2, 64, 512}, 10, &plan).code(), StatusCode::kInvalidArgument);
}

// 128 rows a folding CTA only where the two-block kernel's loader fits the block size and either
// the wgmma kernel runs (sm_90, head_dim 64 or 128) or the step fills 4 CTAs an SM; otherwise 64.
// Either is a place only.
TEST(AttentionPlan, FoldedRowsFollowTheStepAndTheDeployment) {
  const AttentionShape llama{32, 8, 128, 512};
  EXPECT_EQ(attention_folded_rows(llama, 16, 8192, 132, false), 2 * kAttnRowsPerCta);
  EXPECT_EQ(attention_folded_rows(llama, 16, 2112, 132, false), 2 * kAttnRowsPerCta);  // 528 CTAs
  EXPECT_EQ(attention_folded_rows(llama, 16, 2111, 132, false), kAttnRowsPerCta);
  EXPECT_EQ(attention_folded_rows(llama, 16, 1, 132, false), kAttnRowsPerCta);
  EXPECT_EQ(attention_folded_rows(llama, 4, 8192, 132, false), kAttnRowsPerCta);    // a loader row spans pages
  EXPECT_EQ(attention_folded_rows(llama, 12, 8192, 132, false), kAttnRowsPerCta);   // not a power of two
  EXPECT_EQ(attention_folded_rows(llama, 128, 8192, 132, false), kAttnRowsPerCta);  // past a tile
  EXPECT_EQ(attention_folded_rows(AttentionShape{8, 2, 256, 512}, 16, 1 << 20, 132, false), kAttnRowsPerCta);
  EXPECT_EQ(attention_folded_rows(AttentionShape{9, 3, 64, 512}, 4, 1 << 20, 132, false), 2 * kAttnRowsPerCta);
  // With wgmma: 128 rows at any step size for head_dim 64 and 128, where the loader fits.
  EXPECT_EQ(attention_folded_rows(llama, 16, 1, 132, true), 2 * kAttnRowsPerCta);
  EXPECT_EQ(attention_folded_rows(AttentionShape{9, 3, 64, 512}, 4, 1, 132, true), 2 * kAttnRowsPerCta);
  EXPECT_EQ(attention_folded_rows(llama, 4, 8192, 132, true), kAttnRowsPerCta);
  EXPECT_EQ(attention_folded_rows(AttentionShape{8, 4, 32, 512}, 16, 1, 132, true), kAttnRowsPerCta);
  EXPECT_EQ(attention_folded_rows(AttentionShape{8, 4, 32, 512}, 16, 1 << 20, 132, true), 2 * kAttnRowsPerCta);
  EXPECT_TRUE(attention_two_blocks_fit(64, 4));
  EXPECT_FALSE(attention_two_blocks_fit(64, 2));
  EXPECT_FALSE(attention_two_blocks_fit(256, 64));
  const AttentionShape wide{32, 8, 128, 512, attention_folded_rows(llama, 16, 8192, 132, false)};
  EXPECT_TRUE(check_attention_shape(wide).ok());
}

}  // namespace
}  // namespace vosti
