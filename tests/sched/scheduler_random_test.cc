// Randomised operation sequences over tiny pools: add, abort (also mid-step), schedule,
// on_step_done, append_token, finish, with check_invariants() after every operation and
// a shadow model of what each physical block holds: every block a request reads must
// hold exactly the KV of that request's own prefix (DESIGN.md rule 5), whatever the
// hash function, the pool size, the budget or the preemptions. With speculation, requests get
// random drafts after their tokens, each accepted at random (or not): a position the scheduler
// counts computed after a rejected draft, or a block cached while holding a draft token, shows up
// as a read of another prefix's KV.
// With window-local KV (a random window, with or without full layers) a second shadow holds the
// window pool: the window positions a step's queries read must hold the request's own prefix in
// its window table, whatever was released and reused before.
// A failure prints the seed; rerun one seed with VOSTI_TEST_SEED=<seed>.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <random>
#include <sstream>
#include <string>
#include <unordered_map>
#include <vector>

#include "sched/scheduler.h"
#include "tests/sched/random_scheduler_config.h"

namespace vosti {
namespace {

struct Mirror {
  std::vector<int32_t> tokens;
  std::vector<int32_t> draft;  // set with Scheduler::set_draft after the last token
  int32_t max_tokens = 0;
  int32_t num_prompt = 0;
};

class Harness {
 public:
  // window_local: a random window pool; speculate: random drafts (either, or both).
  explicit Harness(uint64_t seed, bool window_local = false, bool speculate = false)
      : rng_(seed), speculate_(speculate) {
    test_support::RandomSchedulerConfig random = test_support::random_scheduler_config(rng_);
    SchedulerConfig& c = random.config;
    description_ = random.description;
    if (window_local) {
      c.window.window = static_cast<int32_t>(uniform(1, 24));
      c.window.full_layers = uniform(0, 3) != 0;
      const int64_t reach =
          std::min<int64_t>(c.max_model_len, c.pool.block_size + c.window.window - 2 + c.max_num_batched_tokens);
      const int64_t least = (reach + c.pool.block_size - 1) / c.pool.block_size;
      c.window.num_blocks = least + uniform(0, 2 * least);
      description_ += " window=" + std::to_string(c.window.window) +
                      " window_blocks=" + std::to_string(c.window.num_blocks) +
                      " full_layers=" + std::to_string(c.window.full_layers);
      window_shadow_.resize(static_cast<size_t>(c.window.num_blocks));
    }
    Result<Scheduler> s = Scheduler::create(c);
    VOSTI_CHECK(s.ok(), s.status().to_string());
    sched_ = std::make_unique<Scheduler>(std::move(s).value());
    shadow_.resize(static_cast<size_t>(c.pool.num_blocks));
    for (auto& doc : documents_) {
      doc.resize(static_cast<size_t>(c.max_model_len));
      for (int32_t& t : doc) t = static_cast<int32_t>(uniform(0, 5));
    }
  }

  const std::string& description() const { return description_; }

  // One engine step with random arrivals and aborts around it; "" or what broke.
  std::string step(bool allow_arrivals) {
    if (allow_arrivals && uniform(0, 2) == 0) {
      for (int64_t k = uniform(1, 2); k > 0 && static_cast<int64_t>(mirror_.size()) < 3L * config().max_num_seqs + 2;
           --k) {
        if (std::string e = add_random(); !e.empty()) return e;
      }
    }
    if (!mirror_.empty() && uniform(0, 19) == 0) {
      if (std::string e = abort_random(); !e.empty()) return e;
    }
    const StepPlan plan = sched_->schedule();
    if (std::string e = check("schedule"); !e.empty()) return e;
    if (std::string e = check_plan(plan); !e.empty()) return e;
    if (std::string e = execute(plan); !e.empty()) return e;
    if (!mirror_.empty() && uniform(0, 29) == 0) {
      if (std::string e = abort_random(); !e.empty()) return e;  // between schedule and on_step_done
    }
    sched_->on_step_done(plan);
    if (std::string e = check("on_step_done"); !e.empty()) return e;
    if (std::string e = postprocess(plan); !e.empty()) return e;
    // Liveness: every live request has a token left to compute (its last one at least), or it
    // would never be scheduled, nor sample, again.
    for (const auto& [id, m] : mirror_) {
      const RequestState* r = sched_->find(id);
      if (r->num_computed_tokens >= r->num_tokens())
        return "request " + std::to_string(id) + " has nothing left to compute";
    }
    return "";
  }

  bool has_work() const { return sched_->has_work(); }
  const Scheduler& scheduler() const { return *sched_; }

 private:
  const SchedulerConfig& config() const { return sched_->config(); }
  int64_t uniform(int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng_); }
  int32_t pick(std::initializer_list<int32_t> v) {
    return *(v.begin() + uniform(0, static_cast<int64_t>(v.size()) - 1));
  }

  std::string check(const char* after) const {
    const Status s = sched_->check_invariants();
    return s.ok() ? "" : std::string("after ") + after + ": " + s.to_string();
  }

  std::string add_random() {
    const RequestId id = next_id_++;
    if (uniform(0, 29) == 0) {  // a bad request must be refused and change nothing
      std::vector<int32_t> bad(uniform(0, 1) ? 0 : static_cast<size_t>(config().max_model_len + 1), 1);
      if (sched_->add_request(id, bad).ok()) return "a bad request was accepted";
      return check("rejected add_request");
    }
    const auto& doc = documents_[static_cast<size_t>(uniform(0, 2))];
    const int64_t len = uniform(1, config().max_model_len);
    const int64_t shared = uniform(0, len);
    Mirror m;
    m.tokens.assign(doc.begin(), doc.begin() + shared);
    while (static_cast<int64_t>(m.tokens.size()) < len) m.tokens.push_back(static_cast<int32_t>(uniform(0, 3)));
    m.num_prompt = static_cast<int32_t>(len);
    m.max_tokens = static_cast<int32_t>(uniform(0, 12));
    const Status s = sched_->add_request(id, m.tokens, static_cast<int32_t>(uniform(0, 2)), uniform(0, 4) != 0);
    if (!s.ok()) return "add_request refused a valid request: " + s.to_string();
    mirror_.emplace(id, std::move(m));
    return check("add_request");
  }

  std::string abort_random() {
    auto it = mirror_.begin();
    std::advance(it, uniform(0, static_cast<int64_t>(mirror_.size()) - 1));
    if (!sched_->finish(it->first)) return "finish() did not know a live request";
    mirror_.erase(it);
    return check("abort");
  }

  std::string check_plan(const StepPlan& plan) const {
    const int32_t bs = config().pool.block_size;
    if (static_cast<int32_t>(plan.requests.size()) > config().max_num_seqs) return "plan exceeds max_num_seqs";
    int32_t total = 0;
    std::vector<RequestId> seen;
    for (const ScheduledRequest& s : plan.requests) {
      const RequestState* r = sched_->find(s.id);
      if (r == nullptr || r->status != RequestStatus::kRunning) return "plan holds a request that is not running";
      if (std::find(seen.begin(), seen.end(), s.id) != seen.end()) return "plan holds a request twice";
      seen.push_back(s.id);
      const Mirror& m = mirror_.at(s.id);
      const int32_t d = s.num_draft_tokens;
      const int32_t end = s.num_computed_tokens + s.num_new_tokens - d;  // the known tokens' end
      if (s.num_new_tokens - d <= 0 || end > config().max_model_len || end > static_cast<int32_t>(m.tokens.size())) {
        return "bad token range for request " + std::to_string(s.id);
      }
      if (d < 0 || d > static_cast<int32_t>(m.draft.size()) ||
          (d > 0 && (end != static_cast<int32_t>(m.tokens.size()) || end + d > config().max_model_len - 1)))
        return "bad draft range for request " + std::to_string(s.id);
      if (!std::equal(s.token_ids.begin(), s.token_ids.end() - d, m.tokens.begin() + s.num_computed_tokens,
                      m.tokens.begin() + end) ||
          !std::equal(s.token_ids.end() - d, s.token_ids.end(), m.draft.begin()) ||
          static_cast<int32_t>(s.token_ids.size()) != s.num_new_tokens) {
        return "plan tokens differ from the request's tokens and draft";
      }
      if (config().window.full_layers && (static_cast<int32_t>(s.block_table.size()) != (end + d + bs - 1) / bs ||
                                          s.block_table != r->block_table.blocks())) {
        return "plan block table does not cover the step";
      }
      if (sched_->window_local() && (static_cast<int32_t>(s.window_block_table.size()) != (end + d + bs - 1) / bs ||
                                     s.window_block_table != r->window_table.blocks())) {
        return "plan window table does not cover the step";
      }
      if (s.completes_known_tokens != (end == static_cast<int32_t>(m.tokens.size()))) return "completes flag wrong";
      total += s.num_new_tokens;
    }
    if (total != plan.num_batched_tokens || total > config().max_num_batched_tokens) return "token budget broken";
    for (RequestId id : plan.preempted) {
      if (std::find(seen.begin(), seen.end(), id) != seen.end()) return "a preempted request is scheduled";
      const RequestState* r = sched_->find(id);
      if (r == nullptr || r->status != RequestStatus::kPreempted || r->num_computed_tokens != 0)
        return "preemption incomplete";
    }
    return "";
  }

  // The shadow KV model: reads must see the request's own prefix; writes must be exclusive.
  std::string execute(const StepPlan& plan) {
    const int32_t bs = config().pool.block_size;
    if (std::string e = execute_window(plan); !e.empty()) return e;
    if (!config().window.full_layers) return "";
    for (const ScheduledRequest& s : plan.requests) {
      const std::vector<int32_t>& tokens = mirror_.at(s.id).tokens;
      for (int32_t i = 0; i * bs < s.num_computed_tokens; ++i) {
        const int32_t upto = std::min((i + 1) * bs, s.num_computed_tokens);
        const std::vector<int32_t>& held = shadow_[static_cast<size_t>(s.block_table[static_cast<size_t>(i)])];
        // The block's first `upto` positions are read; with speculation it may hold rejected draft
        // positions past them (the request's private block), which nothing reads.
        const bool size_ok =
            speculate_ ? held.size() >= static_cast<size_t>(upto) : held.size() == static_cast<size_t>(upto);
        if (!size_ok || !std::equal(held.begin(), held.begin() + upto, tokens.begin())) {
          return "request " + std::to_string(s.id) + " reads block " + std::to_string(i) +
                 " holding another prefix's KV";
        }
      }
    }
    for (const ScheduledRequest& s : plan.requests) {
      // The sequence whose KV the step writes: the known tokens, then the draft.
      std::vector<int32_t> tokens = mirror_.at(s.id).tokens;
      tokens.resize(static_cast<size_t>(s.num_computed_tokens));
      tokens.insert(tokens.end(), s.token_ids.begin(), s.token_ids.end());
      const int32_t end = s.num_computed_tokens + s.num_new_tokens;
      for (int32_t i = s.num_computed_tokens / bs; i * bs < end; ++i) {
        const BlockId b = s.block_table[static_cast<size_t>(i)];
        if (sched_->pool().ref_count(b) != 1) return "request " + std::to_string(s.id) + " writes a shared block";
        const int32_t upto = std::min((i + 1) * bs, end);
        shadow_[static_cast<size_t>(b)].assign(tokens.begin(), tokens.begin() + upto);
      }
    }
    return "";
  }

  // The window pool's shadow: a step's queries read positions first_window(c)..c - 1 of the
  // window layers (c = num_computed), which must be held and hold the request's own prefix; its
  // writes go to blocks only it holds.
  std::string execute_window(const StepPlan& plan) {
    if (!sched_->window_local()) return "";
    const int32_t bs = config().pool.block_size;
    for (const ScheduledRequest& s : plan.requests) {
      const std::vector<int32_t>& tokens = mirror_.at(s.id).tokens;
      const int32_t c = s.num_computed_tokens;
      const int32_t first = std::max(0, c - config().window.window + 1);
      for (int32_t i = first / bs; i * bs < c; ++i) {
        const BlockId b = s.window_block_table[static_cast<size_t>(i)];
        if (b == kNoBlock) return "request " + std::to_string(s.id) + " released window block " + std::to_string(i);
        const int32_t upto = std::min((i + 1) * bs, c);
        const std::vector<int32_t>& held = window_shadow_[static_cast<size_t>(b)];
        // As in execute(): with speculation the block may also hold rejected draft positions.
        const bool size_ok =
            speculate_ ? held.size() >= static_cast<size_t>(upto) : held.size() == static_cast<size_t>(upto);
        if (!size_ok || !std::equal(held.begin(), held.begin() + upto, tokens.begin()))
          return "request " + std::to_string(s.id) + " reads window block " + std::to_string(i) + " of another prefix";
      }
    }
    for (const ScheduledRequest& s : plan.requests) {
      std::vector<int32_t> tokens = mirror_.at(s.id).tokens;  // the known tokens, then the draft
      tokens.resize(static_cast<size_t>(s.num_computed_tokens));
      tokens.insert(tokens.end(), s.token_ids.begin(), s.token_ids.end());
      const int32_t end = s.num_computed_tokens + s.num_new_tokens;
      for (int32_t i = s.num_computed_tokens / bs; i * bs < end; ++i) {
        const BlockId b = s.window_block_table[static_cast<size_t>(i)];
        if (b == kNoBlock || sched_->window_pool().ref_count(b) != 1)
          return "request " + std::to_string(s.id) + " writes a released or shared window block";
        window_shadow_[static_cast<size_t>(b)].assign(tokens.begin(), tokens.begin() + std::min((i + 1) * bs, end));
      }
    }
    return "";
  }

  // Appends the step's sampled tokens: the first, then (speculation) each next one while the draft
  // token before it was accepted; a draft token is accepted with probability 0.7.
  std::string postprocess(const StepPlan& plan) {
    for (const ScheduledRequest& s : plan.requests) {
      if (!s.completes_known_tokens || !mirror_.contains(s.id)) continue;
      Mirror& m = mirror_.at(s.id);
      const std::vector<int32_t> draft(s.token_ids.end() - s.num_draft_tokens, s.token_ids.end());
      m.draft.clear();
      bool done = false;
      for (size_t k = 0; k <= draft.size(); ++k) {
        const int32_t num_out = static_cast<int32_t>(m.tokens.size()) - m.num_prompt;
        done = num_out >= m.max_tokens || uniform(0, 15) == 0;
        if (done) break;
        const bool accept = k < draft.size() && uniform(0, 9) < 7;
        const int32_t token = accept ? draft[k] : static_cast<int32_t>(uniform(0, 3));
        m.tokens.push_back(token);
        const bool at_limit = sched_->append_token(s.id, token);
        if (at_limit != (static_cast<int32_t>(m.tokens.size()) >= config().max_model_len))
          return "append_token limit wrong";
        if (sched_->find(s.id)->tokens != m.tokens) return "scheduler tokens differ from the mirror";
        done = at_limit;
        if (std::string e = check("append_token"); !e.empty()) return e;
        if (k < draft.size() && token == draft[k]) ++num_accepted_;
        if (done || k == draft.size() || token != draft[k]) break;
      }
      num_drafted_ += static_cast<int64_t>(draft.size());
      if (done) {
        if (!sched_->finish(s.id)) return "finish() did not know a running request";
        mirror_.erase(s.id);
        if (std::string e = check("finish"); !e.empty()) return e;
      } else if (speculate_ && uniform(0, 2) != 0) {
        m.draft.resize(static_cast<size_t>(uniform(1, 6)));
        for (int32_t& t : m.draft) t = static_cast<int32_t>(uniform(0, 3));
        sched_->set_draft(s.id, m.draft);
      }
    }
    return "";
  }

 public:
  int64_t num_drafted_ = 0;
  int64_t num_accepted_ = 0;

 private:
  std::mt19937_64 rng_;
  bool speculate_ = false;
  std::unique_ptr<Scheduler> sched_;
  std::string description_;
  std::unordered_map<RequestId, Mirror> mirror_;
  std::vector<std::vector<int32_t>> shadow_;         // [num_blocks] the token prefix whose KV each block holds
  std::vector<std::vector<int32_t>> window_shadow_;  // [window pool blocks] the same for the window pool
  std::vector<int32_t> documents_[3];                // shared prompt prefixes, [max_model_len] each
  RequestId next_id_ = 1;
};

// Runs one seed; "" or a reproducer.
std::string run_seed(uint64_t seed, int num_steps, bool window_local = false, bool speculate = false) {
  Harness h(seed, window_local, speculate);
  const std::string where = "seed " + std::to_string(seed) + " (" + h.description() + ")";
  for (int i = 0; i < num_steps; ++i) {
    if (std::string e = h.step(true); !e.empty()) return where + " step " + std::to_string(i) + ": " + e;
  }
  for (int i = 0; h.has_work(); ++i) {  // drain: everything must finish (no livelock)
    if (i > 100000) return where + ": did not drain";
    if (std::string e = h.step(false); !e.empty()) return where + " drain step " + std::to_string(i) + ": " + e;
  }
  if (h.scheduler().pool().num_free_blocks() != h.scheduler().pool().num_blocks()) return where + ": blocks leaked";
  if (window_local && h.scheduler().window_pool().num_free_blocks() != h.scheduler().window_pool().num_blocks())
    return where + ": window blocks leaked";
  return "";
}

TEST(SchedulerRandomTest, InvariantsAndShadowKvHoldUnderRandomOperations) {
  std::vector<uint64_t> seeds;
  if (const char* only = std::getenv("VOSTI_TEST_SEED")) {
    seeds.push_back(std::strtoull(only, nullptr, 10));
  } else {
    for (uint64_t s = 1; s <= 150; ++s) seeds.push_back(s);
  }
  int64_t preemptions = 0, hits = 0;
  for (uint64_t seed : seeds) {
    const std::string e = run_seed(seed, 2000);
    ASSERT_EQ(e, "") << "reproduce with VOSTI_TEST_SEED=" << seed;
  }
  // The sequences must actually exercise preemption and prefix hits.
  for (uint64_t seed : {1ull, 2ull, 3ull, 4ull, 5ull, 6ull, 7ull, 8ull}) {
    Harness h(seed);
    for (int i = 0; i < 2000; ++i) ASSERT_EQ(h.step(true), "");
    preemptions += h.scheduler().stats().num_preemptions;
    hits += h.scheduler().stats().num_prefix_hit_tokens;
  }
  EXPECT_GT(preemptions, 100);
  EXPECT_GT(hits, 100);
}

// Window-local KV (scheduler.h): the same sequences with a random window, with and without full
// layers, a window pool from the least that fits a step to three times that.
TEST(SchedulerRandomTest, WindowLocalKvShadowHoldsUnderRandomOperations) {
  std::vector<uint64_t> seeds;
  if (const char* only = std::getenv("VOSTI_TEST_SEED")) {
    seeds.push_back(std::strtoull(only, nullptr, 10));
  } else {
    for (uint64_t s = 1; s <= 100; ++s) seeds.push_back(s);
  }
  for (uint64_t seed : seeds) {
    const std::string e = run_seed(seed, 1500, /*window_local=*/true);
    ASSERT_EQ(e, "") << "reproduce with VOSTI_TEST_SEED=" << seed;
  }
  int64_t preemptions = 0, hits = 0, released = 0;
  for (uint64_t seed : {1ull, 2ull, 3ull, 4ull, 5ull, 6ull, 7ull, 8ull}) {
    Harness h(seed, true);
    for (int i = 0; i < 1500; ++i) {
      ASSERT_EQ(h.step(true), "");
      for (const RequestState* r : h.scheduler().running()) released += r->window_table.num_released_blocks();
    }
    preemptions += h.scheduler().stats().num_preemptions;
    hits += h.scheduler().stats().num_prefix_hit_tokens;
  }
  EXPECT_GT(preemptions, 100);
  EXPECT_GT(hits, 100);
  EXPECT_GT(released, 1000);
}

// Both at once: verify chunks write window blocks for draft positions, roll-backs truncate the
// window tables too, releases follow only verified positions; the window shadow still reads each
// request's own prefix, and neither pool leaks (run_seed).
TEST(SchedulerRandomTest, SpeculativeDraftsWithWindowLocalKvKeepTheShadowsAndLeakNothing) {
  std::vector<uint64_t> seeds;
  if (const char* only = std::getenv("VOSTI_TEST_SEED")) {
    seeds.push_back(std::strtoull(only, nullptr, 10));
  } else {
    for (uint64_t s = 1; s <= 100; ++s) seeds.push_back(s);
  }
  for (uint64_t seed : seeds) {
    const std::string e = run_seed(seed, 1500, /*window_local=*/true, /*speculate=*/true);
    ASSERT_EQ(e, "") << "reproduce with VOSTI_TEST_SEED=" << seed;
  }
  int64_t drafted = 0, accepted = 0, released = 0;
  for (uint64_t seed : {1ull, 2ull, 3ull, 4ull}) {
    Harness h(seed, /*window_local=*/true, /*speculate=*/true);
    for (int i = 0; i < 1500; ++i) {
      ASSERT_EQ(h.step(true), "");
      for (const RequestState* r : h.scheduler().running()) released += r->window_table.num_released_blocks();
    }
    drafted += h.num_drafted_;
    accepted += h.num_accepted_;
  }
  EXPECT_GT(accepted, 100);
  EXPECT_GT(drafted - accepted, 100);
  EXPECT_GT(released, 1000);
}

TEST(SchedulerRandomTest, SpeculativeDraftsKeepTheInvariantsAndTheShadowKv) {
  std::vector<uint64_t> seeds;
  if (const char* only = std::getenv("VOSTI_TEST_SEED")) {
    seeds.push_back(std::strtoull(only, nullptr, 10));
  } else {
    for (uint64_t s = 1; s <= 150; ++s) seeds.push_back(s);
  }
  for (uint64_t seed : seeds) {
    const std::string e = run_seed(seed, 2000, /*window_local=*/false, /*speculate=*/true);
    ASSERT_EQ(e, "") << "reproduce with VOSTI_TEST_SEED=" << seed;
  }
  // The sequences must actually verify drafts, accept some and reject some, and still preempt.
  int64_t drafted = 0, accepted = 0, preemptions = 0;
  for (uint64_t seed : {1ull, 2ull, 3ull, 4ull}) {
    Harness h(seed, /*window_local=*/false, /*speculate=*/true);
    for (int i = 0; i < 2000; ++i) ASSERT_EQ(h.step(true), "");
    drafted += h.num_drafted_;
    accepted += h.num_accepted_;
    preemptions += h.scheduler().stats().num_preemptions;
  }
  EXPECT_GT(accepted, 100);
  EXPECT_GT(drafted - accepted, 100);
  EXPECT_GT(preemptions, 10);
}

}  // namespace
}  // namespace vosti
