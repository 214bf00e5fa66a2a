// Lockstep refinement test: drives the real Scheduler (and its BlockPool) with long random
// operation sequences -- add, step under random budgets and pool sizes, abort (also
// mid-step), finish, preemption, prefix cache on/off, colliding hashes -- and replays
// every change it makes as transitions of the executable Coq model
// (verify/refinement/engine_model.h). After every operation it checks that
//   1. every C++ change was a legal model transition (the guards of step_*),
//   2. the abstraction relation holds: live requests have the same tokens,
//      num_computed_tokens and block tables; every block has the same ref count and
//      the same cached / not-cached status,
//   3. the model invariant `inv` of the Coq proof holds, including every emitted logit
//      being F_D(prompt ++ previous outputs), computed through the kernel contract from
//      the model's physical KV memory,
//   4. the C++ check_invariants() passes.
// Forward batches interleave the plan's rows at random and add padding rows.
// Speculative decoding: before a step, running requests get random drafts (random length, a
// random number of leading tokens equal to what the model's sampler will emit, then a wrong
// one), so verify chunks accept a random prefix; the model's step_draft / verify / advance /
// step_truncate must accept every C++ change (Scheduler::set_draft, append_token,
// BlockPool::truncate). With window-local KV too: a roll-back truncates the window table
// (step_window_truncate), and a verified draft position may release window entries at once.
// Window-local KV: about a third of the sequences run a scheduler with a window pool (random
// window); window block b is the model's block F + b (F full-pool blocks). Admissions' window
// tables replay as step_window_hole / _hit / _allocate, on_step_done's window registrations and
// release_leading as step_window_register / _release; rows read the window view; window tables,
// window-pool ref counts and cached status are part of the abstraction relation.
// A failure prints the seed; rerun one with VOSTI_TEST_SEED=<seed>.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "core/check.h"
#include "sched/scheduler.h"
#include "tests/sched/random_scheduler_config.h"
#include "verify/refinement/engine_model.h"

namespace vosti {
namespace {

using model::EngineModel;
using model::Row;

uint64_t mix(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// Sample_D of the model: a pure function of (logits, seed, output index, history length).
model::Token sample(const model::Value& lg, uint64_t seed, int32_t i, const std::vector<model::Token>& history) {
  if (!lg.valid) return -1;  // never a real token: the invariant check reports the bad logits
  return static_cast<model::Token>(
      mix(seed ^ mix(static_cast<uint64_t>(lg.prefix)) ^ mix(static_cast<uint64_t>(i) + history.size())) % 4);
}

class Lockstep {
 public:
  explicit Lockstep(uint64_t seed) : rng_(seed) {
    test_support::RandomSchedulerConfig random = test_support::random_scheduler_config(rng_);
    SchedulerConfig& c = random.config;
    description_ = random.description;
    if (uniform(0, 2) == 0) {  // window-local KV: a window pool of its own, just large enough or a little more
      c.window.window = static_cast<int32_t>(uniform(1, 3L * c.pool.block_size + 2));
      const int64_t reach =
          std::min<int64_t>(c.max_model_len, c.pool.block_size + c.window.window - 2 + c.max_num_batched_tokens);
      c.window.num_blocks = (reach + c.pool.block_size - 1) / c.pool.block_size + uniform(0, 3);
      description_ +=
          " window=" + std::to_string(c.window.window) + " window_blocks=" + std::to_string(c.window.num_blocks);
    }
    Result<Scheduler> s = Scheduler::create(c);
    VOSTI_CHECK(s.ok(), s.status().to_string());
    sched_ = std::make_unique<Scheduler>(std::move(s).value());
    const BlockPoolConfig pool = c.pool;
    auto hash = [pool](const std::vector<model::Token>& pre) {  // the chain key of a full-block prefix
      BlockKey key = kRootBlockKey;
      for (size_t i = 0; i + static_cast<size_t>(pool.block_size) <= pre.size();
           i += static_cast<size_t>(pool.block_size)) {
        key = pool.hash_fn(key, std::span<const int32_t>(pre.data() + i, static_cast<size_t>(pool.block_size)),
                           pool.identity_seed);
      }
      return key;
    };
    // The model has one pool: full blocks 0 .. F-1, then the window pool's blocks as F + b.
    num_full_ = static_cast<int32_t>(c.pool.num_blocks);
    model_ = std::make_unique<EngineModel>(c.pool.block_size, num_full_ + static_cast<int32_t>(c.window.num_blocks),
                                           hash, &sample, c.window.window);
    for (auto& doc : documents_) {
      doc.resize(static_cast<size_t>(c.max_model_len));
      for (int32_t& t : doc) t = static_cast<int32_t>(uniform(0, 3));
    }
  }

  const std::string& description() const { return description_; }
  struct SpeculationStats {             // speculative decoding and window-local KV
    int64_t num_draft_tokens = 0;       // draft rows computed
    int64_t num_accepted_tokens = 0;    // tokens emitted after an accepted draft
    int64_t num_roll_backs = 0;         // truncations that freed blocks
    int64_t num_window_sequences = 0;   // sequences with window-local KV
    int64_t num_window_releases = 0;    // window entries released (step_window_release)
    int64_t num_window_hits = 0;        // window-pool prefix hits (step_window_hit)
    int64_t num_window_holes = 0;       // a hit's leading entries no window reads (step_window_hole)
    int64_t num_window_drafts = 0;      // draft rows computed with window-local KV
    int64_t num_window_roll_backs = 0;  // window-table truncations (step_window_truncate)
  };
  const SpeculationStats& speculation_stats() const { return stats_; }
  bool has_work() const { return sched_->has_work(); }
  const Scheduler& scheduler() const { return *sched_; }

  // One engine step with random arrivals and aborts around it; "" or what broke.
  std::string step(bool allow_arrivals) {
    if (allow_arrivals && uniform(0, 2) == 0) {
      for (int64_t k = uniform(1, 2);
           k > 0 && static_cast<int64_t>(live_.size()) < 3L * sched_->config().max_num_seqs + 2; --k) {
        if (std::string e = add_random(); !e.empty()) return e;
      }
    }
    if (!live_.empty() && uniform(0, 19) == 0) {
      if (std::string e = abort_random(); !e.empty()) return "abort: " + e;
    }
    propose_drafts();
    const StepPlan plan = sched_->schedule();
    if (std::string e = replay_schedule(plan); !e.empty()) return "schedule: " + e;
    for (const ScheduledRequest& s : plan.requests) {  // the drafts this step verifies
      std::vector<model::Token> d(s.token_ids.end() - s.num_draft_tokens, s.token_ids.end());
      if (std::string e = model_->step_draft(s.id, std::move(d)); !e.empty()) return "draft: " + e;
    }
    stats_.num_draft_tokens += plan.num_draft_tokens;
    if (sched_->window_local()) stats_.num_window_drafts += plan.num_draft_tokens;
    std::vector<model::Emission> emitted;
    if (std::string e = model_->step_forward(random_batch(plan), &emitted); !e.empty()) return "forward: " + e;
    if (std::string e = check_emissions(plan, emitted); !e.empty()) return "forward: " + e;
    if (!live_.empty() && uniform(0, 29) == 0) {
      if (std::string e = abort_random(); !e.empty()) return "mid-step abort: " + e;
    }
    sched_->on_step_done(plan);
    if (std::string e = replay_registrations(); !e.empty()) return "on_step_done: " + e;
    if (std::string e = postprocess(emitted); !e.empty()) return e;
    // Checked once the C++ side has appended the tokens the model sampled in step_forward.
    return check("the step");
  }

 private:
  int64_t uniform(int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng_); }
  int32_t pick(std::initializer_list<int32_t> v) {
    return *(v.begin() + uniform(0, static_cast<int64_t>(v.size()) - 1));
  }
  int32_t bs() const { return sched_->config().pool.block_size; }

  // Random drafts for about half the running requests: k tokens, of which the first a are what
  // the model's sampler will emit (so they are accepted) and the next is not.
  void propose_drafts() {
    for (const RequestState* r : sched_->running()) {
      if (uniform(0, 1) == 0) continue;
      const model::Request& m = model_->state().requests.at(r->id);
      std::vector<model::Token> T = m.tokens();
      const int64_t k = uniform(1, 6);
      const int64_t a = uniform(0, k);
      std::vector<int32_t> d;
      for (int64_t i = 0; i < k; ++i) {
        const model::Token e = sample(model_->F_D(T), mix(r->id), static_cast<int32_t>(m.outputs.size() + i), T);
        const model::Token t = i < a    ? e
                               : i == a ? static_cast<model::Token>((e + uniform(1, 3)) % 4)
                                        : static_cast<model::Token>(uniform(0, 3));
        d.push_back(t);
        T.push_back(t);
      }
      sched_->set_draft(r->id, std::move(d));
    }
  }

  // A roll-back (BlockPool::truncate) is the model's step_truncate to the C++ table's length, and
  // step_window_truncate to the C++ window table's.
  std::string replay_truncation(RequestId id) {
    const RequestState* r = sched_->find(id);
    const model::Request& m = model_->state().requests.at(id);
    if (r->window_table.blocks().size() < m.window_table.size()) {
      ++stats_.num_window_roll_backs;
      const int32_t n = r->window_table.num_blocks();
      if (std::string e = model_->step_window_truncate(id, n); !e.empty()) return e;
    }
    if (r->block_table.blocks().size() >= m.block_table.size()) return "";
    ++stats_.num_roll_backs;
    return model_->step_truncate(id, r->block_table.num_blocks());
  }

  // How many leading entries of the model's window table the C++ window table still has (a
  // released entry is kNoBlock in C++).
  size_t window_common_prefix(const model::Request& m, const std::vector<BlockId>& table) const {
    size_t j = 0;
    for (; j < m.window_table.size() && j < table.size(); ++j) {
      const bool released = static_cast<int32_t>(j) < m.window_released;
      if (released ? table[j] != kNoBlock : num_full_ + table[j] != m.window_table[j]) break;
    }
    return j;
  }

  std::string add_random() {
    const RequestId id = next_id_++;
    const auto& doc = documents_[static_cast<size_t>(uniform(0, 2))];
    const int64_t len = uniform(1, sched_->config().max_model_len);
    std::vector<int32_t> prompt(doc.begin(), doc.begin() + uniform(0, len));
    while (static_cast<int64_t>(prompt.size()) < len) prompt.push_back(static_cast<int32_t>(uniform(0, 3)));
    const Status s = sched_->add_request(id, prompt, static_cast<int32_t>(uniform(0, 2)), uniform(0, 4) != 0);
    if (!s.ok()) return "add_request refused a valid request: " + s.to_string();
    if (std::string e = model_->step_arrive(id, prompt, mix(id)); !e.empty()) return e;
    live_.insert(id);
    max_tokens_[id] = static_cast<int32_t>(uniform(0, 12));
    return check("add_request");
  }

  std::string abort_random() {
    auto it = live_.begin();
    std::advance(it, uniform(0, static_cast<int64_t>(live_.size()) - 1));
    const RequestId id = *it;
    if (!sched_->finish(id)) return "finish() did not know a live request";
    live_.erase(it);
    return model_->step_release(id, true);
  }

  // Replays schedule(): preemptions release, admissions hit then allocate, running
  // requests allocate; then any block the pool registered.
  std::string replay_schedule(const StepPlan& plan) {
    for (RequestId id : plan.preempted) {
      if (std::string e = model_->step_release(id, false); !e.empty()) return e;
    }
    for (const ScheduledRequest& s : plan.requests) {
      const model::Request& m = model_->state().requests.at(s.id);
      // A draft rolled back at schedule() (no token appended after a verify step) truncates
      // first: the model truncates to the longest common prefix, then allocates as below.
      size_t common = 0;
      while (common < m.block_table.size() && common < s.block_table.size() &&
             m.block_table[common] == s.block_table[common]) {
        ++common;
      }
      if (common < m.block_table.size()) {
        ++stats_.num_roll_backs;
        if (std::string e = model_->step_truncate(s.id, static_cast<int32_t>(common)); !e.empty()) return e;
      }
      if (const size_t wcommon = window_common_prefix(m, s.window_block_table); wcommon < m.window_table.size()) {
        ++stats_.num_window_roll_backs;
        if (std::string e = model_->step_window_truncate(s.id, static_cast<int32_t>(wcommon)); !e.empty())
          return "window table: " + e;
      }
      const std::vector<BlockId> before = m.block_table;
      if (before.size() > s.block_table.size() || !std::equal(before.begin(), before.end(), s.block_table.begin())) {
        return "request " + std::to_string(s.id) + "'s block table was not extended append-only";
      }
      const size_t num_hits = s.newly_admitted ? static_cast<size_t>(s.num_cached_tokens / bs()) : 0;
      for (size_t i = before.size(); i < s.block_table.size(); ++i) {
        const std::string e =
            i < num_hits ? model_->step_hit(s.id, s.block_table[i]) : model_->step_allocate(s.id, s.block_table[i]);
        if (!e.empty()) return e;
      }
      // The window table: a hit's leading holes, its window-pool hits, then fresh blocks.
      const std::vector<BlockId>& wbefore = model_->state().requests.at(s.id).window_table;
      for (size_t i = wbefore.size(); i < s.window_block_table.size(); ++i) {
        const BlockId b = s.window_block_table[i];
        if (b == kNoBlock) {
          ++stats_.num_window_holes;
        } else if (i < num_hits) {
          ++stats_.num_window_hits;
        }
        const std::string e = b == kNoBlock  ? model_->step_window_hole(s.id)
                              : i < num_hits ? model_->step_window_hit(s.id, num_full_ + b)
                                             : model_->step_window_allocate(s.id, num_full_ + b);
        if (!e.empty()) return "window table: " + e;
      }
    }
    return replay_registrations();
  }

  // What a row's window layers read (Coq window_view), from the C++ window table: a released
  // entry (kNoBlock) keeps the block id the model's table had there.
  std::vector<BlockId> window_view(const ScheduledRequest& s) const {
    if (!sched_->window_local()) return s.block_table;
    const std::vector<BlockId>& m = model_->state().requests.at(s.id).window_table;
    std::vector<BlockId> out;
    for (size_t j = 0; j < s.window_block_table.size(); ++j) {
      const BlockId b = s.window_block_table[j];
      out.push_back(b != kNoBlock ? num_full_ + b : j < m.size() ? m[j] : kNoBlock);
    }
    return out;
  }

  // Every block the pool newly caches is a model step_register of its holder's block j.
  std::string replay_registrations() {
    const BlockPool& pool = sched_->pool();
    for (BlockId b = 0; b < pool.num_blocks(); ++b) {
      if (!pool.is_cached(b) || model_->state().cached_prefix[static_cast<size_t>(b)].has_value()) continue;
      bool found = false;
      for (RequestId id : live_) {
        const auto& table = sched_->find(id)->block_table.blocks();
        auto it = std::find(table.begin(), table.end(), b);
        if (it == table.end()) continue;
        if (std::string e = model_->step_register(id, static_cast<int32_t>(it - table.begin()), b); !e.empty())
          return e;
        found = true;
        break;
      }
      if (!found) return "block " + std::to_string(b) + " became cached without a holder";
    }
    if (!sched_->window_local()) return "";
    // Window blocks registered since (on_step_done registers before it releases, so the holder
    // is found in the model's table), then the window releases (release_leading).
    const BlockPool& wpool = sched_->window_pool();
    for (BlockId b = 0; b < wpool.num_blocks(); ++b) {
      if (!wpool.is_cached(b) || model_->state().cached_prefix[static_cast<size_t>(num_full_ + b)].has_value())
        continue;
      bool found = false;
      for (RequestId id : live_) {
        const model::Request& m = model_->state().requests.at(id);
        for (size_t j = static_cast<size_t>(m.window_released); j < m.window_table.size() && !found; ++j) {
          if (m.window_table[j] != num_full_ + b) continue;
          if (std::string e = model_->step_window_register(id, static_cast<int32_t>(j), num_full_ + b); !e.empty())
            return e;
          found = true;
        }
        if (found) break;
      }
      if (!found) return "window block " + std::to_string(b) + " became cached without a holder";
    }
    for (RequestId id : live_) {
      const int32_t released = sched_->find(id)->window_table.num_released_blocks();
      while (model_->state().requests.at(id).window_released < released) {
        if (std::string e = model_->step_window_release(id); !e.empty()) return e;
        ++stats_.num_window_releases;
      }
    }
    return "";
  }

  // The plan's rows, interleaved at random across requests (each request's own rows stay
  // in position order) with random padding rows.
  std::vector<Row> random_batch(const StepPlan& plan) {
    std::vector<size_t> owners;
    for (size_t i = 0; i < plan.requests.size(); ++i)
      owners.insert(owners.end(), static_cast<size_t>(plan.requests[i].num_new_tokens), i);
    std::shuffle(owners.begin(), owners.end(), rng_);
    std::vector<int32_t> next(plan.requests.size(), 0);
    std::vector<Row> batch;
    for (size_t o : owners) {
      if (uniform(0, 7) == 0) batch.push_back(Row{0, true, static_cast<int32_t>(uniform(0, 63)), 0, {}, {}});
      const ScheduledRequest& s = plan.requests[o];
      const int32_t k = next[o]++;
      batch.push_back(Row{s.id, false, s.num_computed_tokens + k, s.token_ids[static_cast<size_t>(k)], s.block_table,
                          window_view(s)});
    }
    return batch;
  }

  std::string check_emissions(const StepPlan& plan, const std::vector<model::Emission>& emitted) const {
    std::set<RequestId> want, got;
    for (const ScheduledRequest& s : plan.requests) {
      if (s.completes_known_tokens) want.insert(s.id);
    }
    for (const auto& e : emitted) got.insert(e.id);
    return want == got ? "" : "the model emitted for other requests than completes_known_tokens";
  }

  std::string postprocess(const std::vector<model::Emission>& emitted) {
    std::unordered_map<RequestId, int32_t> num_emitted;  // this step's tokens per request so far
    for (const model::Emission& em : emitted) {
      if (!live_.contains(em.id)) continue;  // aborted mid-step
      const RequestState* r = sched_->find(em.id);
      const int32_t num_out = r->num_output_tokens();
      bool done = num_out >= max_tokens_[em.id] || uniform(0, 15) == 0;
      if (!done) {
        if (num_emitted[em.id]++ > 0) ++stats_.num_accepted_tokens;  // follows an accepted draft
        done = sched_->append_token(em.id, em.token);
        // append_token registers verified full blocks and, at a rejection, truncates.
        if (std::string e = replay_registrations(); !e.empty()) return "append_token: " + e;
        if (std::string e = replay_truncation(em.id); !e.empty()) return "append_token: " + e;
      }
      if (done) {
        if (!sched_->finish(em.id)) return "finish() did not know a running request";
        live_.erase(em.id);
        if (std::string e = model_->step_release(em.id, true); !e.empty()) return e;
      }
    }
    return "";
  }

  // The abstraction relation, the model invariant, then the C++ invariants (last, so a
  // bug shows as what the model sees).
  std::string check(const char* after) const {
    const std::string at = std::string("after ") + after + ": ";
    if (static_cast<size_t>(sched_->num_running() + sched_->num_waiting()) != live_.size())
      return at + "live request count";
    for (const auto& [id, m] : model_->state().requests) {
      if (m.finished == live_.contains(id))
        return at + "request " + std::to_string(id) + " live in one and not the other";
      if (m.finished) continue;
      const RequestState* r = sched_->find(id);
      if (r == nullptr) return at + "request " + std::to_string(id) + " unknown to the scheduler";
      if (r->tokens != m.tokens()) return at + "tokens of " + std::to_string(id) + " differ";
      if (r->num_computed_tokens != m.num_computed) return at + "num_computed of " + std::to_string(id) + " differs";
      if (r->block_table.blocks() != m.block_table) return at + "block table of " + std::to_string(id) + " differs";
      const std::vector<BlockId>& w = r->window_table.blocks();
      if (w.size() != m.window_table.size() || r->window_table.num_released_blocks() != m.window_released)
        return at + "window table of " + std::to_string(id) + " differs";
      for (size_t j = static_cast<size_t>(m.window_released); j < w.size(); ++j) {
        if (num_full_ + w[j] != m.window_table[j]) return at + "window table of " + std::to_string(id) + " differs";
      }
    }
    if (sched_->window_local()) {
      const BlockPool& wpool = sched_->window_pool();
      for (BlockId b = 0; b < wpool.num_blocks(); ++b) {
        const auto mb = static_cast<size_t>(num_full_ + b);
        if (wpool.ref_count(b) != model_->state().ref_count[mb])
          return at + "ref count of window block " + std::to_string(b);
        if (wpool.is_cached(b) != model_->state().cached_prefix[mb].has_value())
          return at + "cached status of window block " + std::to_string(b);
      }
    }
    const BlockPool& pool = sched_->pool();
    for (BlockId b = 0; b < pool.num_blocks(); ++b) {
      if (pool.ref_count(b) != model_->state().ref_count[static_cast<size_t>(b)])
        return at + "ref count of block " + std::to_string(b);
      if (pool.is_cached(b) != model_->state().cached_prefix[static_cast<size_t>(b)].has_value()) {
        return at + "cached status of block " + std::to_string(b);
      }
    }
    if (std::string e = model_->check_inv(); !e.empty()) return at + e;
    // VOSTI_REFINEMENT_MODEL_ONLY=1 (cpp_mutants.py): leave out the C++ self-checks, so a
    // planted bug must be caught by the model alone.
    static const bool model_only = std::getenv("VOSTI_REFINEMENT_MODEL_ONLY") != nullptr;
    if (!model_only) {
      if (Status s = sched_->check_invariants(); !s.ok()) return at + s.to_string();
    }
    return "";
  }

  std::mt19937_64 rng_;
  std::unique_ptr<Scheduler> sched_;
  std::unique_ptr<EngineModel> model_;
  std::string description_;
  std::set<RequestId> live_;
  std::unordered_map<RequestId, int32_t> max_tokens_;
  SpeculationStats stats_;
  std::vector<int32_t> documents_[3];
  int32_t num_full_ = 0;  // full-pool blocks: the model's ids of window block b is num_full_ + b
  RequestId next_id_ = 1;
};

std::string run_seed(uint64_t seed, int num_steps, SchedulerStats* stats, Lockstep::SpeculationStats* spec) {
  Lockstep h(seed);
  const std::string where = "seed " + std::to_string(seed) + " (" + h.description() + ")";
  for (int i = 0; i < num_steps; ++i) {
    if (std::string e = h.step(true); !e.empty()) return where + " step " + std::to_string(i) + ": " + e;
  }
  for (int i = 0; h.has_work(); ++i) {
    if (i > 100000) return where + ": did not drain";
    if (std::string e = h.step(false); !e.empty()) return where + " drain step " + std::to_string(i) + ": " + e;
  }
  if (stats != nullptr) {
    stats->num_preemptions += h.scheduler().stats().num_preemptions;
    stats->num_prefix_hit_tokens += h.scheduler().stats().num_prefix_hit_tokens;
    stats->num_steps += h.scheduler().stats().num_steps;
  }
  if (spec != nullptr) {
    const Lockstep::SpeculationStats& h_stats = h.speculation_stats();
    spec->num_draft_tokens += h_stats.num_draft_tokens;
    spec->num_accepted_tokens += h_stats.num_accepted_tokens;
    spec->num_roll_backs += h_stats.num_roll_backs;
    spec->num_window_sequences += h.scheduler().window_local() ? 1 : 0;
    spec->num_window_releases += h_stats.num_window_releases;
    spec->num_window_hits += h_stats.num_window_hits;
    spec->num_window_holes += h_stats.num_window_holes;
    spec->num_window_drafts += h_stats.num_window_drafts;
    spec->num_window_roll_backs += h_stats.num_window_roll_backs;
  }
  return "";
}

TEST(RefinementTest, SchedulerAndBlockPoolRefineTheProvenModel) {
  std::vector<uint64_t> seeds;
  if (const char* only = std::getenv("VOSTI_TEST_SEED")) {
    seeds.push_back(std::strtoull(only, nullptr, 10));
  } else {
    // VOSTI_REFINEMENT_SEEDS=<n>: fewer sequences (verify/refinement/cpp_mutants.py).
    const char* n = std::getenv("VOSTI_REFINEMENT_SEEDS");
    const uint64_t count = n != nullptr ? std::strtoull(n, nullptr, 10) : 1000;
    for (uint64_t s = 1; s <= count; ++s) seeds.push_back(s);
  }
  SchedulerStats stats;
  Lockstep::SpeculationStats spec;
  for (uint64_t seed : seeds) {
    const std::string e = run_seed(seed, 300, &stats, &spec);
    ASSERT_EQ(e, "") << "reproduce with VOSTI_TEST_SEED=" << seed;
  }
  // The sequences really exercised preemption and prefix hits.
  if (seeds.size() >= 1000) {
    EXPECT_GT(stats.num_preemptions, 1000);
    EXPECT_GT(stats.num_prefix_hit_tokens, 1000);
    // ... and speculative verify chunks with accepted drafts and roll-backs.
    EXPECT_GT(spec.num_draft_tokens, 1000);
    EXPECT_GT(spec.num_accepted_tokens, 1000);
    EXPECT_GT(spec.num_roll_backs, 1000);
    // ... and window-local KV: releases, window-pool hits and the holes before them.
    EXPECT_GT(spec.num_window_sequences, 200);
    EXPECT_GT(spec.num_window_releases, 1000);
    EXPECT_GT(spec.num_window_hits, 100);
    EXPECT_GT(spec.num_window_holes, 100);
    // ... and speculation with window-local KV: draft rows through window tables, rolled back.
    EXPECT_GT(spec.num_window_drafts, 300);
    EXPECT_GT(spec.num_window_roll_backs, 300);
  }
  std::printf(
      "refinement: %zu sequences, %lld steps, %lld preemptions, %lld prefix-hit tokens, %lld draft tokens, "
      "%lld accepted, %lld roll-backs; %lld with window-local KV: %lld window releases, %lld window hits, "
      "%lld holes, %lld draft tokens, %lld window roll-backs\n",
      seeds.size(), static_cast<long long>(stats.num_steps), static_cast<long long>(stats.num_preemptions),
      static_cast<long long>(stats.num_prefix_hit_tokens), static_cast<long long>(spec.num_draft_tokens),
      static_cast<long long>(spec.num_accepted_tokens), static_cast<long long>(spec.num_roll_backs),
      static_cast<long long>(spec.num_window_sequences), static_cast<long long>(spec.num_window_releases),
      static_cast<long long>(spec.num_window_hits), static_cast<long long>(spec.num_window_holes),
      static_cast<long long>(spec.num_window_drafts), static_cast<long long>(spec.num_window_roll_backs));
}

}  // namespace
}  // namespace vosti
