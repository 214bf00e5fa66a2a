// StepBatch (runner/step_batch.h): the one pass from a StepPlan and its logits tasks to what both
// runners read: row order, slots, the block-table matrix, the wanted and logits orders, and the
// device sampler's tasks with their host fallbacks.
#include "runner/step_batch.h"

#include <gtest/gtest.h>

#include <vector>

namespace vosti {
namespace {

ScheduledRequest request(int32_t computed, std::vector<int32_t> tokens, std::vector<BlockId> table, bool completes) {
  ScheduledRequest r;
  r.num_computed_tokens = computed;
  r.num_new_tokens = static_cast<int32_t>(tokens.size());
  r.token_ids = std::move(tokens);
  r.block_table = std::move(table);
  r.completes_known_tokens = completes;
  return r;
}

struct Fixture {
  StepPlan plan;
  std::vector<int32_t> prompt0 = {5, 6, 7, 8, 9, 10};  // request 0: a scored prompt chunk
  std::vector<int32_t> outputs1 = {3, 3, 4};           // request 1: a decode with outputs so far
  SamplingParams greedy, penalised;
  std::vector<RequestLogitsTask> tasks;

  Fixture() {
    // Block size 4: request 0 computes positions 2..5 (blocks 7, 2), request 1 position 9 (block 11
    // of table {4, 9, 11}), request 2 positions 0..1 of its prompt (block 3), not sampled.
    plan.requests.push_back(request(2, {7, 8, 9, 10}, {7, 2}, true));
    plan.requests.push_back(request(9, {4}, {4, 9, 11}, true));
    plan.requests.push_back(request(0, {1, 2}, {3}, false));
    plan.num_batched_tokens = 7;
    penalised.repetition_penalty = 1.2f;
    penalised.logit_bias = {{4, 1.5f}};
    tasks.resize(3);
    tasks[0].sampling = &greedy;
    tasks[0].prompt = prompt0;
    tasks[0].score_prompt = true;
    tasks[0].sample = true;
    tasks[1].sampling = &penalised;
    tasks[1].seed = 99;
    tasks[1].prompt = prompt0;
    tasks[1].outputs = outputs1;
    tasks[1].sample = true;
    tasks[2].sampling = &greedy;
  }
};

TEST(StepBatch, RowsSlotsAndTablesFollowThePlan) {
  Fixture f;
  StepBatch b;
  build_step_batch(f.plan, f.tasks, 4, StepBatchOptions{}, b);
  ASSERT_EQ(b.num_tokens(), 7);
  EXPECT_EQ(b.token_ids, (std::vector<int32_t>{7, 8, 9, 10, 4, 1, 2}));
  EXPECT_EQ(b.positions, (std::vector<int32_t>{2, 3, 4, 5, 9, 0, 1}));
  EXPECT_EQ(b.row_seq, (std::vector<int32_t>{0, 0, 0, 0, 1, 2, 2}));
  // slot = table[p / 4] * 4 + p % 4
  EXPECT_EQ(b.slots, (std::vector<int32_t>{7 * 4 + 2, 7 * 4 + 3, 2 * 4 + 0, 2 * 4 + 1, 11 * 4 + 1, 3 * 4, 3 * 4 + 1}));
  EXPECT_EQ(b.num_seqs, 3);
  EXPECT_EQ(b.block_table_stride, 3);
  EXPECT_EQ(b.block_tables, (std::vector<int32_t>{7, 2, 0, 4, 9, 11, 3, 0, 0}));
  EXPECT_EQ(b.table_of_row(4)[2], 11);
  EXPECT_FALSE(b.decode_only);
}

TEST(StepBatch, WantedAndLogitsOrders) {
  Fixture f;
  StepBatch b;
  build_step_batch(f.plan, f.tasks, 4, StepBatchOptions{}, b);
  // Wanted: request 0 scores positions 2, 3, 4 (prompt[p + 1] exists up to p = 4), then samples
  // at 5; request 1 samples at 9; request 2 nothing.
  ASSERT_EQ(b.wanted.size(), 5u);
  const std::vector<int32_t> positions = {2, 3, 4, 5, 9};
  for (size_t i = 0; i < positions.size(); ++i) EXPECT_EQ(b.wanted[i].position, positions[i]) << i;
  EXPECT_EQ(b.wanted[0].kind, RowKind::kScore);
  EXPECT_EQ(b.wanted[0].target_token, 8);  // prompt0[3]
  EXPECT_EQ(b.wanted[3].kind, RowKind::kSample);
  EXPECT_EQ(b.wanted[4].plan_index, 1);
  EXPECT_EQ(b.wanted[4].token_row, 4);
  EXPECT_EQ(b.num_score_rows, 3);
  // Logits order: the score rows, then the sampled rows, each in wanted order.
  EXPECT_EQ(b.logit_order, (std::vector<int32_t>{0, 1, 2, 3, 4}));
  EXPECT_EQ(b.logit_token_rows(), (std::vector<int32_t>{0, 1, 2, 3, 4}));
  // Sampled row first in wanted order, then a score row of a later request: scores come first.
  std::swap(f.plan.requests[0], f.plan.requests[1]);
  std::swap(f.tasks[0], f.tasks[1]);
  build_step_batch(f.plan, f.tasks, 4, StepBatchOptions{}, b);
  EXPECT_EQ(b.wanted[0].kind, RowKind::kSample);
  EXPECT_EQ(b.logit_order, (std::vector<int32_t>{1, 2, 3, 0, 4}));
  EXPECT_EQ(b.logit_token_rows(), (std::vector<int32_t>{1, 2, 3, 0, 4}));
}

TEST(StepBatch, SamplerTasksAndHostFallbacks) {
  Fixture f;
  StepBatch b;
  build_step_batch(f.plan, f.tasks, 4, StepBatchOptions{true, 0}, b);
  ASSERT_EQ(b.tasks.size(), 5u);
  EXPECT_EQ(b.tasks[0].kind, kSamplerRowScore);
  EXPECT_EQ(b.tasks[0].target_token, 8);
  EXPECT_EQ(b.tasks[4].kind, kSamplerRowSample);
  EXPECT_EQ(b.tasks[4].seed, 99u);
  EXPECT_EQ(b.tasks[4].output_position, 3u);  // outputs so far
  // Request 1's adjustments: the bias on 4, repetition on prompt + outputs' distinct tokens.
  EXPECT_EQ(b.tasks[4].adjust_begin, 0);
  EXPECT_EQ(b.tasks[4].adjust_count, 8);  // {3, 4, 5, 6, 7, 8, 9, 10}
  ASSERT_EQ(b.adjusts.size(), 8u);
  EXPECT_EQ(b.adjusts[1].token, 4);
  EXPECT_EQ(b.adjusts[1].flags, kAdjustBias | kAdjustRepeated);
  EXPECT_EQ(b.host_sampled, (std::vector<uint8_t>{0, 0, 0, 0, 0}));
  // A buffer of 4 entries: the row goes to the host sampler, with no adjustments on the device.
  build_step_batch(f.plan, f.tasks, 4, StepBatchOptions{true, 4}, b);
  EXPECT_EQ(b.host_sampled, (std::vector<uint8_t>{0, 0, 0, 0, 1}));
  EXPECT_TRUE(b.adjusts.empty());
  // Without sampler tasks (the CPU runner) nothing is built.
  build_step_batch(f.plan, f.tasks, 4, StepBatchOptions{}, b);
  EXPECT_TRUE(b.tasks.empty() && b.adjusts.empty() && b.host_sampled.empty());
}

TEST(StepBatch, DecodeStepsAndReuse) {
  Fixture f;
  StepPlan plan;
  plan.requests.push_back(request(9, {4}, {4, 9, 11}, true));
  plan.requests.push_back(request(0, {1}, {3}, true));
  plan.num_batched_tokens = 2;
  std::vector<RequestLogitsTask> tasks = {f.tasks[1], f.tasks[1]};
  StepBatch b;
  build_step_batch(f.plan, f.tasks, 4, StepBatchOptions{}, b);  // a larger step first: storage reused
  build_step_batch(plan, tasks, 4, StepBatchOptions{}, b);
  EXPECT_TRUE(b.decode_only);
  EXPECT_EQ(b.num_tokens(), 2);
  EXPECT_EQ(b.block_tables, (std::vector<int32_t>{4, 9, 11, 3, 0, 0}));
  EXPECT_EQ(b.wanted.size(), 2u);
  const std::vector<int32_t> rows = b.logit_token_rows();
  const ForwardBatch fb = forward_batch(b, rows);
  EXPECT_EQ(fb.num_tokens(), 2);
  EXPECT_EQ(fb.block_table_stride, 3);
  EXPECT_EQ(fb.slots[0], 11 * 4 + 1);
  EXPECT_EQ(fb.logit_rows.size(), 2u);
}

TEST(StepBatchDeathTest, ABlockTableThatDoesNotCoverTheStepIsRefused) {
  Fixture f;
  f.plan.requests[1].block_table = {4, 9};  // position 9 needs block 2
  StepBatch b;
  EXPECT_DEATH(build_step_batch(f.plan, f.tasks, 4, StepBatchOptions{}, b), "block table does not cover the step");
}

// Window-local KV: the window layers' slots go through the window tables, whose released
// leading entries (kNoBlock) are copied as they are and never give a slot; a request without
// full layers' table gets padding slots for them.
TEST(StepBatch, WindowTablesGiveTheWindowLayersSlots) {
  Fixture f;
  f.plan.requests[0].window_block_table = {6, 5};
  f.plan.requests[1].window_block_table = {kNoBlock, kNoBlock, 8};  // position 9 in block 2
  f.plan.requests[2].window_block_table = {1};
  f.plan.requests[2].block_table.clear();  // no full layers
  StepBatch b;
  build_step_batch(f.plan, f.tasks, 4, StepBatchOptions{}, b);
  EXPECT_EQ(b.window_slots,
            (std::vector<int32_t>{6 * 4 + 2, 6 * 4 + 3, 5 * 4 + 0, 5 * 4 + 1, 8 * 4 + 1, 1 * 4 + 0, 1 * 4 + 1}));
  EXPECT_EQ(b.slots, (std::vector<int32_t>{7 * 4 + 2, 7 * 4 + 3, 2 * 4 + 0, 2 * 4 + 1, 11 * 4 + 1, -1, -1}));
  EXPECT_EQ(b.window_block_table_stride, 3);
  EXPECT_EQ(b.window_block_tables,
            (std::vector<int32_t>{6, 5, kNoBlock, kNoBlock, kNoBlock, 8, 1, kNoBlock, kNoBlock}));
  const ForwardBatch fb = forward_batch(b, {});
  EXPECT_EQ(fb.window_slots.size(), 7u);
  EXPECT_EQ(fb.window_block_table_stride, 3);
}

}  // namespace
}  // namespace vosti
