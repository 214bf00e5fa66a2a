#include "sched/scheduler.h"

#include <gtest/gtest.h>

#include <numeric>
#include <vector>

namespace vosti {
namespace {

SchedulerConfig make_config(int32_t block_size, int64_t num_blocks, int32_t max_num_seqs, int32_t budget,
                            int32_t max_model_len, bool caching = true) {
  SchedulerConfig c;
  c.pool.block_size = block_size;
  c.pool.num_blocks = num_blocks;
  c.pool.enable_prefix_caching = caching;
  c.max_num_seqs = max_num_seqs;
  c.max_num_batched_tokens = budget;
  c.max_model_len = max_model_len;
  return c;
}

Scheduler make(const SchedulerConfig& c) {
  Result<Scheduler> s = Scheduler::create(c);
  VOSTI_CHECK(s.ok(), s.status().to_string());
  return std::move(s).value();
}

std::vector<int32_t> toks(int32_t n, int32_t start = 100) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  std::iota(t.begin(), t.end(), start);
  return t;
}

void expect_ok(const Scheduler& s) {
  const Status st = s.check_invariants();
  EXPECT_TRUE(st.ok()) << st.to_string();
}

// schedule() then on_step_done(), checking invariants around both.
StepPlan step(Scheduler& s) {
  StepPlan plan = s.schedule();
  expect_ok(s);
  s.on_step_done(plan);
  expect_ok(s);
  return plan;
}

const ScheduledRequest* find_in(const StepPlan& plan, RequestId id) {
  for (const ScheduledRequest& r : plan.requests) {
    if (r.id == id) return &r;
  }
  return nullptr;
}

TEST(SchedulerTest, CreateRejectsAPoolTooSmallForOneRequest) {
  EXPECT_EQ(Scheduler::create(make_config(4, 3, 4, 16, 13)).status().code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(Scheduler::create(make_config(4, 3, 4, 16, 12)).ok());
  EXPECT_FALSE(Scheduler::create(make_config(4, 3, 0, 16, 12)).ok());
  EXPECT_FALSE(Scheduler::create(make_config(4, 3, 4, 0, 12)).ok());
  EXPECT_FALSE(Scheduler::create(make_config(4, 3, 4, 16, 0)).ok());
}

TEST(SchedulerTest, AddRequestRejectsBadRequestsAndStaysUnchanged) {
  Scheduler s = make(make_config(4, 8, 4, 16, 10));
  EXPECT_TRUE(s.add_request(1, toks(3)).ok());
  EXPECT_EQ(s.add_request(1, toks(3)).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.add_request(2, {}).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.add_request(3, toks(11)).code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(s.add_request(4, toks(10)).ok());
  EXPECT_EQ(s.num_waiting(), 2);
  expect_ok(s);
}

TEST(SchedulerTest, ChunkedPrefillThenDecode) {
  Scheduler s = make(make_config(4, 8, 4, 4, 32));
  ASSERT_TRUE(s.add_request(7, toks(10)).ok());
  StepPlan p = step(s);
  ASSERT_EQ(p.requests.size(), 1u);
  EXPECT_EQ(p.requests[0].num_computed_tokens, 0);
  EXPECT_EQ(p.requests[0].num_new_tokens, 4);
  EXPECT_EQ(p.requests[0].token_ids, toks(4));
  EXPECT_EQ(p.requests[0].block_table.size(), 1u);
  EXPECT_FALSE(p.requests[0].completes_known_tokens);
  EXPECT_TRUE(p.requests[0].newly_admitted);
  p = step(s);
  EXPECT_EQ(p.requests[0].num_computed_tokens, 4);
  EXPECT_EQ(p.requests[0].num_new_tokens, 4);
  EXPECT_FALSE(p.requests[0].newly_admitted);
  p = step(s);
  EXPECT_EQ(p.requests[0].num_new_tokens, 2);
  EXPECT_EQ(p.requests[0].block_table.size(), 3u);
  EXPECT_TRUE(p.requests[0].completes_known_tokens);
  EXPECT_FALSE(s.append_token(7, 555));
  p = step(s);
  EXPECT_EQ(p.requests[0].num_computed_tokens, 10);
  EXPECT_EQ(p.requests[0].num_new_tokens, 1);
  EXPECT_EQ(p.requests[0].token_ids, std::vector<int32_t>{555});
  EXPECT_TRUE(p.requests[0].completes_known_tokens);
  EXPECT_TRUE(s.finish(7));
  EXPECT_FALSE(s.has_work());
  EXPECT_EQ(s.pool().num_free_blocks(), 8);
  expect_ok(s);
}

TEST(SchedulerTest, PrefillsMixWithDecodesUnderTheBudget) {
  Scheduler s = make(make_config(4, 16, 4, 6, 64));
  ASSERT_TRUE(s.add_request(1, toks(3)).ok());
  StepPlan p = step(s);
  ASSERT_TRUE(p.requests[0].completes_known_tokens);
  s.append_token(1, 9);
  ASSERT_TRUE(s.add_request(2, toks(20)).ok());
  p = step(s);
  ASSERT_EQ(p.requests.size(), 2u);
  EXPECT_EQ(p.requests[0].id, 1u);  // running first: one decode token
  EXPECT_EQ(p.requests[0].num_new_tokens, 1);
  EXPECT_EQ(p.requests[1].id, 2u);  // then the new prefill gets the rest of the budget
  EXPECT_EQ(p.requests[1].num_new_tokens, 5);
  EXPECT_EQ(p.num_batched_tokens, 6);
}

TEST(SchedulerTest, MaxNumSeqsCapsRunningRequests) {
  Scheduler s = make(make_config(4, 16, 2, 100, 64));
  for (RequestId id = 1; id <= 3; ++id) ASSERT_TRUE(s.add_request(id, toks(2)).ok());
  const StepPlan p = step(s);
  EXPECT_EQ(p.requests.size(), 2u);
  EXPECT_EQ(s.num_running(), 2);
  EXPECT_EQ(s.num_waiting(), 1);
  EXPECT_EQ(find_in(p, 3), nullptr);
}

TEST(SchedulerTest, PriorityThenArrivalOrder) {
  Scheduler s = make(make_config(4, 16, 2, 100, 64));
  ASSERT_TRUE(s.add_request(1, toks(2), /*priority=*/5).ok());
  ASSERT_TRUE(s.add_request(2, toks(2), 0).ok());
  ASSERT_TRUE(s.add_request(3, toks(2), 5).ok());
  ASSERT_TRUE(s.add_request(4, toks(2), 0).ok());
  const StepPlan p = step(s);
  ASSERT_EQ(p.requests.size(), 2u);
  EXPECT_EQ(p.requests[0].id, 2u);
  EXPECT_EQ(p.requests[1].id, 4u);
  EXPECT_EQ(s.running()[0]->id, 2u);
}

TEST(SchedulerTest, AdmissionIsHeadOfLineWhenBlocksRunOut) {
  Scheduler s = make(make_config(4, 4, 4, 100, 16));
  ASSERT_TRUE(s.add_request(1, toks(12)).ok());
  ASSERT_TRUE(s.add_request(2, toks(8)).ok());  // needs 2 blocks, 1 left
  ASSERT_TRUE(s.add_request(3, toks(1)).ok());  // would fit, but must not overtake 2
  const StepPlan p = step(s);
  ASSERT_EQ(p.requests.size(), 1u);
  EXPECT_EQ(p.requests[0].id, 1u);
}

TEST(SchedulerTest, PrefixHitLeavesTheLastTokenToCompute) {
  Scheduler s = make(make_config(4, 16, 4, 100, 64));
  ASSERT_TRUE(s.add_request(1, toks(8)).ok());
  step(s);
  s.finish(1);
  ASSERT_TRUE(s.add_request(2, toks(8)).ok());  // identical prompt: at most 7 tokens may hit -> 1 block
  StepPlan p = step(s);
  EXPECT_EQ(p.requests[0].num_cached_tokens, 4);
  EXPECT_EQ(p.requests[0].num_computed_tokens, 4);
  EXPECT_EQ(p.requests[0].num_new_tokens, 4);
  EXPECT_EQ(p.num_prefix_hit_tokens, 4);
  EXPECT_EQ(p.num_prefix_query_tokens, 8);
  EXPECT_EQ(s.find(2)->num_cached_tokens, 4);
  ASSERT_TRUE(s.add_request(3, toks(11)).ok());  // extends it: both full blocks hit
  p = step(s);
  const ScheduledRequest* r3 = find_in(p, 3);
  ASSERT_NE(r3, nullptr);
  EXPECT_EQ(r3->num_cached_tokens, 8);
  EXPECT_EQ(r3->num_new_tokens, 3);
  EXPECT_EQ(r3->block_table[0], s.find(2)->block_table[0]);
  // Request 2 computed its own block 1 (it could only hit 7 tokens); the cache keeps the
  // first copy (request 1's, freed but still cached), which is what request 3 shares.
  EXPECT_NE(r3->block_table[1], s.find(2)->block_table[1]);
  EXPECT_EQ(s.stats().num_prefix_hit_tokens, 12);
}

TEST(SchedulerTest, PartialLastBlockIsNeverShared) {
  Scheduler s = make(make_config(4, 16, 4, 100, 64));
  ASSERT_TRUE(s.add_request(1, toks(6)).ok());
  step(s);
  EXPECT_EQ(s.pool().num_cached_blocks(), 1);
  std::vector<int32_t> longer = toks(6);
  longer.push_back(1);
  longer.push_back(2);
  longer.push_back(3);
  ASSERT_TRUE(s.add_request(2, longer).ok());
  const StepPlan p = step(s);
  const ScheduledRequest* r2 = find_in(p, 2);
  ASSERT_NE(r2, nullptr);
  EXPECT_EQ(r2->num_cached_tokens, 4);
  EXPECT_NE(r2->block_table[1], s.find(1)->block_table[1]);
}

TEST(SchedulerTest, BlocksAreRegisteredOnlyAfterTheirKvIsComputed) {
  Scheduler s = make(make_config(4, 16, 4, 3, 64));
  ASSERT_TRUE(s.add_request(1, toks(8)).ok());
  StepPlan p = s.schedule();  // 3 tokens
  EXPECT_EQ(s.pool().num_cached_blocks(), 0);
  s.on_step_done(p);
  EXPECT_EQ(s.pool().num_cached_blocks(), 0);
  p = s.schedule();  // positions 3..5: block 0 becomes full
  EXPECT_EQ(s.pool().num_cached_blocks(), 0);
  s.on_step_done(p);
  EXPECT_EQ(s.pool().num_cached_blocks(), 1);
  expect_ok(s);
}

TEST(SchedulerTest, PrefixCacheOffOrOptedOutGivesNoHits) {
  for (bool caching : {false, true}) {
    Scheduler s = make(make_config(4, 16, 4, 100, 64, caching));
    ASSERT_TRUE(s.add_request(1, toks(9)).ok());
    step(s);
    ASSERT_TRUE(s.add_request(2, toks(9), 0, /*use_prefix_cache=*/!caching ? true : false).ok());
    const StepPlan p = step(s);
    const ScheduledRequest* r2 = find_in(p, 2);
    ASSERT_NE(r2, nullptr);
    EXPECT_EQ(r2->num_cached_tokens, 0);
    EXPECT_EQ(r2->num_new_tokens, 9);
    EXPECT_EQ(p.num_prefix_query_tokens, 0);
  }
}

TEST(SchedulerTest, PreemptsTheLatestArrivalWhenBlocksRunOut) {
  Scheduler s = make(make_config(2, 4, 4, 100, 8, /*caching=*/true));
  ASSERT_TRUE(s.add_request(1, toks(3)).ok());
  ASSERT_TRUE(s.add_request(2, toks(3, 200)).ok());
  StepPlan p = step(s);  // each holds 2 blocks: pool full
  ASSERT_EQ(p.requests.size(), 2u);
  EXPECT_EQ(s.pool().num_free_blocks(), 0);
  s.append_token(1, 50);
  s.append_token(2, 60);
  p = step(s);  // both at 4 tokens: still 2 blocks each
  ASSERT_EQ(p.requests.size(), 2u);
  s.append_token(1, 51);
  s.append_token(2, 61);
  p = step(s);  // 1 needs a 3rd block: 2 (later arrival) is preempted, nobody is admitted
  ASSERT_EQ(p.preempted, std::vector<RequestId>{2});
  ASSERT_EQ(p.requests.size(), 1u);
  EXPECT_EQ(p.requests[0].id, 1u);
  const RequestState* r2 = s.find(2);
  EXPECT_EQ(r2->status, RequestStatus::kPreempted);
  EXPECT_EQ(r2->num_computed_tokens, 0);
  EXPECT_TRUE(r2->block_table.empty());
  EXPECT_EQ(r2->num_tokens(), 5);  // its outputs are kept and recomputed
  EXPECT_EQ(s.stats().num_preemptions, 1);
  s.finish(1);
  p = step(s);  // 2 resumes: of its 2 full cached blocks, the last was evicted (LRU, tail first) for 1
  ASSERT_EQ(p.requests.size(), 1u);
  EXPECT_EQ(p.requests[0].id, 2u);
  EXPECT_EQ(p.requests[0].num_cached_tokens, 2);
  EXPECT_EQ(p.requests[0].token_ids, (std::vector<int32_t>{202, 60, 61}));
  EXPECT_TRUE(p.requests[0].completes_known_tokens);
  EXPECT_EQ(s.find(2)->num_cached_tokens, 0);  // stats keep the first admission's hits
}

TEST(SchedulerTest, LowerPriorityRunningRequestIsTheVictim) {
  Scheduler s = make(make_config(2, 4, 4, 100, 8, /*caching=*/false));
  ASSERT_TRUE(s.add_request(1, toks(3), /*priority=*/1).ok());
  StepPlan p = step(s);
  ASSERT_TRUE(s.add_request(2, toks(3, 200), /*priority=*/0).ok());
  s.append_token(1, 50);
  p = step(s);  // 2 admitted; both now hold 2 blocks
  ASSERT_EQ(p.requests.size(), 2u);
  EXPECT_EQ(s.running()[0]->id, 2u);  // sorted by priority
  s.append_token(1, 51);
  s.append_token(2, 60);
  p = step(s);  // 2 (priority 0) goes first, needs no block; 1 needs a 3rd block and is its own victim
  EXPECT_EQ(p.preempted, std::vector<RequestId>{1});
  ASSERT_EQ(p.requests.size(), 1u);
  EXPECT_EQ(p.requests[0].id, 2u);
  s.append_token(2, 61);
  p = step(s);  // 2 needs a third block: the free pool has 2
  EXPECT_TRUE(p.preempted.empty());
  expect_ok(s);
}

TEST(SchedulerTest, NeverSchedulesPastMaxModelLen) {
  Scheduler s = make(make_config(2, 8, 4, 100, 5));
  ASSERT_TRUE(s.add_request(1, toks(4)).ok());
  step(s);
  EXPECT_TRUE(s.append_token(1, 7));  // 5 tokens == max_model_len: the engine must finish it
  StepPlan p = step(s);
  ASSERT_EQ(p.requests.size(), 1u);  // if it does not, position 4 (< 5) is still computable
  EXPECT_EQ(p.requests[0].num_computed_tokens, 4);
  ASSERT_TRUE(s.add_request(2, toks(5, 300)).ok());  // a prompt of exactly max_model_len
  p = step(s);
  const ScheduledRequest* r2 = find_in(p, 2);
  ASSERT_NE(r2, nullptr);
  EXPECT_EQ(r2->num_new_tokens, 5);
  EXPECT_TRUE(s.append_token(2, 8));  // 6 tokens
  p = step(s);
  EXPECT_EQ(find_in(p, 2), nullptr);  // position 5 is never scheduled
  expect_ok(s);
}

TEST(SchedulerTest, AbortWaitingAndRunningRequests) {
  Scheduler s = make(make_config(4, 8, 1, 100, 32));
  ASSERT_TRUE(s.add_request(1, toks(9)).ok());
  ASSERT_TRUE(s.add_request(2, toks(9)).ok());
  StepPlan p = s.schedule();
  EXPECT_TRUE(s.finish(2));  // waiting
  EXPECT_TRUE(s.finish(1));  // running, mid-step
  EXPECT_FALSE(s.finish(1));
  EXPECT_FALSE(s.finish(99));
  s.on_step_done(p);  // skips the aborted request
  expect_ok(s);
  EXPECT_FALSE(s.has_work());
  EXPECT_EQ(s.pool().num_free_blocks(), 8);
  EXPECT_TRUE(s.schedule().empty());
}

TEST(SchedulerTest, ShuffledBlockOrderChangesOnlyPhysicalIds) {
  SchedulerConfig c = make_config(2, 16, 4, 100, 32);
  Scheduler plain = make(c);
  c.pool.shuffle_seed = 12345;
  Scheduler shuffled = make(c);
  ASSERT_TRUE(plain.add_request(1, toks(9)).ok());
  ASSERT_TRUE(shuffled.add_request(1, toks(9)).ok());
  const StepPlan a = step(plain), b = step(shuffled);
  EXPECT_EQ(a.requests[0].token_ids, b.requests[0].token_ids);
  EXPECT_EQ(a.requests[0].num_new_tokens, b.requests[0].num_new_tokens);
  EXPECT_NE(a.requests[0].block_table, b.requests[0].block_table);
}

// Speculative decoding: drafts run after the known tokens, only accepted positions count as
// computed or reach the prefix cache, and a rejection frees the blocks past the computed ones.
TEST(SchedulerTest, DraftTokensAreVerifiedByAppendTokenAndRejectedOnesRolledBack) {
  Scheduler s = make(make_config(4, 16, 4, 100, 64));
  ASSERT_TRUE(s.add_request(1, toks(6)).ok());
  step(s);
  s.append_token(1, 50);
  s.set_draft(1, {51, 52, 53, 54, 55, 56, 57, 58});
  StepPlan p = step(s);
  ASSERT_EQ(p.requests.size(), 1u);
  const ScheduledRequest& r = p.requests[0];
  EXPECT_EQ(r.num_computed_tokens, 6);
  EXPECT_EQ(r.num_new_tokens, 9);
  EXPECT_EQ(r.num_draft_tokens, 8);
  EXPECT_EQ(p.num_draft_tokens, 8);
  EXPECT_EQ(r.token_ids, (std::vector<int32_t>{50, 51, 52, 53, 54, 55, 56, 57, 58}));
  EXPECT_TRUE(r.completes_known_tokens);
  EXPECT_EQ(r.block_table.size(), 4u);           // positions 0..14
  EXPECT_EQ(s.find(1)->num_computed_tokens, 7);  // the drafts wait for verification
  EXPECT_EQ(s.pool().num_cached_blocks(), 1);    // block 0 only: block 1 holds position 7, a draft
  EXPECT_FALSE(s.append_token(1, 51));           // accepted: position 7 is computed, block 1 is full
  EXPECT_EQ(s.find(1)->num_computed_tokens, 8);
  EXPECT_EQ(s.pool().num_cached_blocks(), 2);
  EXPECT_FALSE(s.append_token(1, 99));  // rejected (the draft there was 52): roll back
  expect_ok(s);
  EXPECT_EQ(s.find(1)->num_computed_tokens, 8);
  EXPECT_EQ(s.find(1)->block_table.num_blocks(), 2);  // blocks_for(8): the 2 draft-only blocks are freed
  EXPECT_EQ(s.pool().num_free_blocks(), 14);
  EXPECT_TRUE(s.find(1)->unverified.empty());
  for (BlockId b = 0; b < 16; ++b)
    for (const int32_t t : s.pool().cached_tokens(b)) EXPECT_TRUE(t < 52 || t > 58) << "a cached block holds a draft";
  p = step(s);  // the token after the rejection, alone
  EXPECT_EQ(p.requests[0].token_ids, std::vector<int32_t>{99});
  EXPECT_EQ(p.requests[0].num_draft_tokens, 0);
  EXPECT_TRUE(s.finish(1));
  EXPECT_EQ(s.pool().num_free_blocks(), 16);
  expect_ok(s);
}

TEST(SchedulerTest, DraftsFitTheBudgetTheContextAndTheFreeBlocksAndNeverPreempt) {
  {  // budget 4: one known token and 3 drafts
    Scheduler s = make(make_config(4, 16, 4, 4, 64));
    ASSERT_TRUE(s.add_request(1, toks(4)).ok());
    step(s);
    s.append_token(1, 50);
    s.set_draft(1, {1, 2, 3, 4, 5});
    EXPECT_EQ(step(s).requests[0].num_draft_tokens, 3);
  }
  {  // max_model_len 10 with 8 tokens: one draft (its row samples position 9, the last)
    Scheduler s = make(make_config(2, 8, 4, 100, 10));
    ASSERT_TRUE(s.add_request(1, toks(7)).ok());
    step(s);
    s.append_token(1, 50);
    s.set_draft(1, {1, 2, 3});
    EXPECT_EQ(step(s).requests[0].num_draft_tokens, 1);
  }
  {  // two requests fill the pool: the drafts are dropped, nobody is preempted
    Scheduler s = make(make_config(2, 6, 4, 100, 12, /*caching=*/false));
    ASSERT_TRUE(s.add_request(1, toks(3)).ok());
    ASSERT_TRUE(s.add_request(2, toks(3, 200)).ok());
    step(s);
    s.append_token(1, 50);
    s.append_token(2, 51);
    s.set_draft(1, {1, 2, 3, 4, 5});
    const StepPlan p = step(s);
    EXPECT_TRUE(p.preempted.empty());
    ASSERT_EQ(p.requests.size(), 2u);
    EXPECT_EQ(p.requests[0].num_draft_tokens, 0);
  }
  {  // a request preempted with a draft loses it
    Scheduler s = make(make_config(2, 4, 4, 100, 8, /*caching=*/false));
    ASSERT_TRUE(s.add_request(1, toks(4)).ok());
    ASSERT_TRUE(s.add_request(2, toks(3, 200)).ok());
    step(s);
    s.append_token(1, 50);
    s.append_token(2, 51);
    s.set_draft(2, {1});
    const StepPlan p = step(s);
    ASSERT_EQ(p.preempted, std::vector<RequestId>{2});
    EXPECT_TRUE(s.find(2)->draft.empty());
  }
}

}  // namespace
}  // namespace vosti
