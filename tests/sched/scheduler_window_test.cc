// Window-local KV in the scheduler (docs/SPEC.md section 4): window tables hold only the blocks
// their window still reads, released blocks go back to the window pool (so more sequences fit),
// and prefix hits, preemption and finishing keep every pool invariant.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <numeric>
#include <string>
#include <vector>

#include "sched/scheduler.h"

namespace vosti {
namespace {

constexpr int32_t kBlock = 4;
constexpr int32_t kWindow = 10;  // a window table holds at most cdiv(4 + 10 - 1, 4) = 4 blocks at decode

SchedulerConfig config(int64_t num_blocks, int64_t num_window_blocks, bool full_layers, int32_t budget = 16,
                       int32_t max_model_len = 400) {
  SchedulerConfig c;
  c.pool.block_size = kBlock;
  c.pool.num_blocks = num_blocks;
  c.max_num_seqs = 16;
  c.max_num_batched_tokens = budget;
  c.max_model_len = max_model_len;
  if (num_window_blocks > 0) {
    c.window.window = kWindow;
    c.window.num_blocks = num_window_blocks;
    c.window.full_layers = full_layers;
  }
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

// One engine step: schedule, mark computed, append a token to every request that completed its
// tokens (until it has `length` tokens, then finish it). Checks the invariants around it.
StepPlan step(Scheduler& s, int32_t length) {
  StepPlan plan = s.schedule();
  EXPECT_TRUE(s.check_invariants().ok()) << s.check_invariants().to_string();
  s.on_step_done(plan);
  for (const ScheduledRequest& r : plan.requests) {
    if (!r.completes_known_tokens) continue;
    if (s.find(r.id)->num_tokens() >= length) {
      s.finish(r.id);
    } else {
      s.append_token(r.id, 7 + static_cast<int32_t>(r.id));
    }
  }
  const Status st = s.check_invariants();
  EXPECT_TRUE(st.ok()) << st.to_string();
  return plan;
}

TEST(SchedulerWindowTest, WindowTableHoldsOnlyWhatItsWindowReads) {
  Scheduler s = make(config(200, 40, true));
  ASSERT_TRUE(s.add_request(1, toks(50)).ok());
  int32_t max_held = 0;
  while (s.find(1) != nullptr) {
    const StepPlan plan = step(s, 300);
    const RequestState* r = s.find(1);
    if (r == nullptr) break;
    const BlockTable& w = r->window_table;
    // After the step, exactly the blocks before the window of the next query are released.
    EXPECT_EQ(w.num_released_blocks(),
              std::min(w.num_blocks(), first_window_block(r->num_computed_tokens, kWindow, kBlock)));
    EXPECT_EQ(s.window_pool().num_used_blocks(), w.num_held_blocks());
    EXPECT_EQ(r->block_table.num_blocks(), w.num_blocks());  // the full table keeps every block
    const ScheduledRequest& sr = plan.requests.front();
    for (size_t i = 0; i < sr.window_block_table.size(); ++i) {
      // A block the step's first query reads (or the step writes) is never released in its plan.
      if (static_cast<int32_t>(i) >= first_window_block(sr.num_computed_tokens, kWindow, kBlock)) {
        EXPECT_NE(sr.window_block_table[i], kNoBlock) << "block " << i;
      }
    }
    if (sr.num_new_tokens == 1) {
      const auto held = std::count_if(sr.window_block_table.begin(), sr.window_block_table.end(),
                                      [](BlockId b) { return b != kNoBlock; });
      max_held = std::max(max_held, static_cast<int32_t>(held));
    }
  }
  EXPECT_EQ(max_held, 4);  // a decode step: cdiv(block + window - 1, block), at 300 tokens as at 50
  EXPECT_EQ(s.window_pool().num_used_blocks(), 0);
  EXPECT_EQ(s.pool().num_used_blocks(), 0);
}

// 6 sequences of 120 tokens hold 6 * 30 blocks without window-local KV; with it and no full layers
// (Mistral) a window pool of 6 * 4 + 8 blocks runs them all at once, without a preemption.
TEST(SchedulerWindowTest, ReleasedWindowBlocksLetMoreSequencesRun) {
  Scheduler s = make(config(32, 32, false, 64, 120));
  for (RequestId id = 1; id <= 6; ++id) ASSERT_TRUE(s.add_request(id, toks(20, static_cast<int32_t>(id) * 1000)).ok());
  int32_t most_running = 0;
  while (s.has_work()) {
    step(s, 120);
    most_running = std::max(most_running, s.num_running());
    for (const RequestState* r : s.running()) EXPECT_TRUE(r->block_table.empty());
  }
  EXPECT_EQ(most_running, 6);
  EXPECT_EQ(s.stats().num_preemptions, 0);

  Scheduler full = make(config(32, 0, true, 64, 120));  // the same memory as one pool of full tables
  for (RequestId id = 1; id <= 6; ++id)
    ASSERT_TRUE(full.add_request(id, toks(20, static_cast<int32_t>(id) * 1000)).ok());
  while (full.has_work()) step(full, 120);
  EXPECT_GT(full.stats().num_preemptions, 0);
}

// A prefix hit gives the window table the matched blocks its window still reads, the released
// ones' keys only, and as many blocks as the full table's hit.
TEST(SchedulerWindowTest, PrefixHitTakesTheWindowsBlocksAndTheChainsKeys) {
  Scheduler s = make(config(100, 40, true));
  ASSERT_TRUE(s.add_request(1, toks(41)).ok());
  while (s.find(1)->num_computed_tokens < 41) step(s, 1000);
  const std::vector<BlockId> first_full = s.find(1)->block_table.blocks();
  ASSERT_TRUE(s.finish(1));
  ASSERT_TRUE(s.add_request(2, toks(45)).ok());
  const StepPlan plan = step(s, 1000);
  const ScheduledRequest& r = plan.requests.front();
  EXPECT_EQ(r.num_cached_tokens, 40);  // 10 full blocks; the last known token is always computed
  const int32_t first = first_window_block(40, kWindow, kBlock);
  EXPECT_EQ(first, 7);
  for (int32_t i = 0; i < 10; ++i) {
    EXPECT_EQ(r.block_table[static_cast<size_t>(i)], first_full[static_cast<size_t>(i)]);
    EXPECT_EQ(r.window_block_table[static_cast<size_t>(i)] == kNoBlock, i < first) << "block " << i;
  }
  // After the step (45 tokens computed): the hit's 10 keys and block 10's, registered; the
  // window now releases blocks before first_window_block(45) = 9.
  EXPECT_EQ(s.find(2)->window_table.num_hashed_blocks(), 11);
  EXPECT_EQ(s.find(2)->window_table.num_released_blocks(), 9);
}

// Preemption and finishing release both tables; a tiny window pool forces both, often.
TEST(SchedulerWindowTest, PreemptionAndFinishReleaseBothPools) {
  Scheduler s = make(config(64, 9, true, 8, 64));
  for (RequestId id = 1; id <= 5; ++id) ASSERT_TRUE(s.add_request(id, toks(15)).ok());
  while (s.has_work()) step(s, 60);
  EXPECT_GT(s.stats().num_preemptions, 0);
  EXPECT_EQ(s.window_pool().num_used_blocks(), 0);
  EXPECT_EQ(s.pool().num_used_blocks(), 0);
}

// Speculation (scheduler.h): whatever a verify chunk claimed in the window pool, once its draft is
// settled (rejected at any position, or accepted to its end) the request's tables, both pools and
// the prefix cache hold what plain decoding holds at the same computed length: block counts,
// released entries, chain keys, used and cached blocks. (Pools large enough that neither run
// evicts: which cached block allocation reuses first is the free order, a physical variation.)
TEST(SchedulerWindowTest, SettledDraftsLeaveWhatPlainDecodingHolds) {
  struct Snapshot {
    int32_t window_blocks = 0, window_released = 0, full_blocks = 0;
    int64_t window_used = 0, window_cached = 0, full_used = 0, full_cached = 0;
    std::vector<BlockKey> window_keys, full_keys;
    bool operator==(const Snapshot&) const = default;
  };
  auto snapshot = [](const Scheduler& s) {
    const RequestState& r = *s.find(1);
    return Snapshot{r.window_table.num_blocks(),
                    r.window_table.num_released_blocks(),
                    r.block_table.num_blocks(),
                    s.window_pool().num_used_blocks(),
                    s.window_pool().num_cached_blocks(),
                    s.pool().num_used_blocks(),
                    s.pool().num_cached_blocks(),
                    r.window_table.keys(),
                    r.block_table.keys()};
  };
  const std::vector<int32_t> truth = toks(110);
  const std::vector<int32_t> prompt(truth.begin(), truth.begin() + 30);
  std::map<int32_t, Snapshot> plain_at;  // num_computed_tokens -> what plain decoding holds then
  Scheduler plain = make(config(200, 200, true));
  ASSERT_TRUE(plain.add_request(1, prompt).ok());
  while (plain.find(1)->num_tokens() < 110) {
    plain.on_step_done(plain.schedule());
    const int32_t n = plain.find(1)->num_tokens();
    if (plain.find(1)->num_computed_tokens < n) continue;  // a prefill chunk
    plain.append_token(1, truth[static_cast<size_t>(n)]);
    plain_at.emplace(plain.find(1)->num_computed_tokens, snapshot(plain));
  }
  Scheduler spec = make(config(200, 200, true));
  ASSERT_TRUE(spec.add_request(1, prompt).ok());
  int32_t num_steps = 0, num_rejected = 0, num_released = 0;
  while (spec.find(1)->num_tokens() < 100) {
    const StepPlan plan = spec.schedule();
    spec.on_step_done(plan);
    if (spec.find(1)->num_computed_tokens < spec.find(1)->num_tokens()) continue;
    const ScheduledRequest& s = plan.requests.front();
    const std::vector<int32_t> draft(s.token_ids.end() - s.num_draft_tokens, s.token_ids.end());
    for (size_t k = 0;; ++k) {  // the engine's emission: the truth, while the draft matched it
      const int32_t n = spec.find(1)->num_tokens();
      spec.append_token(1, truth[static_cast<size_t>(n)]);
      if (k == draft.size() || draft[k] != truth[static_cast<size_t>(n)]) {
        num_rejected += k < draft.size() ? 1 : 0;
        break;
      }
    }
    ASSERT_TRUE(spec.check_invariants().ok()) << spec.check_invariants().to_string();
    const int32_t c = spec.find(1)->num_computed_tokens;
    ASSERT_TRUE(plain_at.contains(c)) << c;
    EXPECT_TRUE(snapshot(spec) == plain_at.at(c)) << "computed " << c << " after verify step " << num_steps;
    num_released = spec.find(1)->window_table.num_released_blocks();
    // The next draft: 4 tokens of the truth, the one at (step % 5) wrong (none at 4).
    const int32_t n = spec.find(1)->num_tokens();
    std::vector<int32_t> d(truth.begin() + n, truth.begin() + n + 4);
    if (num_steps % 5 < 4) d[static_cast<size_t>(num_steps % 5)] += 1000;
    spec.set_draft(1, std::move(d));
    ++num_steps;
  }
  EXPECT_GT(num_rejected, 5);
  EXPECT_GT(num_released, 10);  // the window moved on: 100 positions, a window of 10
  ASSERT_TRUE(spec.finish(1));
  EXPECT_EQ(spec.window_pool().num_used_blocks(), 0);
  EXPECT_EQ(spec.pool().num_used_blocks(), 0);
}

TEST(SchedulerWindowTest, CreateRejectsAWindowPoolTooSmallForOneStep) {
  // A step of 16 tokens from any position needs up to cdiv(4 - 1 + 10 - 1 + 16, 4) = 7 blocks.
  EXPECT_EQ(Scheduler::create(config(100, 6, true)).status().code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(Scheduler::create(config(100, 7, true)).ok());
}

}  // namespace
}  // namespace vosti
