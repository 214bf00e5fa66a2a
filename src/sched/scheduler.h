// Scheduler: continuous batching with no prefill/decode phases (vLLM v1's model) over a
// BlockPool. Each step hands every scheduled request some number of its not yet
// computed tokens, under a token budget and a sequence cap:
//   1. running requests, in (priority, arrival) order, each get min(tokens left, budget
//      left, max_model_len - num_computed) tokens -- chunked prefill at any chunk size,
//      prefills mixed with decodes. When one cannot get its blocks, the lowest-priority,
//      latest-arrived running request is preempted by recomputation (blocks released,
//      num_computed_tokens = 0, back to the waiting queue; it keeps its arrival number, so
//      it re-enters at the front of its priority class), repeatedly, until it fits or it is
//      the victim itself.
//      With window-local KV (SchedulerConfig::window) a request also holds a window table in
//      a pool of its own, for the sliding-window layers: a step needs blocks in both pools,
//      and after each step the window table releases the blocks no later query can read.
//   2. if nothing was preempted, waiting requests in (priority, arrival) order are
//      admitted while sequences, budget and blocks allow (head-of-line: the first that
//      does not fit stops admission). On admission the longest prefix-cache hit in full
//      blocks is reused, always leaving at least the last token to compute.
// The engine executes the StepPlan, then calls on_step_done(plan), then append_token()
// for each sampled token, and finish() for requests that stopped or were aborted.
//
// Speculative decoding: set_draft() gives a running request draft tokens after its known ones.
// A step that schedules all its known tokens appends as many draft tokens as fit the budget, the
// context (every draft row's sample is a position < max_model_len) and the free blocks (drafts are
// dropped before anything is preempted for them). on_step_done() counts only the known tokens as
// computed; append_token() then counts a draft position computed iff the appended token equals
// it, and at the first difference rolls the rest back: the table keeps blocks_for(computed)
// blocks, the others are freed. Only computed positions are ever registered in the prefix cache,
// so no cached block holds an unverified token.
// With window-local KV the window table follows the same rule: a window block is released only
// once the positions that push it out of every window are verified (on_step_done releases up to
// the known tokens, append_token one accepted draft position at a time), and a roll-back truncates
// the window table to blocks_for(computed) as well (the blocks it drops held draft positions only,
// private and never registered). Once a draft is settled (rejected, or accepted to its end) both
// tables, both pools and the prefix cache are what plain decoding holds at that num_computed_tokens
// (up to which physical blocks they name).
//
// Invariants (check_invariants): every request is in exactly one of the running list
// (sorted by (priority, arrival), at most max_num_seqs) or the waiting queue; positions
// scheduled never reach max_model_len; the pool's invariants hold against the tables of
// all requests; every hashed block's key chains over the owner's tokens.
// Thread safety: none. The engine drives it from its step thread.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "cache/block_pool.h"
#include "core/status.h"
#include "sched/request_state.h"
#include "sched/step_plan.h"

namespace vosti {

// Window-local KV memory (docs/SPEC.md section 4, the hybrid KV cache): the sliding-window
// layers' KV lives in a pool of its own, and each request keeps in its window table only the
// blocks that a query at or after its next position can read.
struct WindowKvConfig {
  int32_t window = 0;       // 0: off (every layer in `pool`); > 0: positions a window layer reads (its largest window)
  int64_t num_blocks = 0;   // the window pool's blocks (> 0 when window > 0)
  bool full_layers = true;  // false: every layer is a window layer; `pool` then holds nothing
};

struct SchedulerConfig {
  BlockPoolConfig pool;                  // block size, num blocks, prefix caching, seeds
  WindowKvConfig window;                 // window-local KV (off by default)
  int32_t max_num_seqs = 64;             // running requests at most
  int32_t max_num_batched_tokens = 512;  // tokens per step at most
  int32_t max_model_len = 0;             // > 0; cdiv(max_model_len, block_size) <= num_blocks
};

struct SchedulerStats {
  int64_t num_preemptions = 0;
  int64_t num_prefix_query_tokens = 0;
  int64_t num_prefix_hit_tokens = 0;
  int64_t num_steps = 0;  // non-empty plans
};

class Scheduler {
 public:
  // Validates the config (so that any single request fits in the pool) and builds the pool.
  static Result<Scheduler> create(const SchedulerConfig& config);

  // Queues a request. INVALID_ARGUMENT for a duplicate id, an empty prompt, or a prompt
  // longer than max_model_len; the scheduler is then unchanged.
  Status add_request(RequestId id, std::vector<int32_t> prompt, int32_t priority = 0, bool use_prefix_cache = true);

  // Decides the next step (may preempt running requests and admit waiting ones).
  StepPlan schedule();

  // Marks the plan's tokens computed and registers newly full blocks in the prefix
  // cache. Requests finished since schedule() are skipped. REQUIRES: plan is the latest
  // schedule() result and no schedule() ran since.
  void on_step_done(const StepPlan& plan);

  // Appends a sampled token. Returns true when the request has reached max_model_len
  // tokens: the engine must then finish it (reason length). If the last step computed draft
  // tokens, the token's position is computed when it equals the draft token there; otherwise the
  // remaining draft positions are rolled back (see above). Clears the request's draft.
  // REQUIRES: the request is running and all its known tokens are computed.
  bool append_token(RequestId id, int32_t token);

  // Proposes draft tokens to follow the request's known tokens in its next step (speculative
  // decoding); replaces an earlier draft. Ignored for an unknown or not running request.
  void set_draft(RequestId id, std::vector<int32_t> draft);

  // Removes a finished or aborted request (waiting or running) and releases its blocks.
  // Returns false for an unknown id.
  bool finish(RequestId id);

  // Empties the prefix cache (BlockPool::reset_prefix_cache): requests admitted afterwards
  // compute every token no running request has shared with them. Returns the entries dropped.
  int64_t reset_prefix_cache() { return pool_.reset_prefix_cache(); }

  const RequestState* find(RequestId id) const;
  bool has_work() const { return !requests_.empty(); }
  int32_t num_running() const { return static_cast<int32_t>(running_.size()); }
  int32_t num_waiting() const { return static_cast<int32_t>(waiting_.size()); }
  const std::vector<RequestState*>& running() const { return running_; }  // (priority, arrival) order
  const BlockPool& pool() const { return pool_; }
  bool window_local() const { return window_pool_.has_value(); }
  const BlockPool& window_pool() const { return *window_pool_; }  // REQUIRES: window_local()
  const SchedulerConfig& config() const { return config_; }
  const SchedulerStats& stats() const { return stats_; }

  // Checks every invariant above, including the pool's against all tables.
  Status check_invariants() const;

 private:
  using OrderKey = std::pair<int32_t, uint64_t>;  // (priority, arrival): smaller runs first

  Scheduler(const SchedulerConfig& config, BlockPool pool, std::optional<BlockPool> window_pool);
  static OrderKey order_key(const RequestState& r) { return {r.priority, r.arrival}; }
  RequestState& state(RequestId id);
  int32_t tokens_to_schedule(const RequestState& r, int32_t num_computed, int32_t budget) const;
  int32_t drafts_to_schedule(const RequestState& r, int32_t num_computed, int32_t num_new, int32_t budget) const;
  void roll_back_draft(RequestState& r);
  void settle_computed(RequestState& r);
  bool schedule_running(StepPlan& plan, int32_t& budget);
  // Grows r's tables (both pools) to num_tokens positions, sharing the matches first; changes
  // nothing and returns false when either pool is short.
  bool allocate(RequestState& r, const PrefixMatch& full, const PrefixMatch& window, int64_t num_tokens);
  void release(RequestState& r);
  void schedule_waiting(StepPlan& plan, int32_t& budget);
  bool try_admit(RequestState& r, StepPlan& plan, int32_t& budget);
  void preempt(RequestState& victim, StepPlan& plan);
  void insert_running(RequestState* r);
  void add_to_plan(StepPlan& plan, const RequestState& r, int32_t num_new, int32_t num_draft, bool admitted,
                   int32_t num_cached);
  Status check_request(const RequestState& r) const;
  Status check_table(const RequestState& r, const BlockTable& t, const BlockPool& pool, const std::string& name) const;

  SchedulerConfig config_;
  BlockPool pool_;
  std::optional<BlockPool> window_pool_;                                   // window-local KV: the window layers' pool
  std::unordered_map<RequestId, std::unique_ptr<RequestState>> requests_;  // all live requests
  std::vector<RequestState*> running_;                                     // sorted by order_key
  std::map<OrderKey, RequestState*> waiting_;                              // waiting and preempted, by order_key
  uint64_t next_arrival_ = 0;
  SchedulerStats stats_;
};

}  // namespace vosti
