#include "sched/scheduler.h"

#include <algorithm>
#include <string>

namespace vosti {
namespace {

const PrefixMatch kNoMatch;

std::string req(RequestId id) { return "request " + std::to_string(id); }

}  // namespace

Result<Scheduler> Scheduler::create(const SchedulerConfig& config) {
  VOSTI_ASSIGN_OR_RETURN(BlockPool pool, BlockPool::create(config.pool));
  if (config.max_num_seqs <= 0) return invalid_argument("scheduler: max_num_seqs must be > 0");
  if (config.max_num_batched_tokens <= 0) return invalid_argument("scheduler: max_num_batched_tokens must be > 0");
  if (config.max_model_len <= 0) return invalid_argument("scheduler: max_model_len must be > 0");
  std::optional<BlockPool> window_pool;
  if (config.window.window > 0) {
    BlockPoolConfig wc = config.pool;
    wc.num_blocks = config.window.num_blocks;
    VOSTI_ASSIGN_OR_RETURN(BlockPool w, BlockPool::create(wc));
    // The most a window table holds: a step of n new tokens from any c needs blocks
    // first_window_block(c) .. cdiv(c + n) - 1, at most cdiv(block_size - 1 + window - 1 + n).
    const int64_t reach = std::min<int64_t>(
        config.max_model_len, config.pool.block_size + config.window.window - 2 + config.max_num_batched_tokens);
    if (w.blocks_for(reach) > w.num_blocks())
      return invalid_argument("scheduler: a window table needs up to " + std::to_string(w.blocks_for(reach)) +
                              " blocks but the window pool has only " + std::to_string(w.num_blocks()) +
                              "; raise num_blocks / kv_cache_bytes");
    window_pool = std::move(w);
  }
  if (config.window.full_layers && pool.blocks_for(config.max_model_len) > pool.num_blocks()) {
    return invalid_argument("scheduler: max_model_len " + std::to_string(config.max_model_len) + " needs " +
                            std::to_string(pool.blocks_for(config.max_model_len)) + " blocks of " +
                            std::to_string(config.pool.block_size) + " tokens but the cache has only " +
                            std::to_string(pool.num_blocks()) +
                            "; raise num_blocks / kv_cache_bytes or lower max_model_len");
  }
  return Scheduler(config, std::move(pool), std::move(window_pool));
}

Scheduler::Scheduler(const SchedulerConfig& config, BlockPool pool, std::optional<BlockPool> window_pool)
    : config_(config), pool_(std::move(pool)), window_pool_(std::move(window_pool)) {}

bool Scheduler::allocate(RequestState& r, const PrefixMatch& full, const PrefixMatch& window, int64_t num_tokens) {
  AllocationPlan full_plan;
  if (config_.window.full_layers) {
    full_plan = pool_.plan_allocation(r.block_table, full, num_tokens);
    if (!full_plan.ok) return false;
  }
  if (window_pool_) {
    const AllocationPlan window_plan = window_pool_->plan_allocation(r.window_table, window, num_tokens);
    if (!window_plan.ok) return false;
    window_pool_->apply(window_plan, r.window_table);
  }
  if (config_.window.full_layers) pool_.apply(full_plan, r.block_table);
  return true;
}

void Scheduler::release(RequestState& r) {
  pool_.release(r.block_table);
  if (window_pool_) window_pool_->release(r.window_table);
}

Status Scheduler::add_request(RequestId id, std::vector<int32_t> prompt, int32_t priority, bool use_prefix_cache) {
  if (requests_.contains(id)) return invalid_argument(req(id) + " already exists; request ids must be unique");
  if (prompt.empty()) return invalid_argument(req(id) + " has an empty prompt; give at least one token");
  if (static_cast<int64_t>(prompt.size()) > config_.max_model_len) {
    return invalid_argument(req(id) + ": prompt of " + std::to_string(prompt.size()) +
                            " tokens is longer than max_model_len " + std::to_string(config_.max_model_len));
  }
  auto r = std::make_unique<RequestState>();
  r->id = id;
  r->priority = priority;
  r->arrival = next_arrival_++;
  r->use_prefix_cache = use_prefix_cache;
  r->num_prompt_tokens = static_cast<int32_t>(prompt.size());
  r->tokens = std::move(prompt);
  waiting_.emplace(order_key(*r), r.get());
  requests_.emplace(id, std::move(r));
  return Status::ok_status();
}

StepPlan Scheduler::schedule() {
  StepPlan plan;
  int32_t budget = config_.max_num_batched_tokens;
  const bool preempted = schedule_running(plan, budget);
  if (!preempted) schedule_waiting(plan, budget);  // blocks are short: admit nobody this step
  stats_.num_prefix_query_tokens += plan.num_prefix_query_tokens;
  stats_.num_prefix_hit_tokens += plan.num_prefix_hit_tokens;
  if (!plan.empty()) ++stats_.num_steps;
  return plan;
}

int32_t Scheduler::tokens_to_schedule(const RequestState& r, int32_t num_computed, int32_t budget) const {
  const int32_t limit = std::min(r.num_tokens(), config_.max_model_len) - num_computed;
  return std::max(0, std::min(limit, budget));
}

// Draft tokens a step may add after num_new known tokens from num_computed: only when the known
// tokens all run, within the budget, and only so many that every draft row's sample (the token
// after it) is a position below max_model_len.
int32_t Scheduler::drafts_to_schedule(const RequestState& r, int32_t num_computed, int32_t num_new,
                                      int32_t budget) const {
  if (r.draft.empty() || num_computed + num_new != r.num_tokens()) return 0;
  const int32_t room = config_.max_model_len - 1 - r.num_tokens();
  return std::max(0, std::min({static_cast<int32_t>(r.draft.size()), budget - num_new, room}));
}

// Forgets the draft positions the last step computed and not verified: the table keeps the blocks
// of the computed positions (the block past them is private and is written again), the rest are
// freed.
void Scheduler::roll_back_draft(RequestState& r) {
  r.unverified.clear();
  pool_.truncate(r.block_table, pool_.blocks_for(r.num_computed_tokens));
  // The window table keeps the same entries: its released ones all lie before
  // first_window_block(computed) <= blocks_for(computed), and what follows held drafts only.
  if (window_pool_) window_pool_->truncate(r.window_table, window_pool_->blocks_for(r.num_computed_tokens));
}

// What follows a change of num_computed_tokens (a step, or a draft position verified): newly
// full computed blocks are registered, then the window blocks no later query can read are released.
void Scheduler::settle_computed(RequestState& r) {
  pool_.register_full_blocks(r.block_table, r.tokens, r.num_computed_tokens);
  if (!window_pool_) return;
  window_pool_->register_full_blocks(r.window_table, r.tokens, r.num_computed_tokens);  // cached before released
  window_pool_->release_leading(
      r.window_table, first_window_block(r.num_computed_tokens, config_.window.window, config_.pool.block_size));
}

// Returns whether any request was preempted.
bool Scheduler::schedule_running(StepPlan& plan, int32_t& budget) {
  bool preempted = false;
  for (size_t i = 0; i < running_.size() && budget > 0; ++i) {
    RequestState& r = *running_[i];
    if (!r.unverified.empty()) roll_back_draft(r);  // the engine appended no token after a verify step
    const int32_t num_new = tokens_to_schedule(r, r.num_computed_tokens, budget);
    if (num_new == 0) continue;
    int32_t num_draft = drafts_to_schedule(r, r.num_computed_tokens, num_new, budget);
    bool fits = false;
    while (!fits) {
      if (allocate(r, kNoMatch, kNoMatch, r.num_computed_tokens + num_new + num_draft)) {
        fits = true;
        break;
      }
      if (num_draft > 0) {  // drafts never preempt anyone: drop them first
        num_draft = 0;
        continue;
      }
      // running_ is sorted, so the victim sorts at or after r: it has not been scheduled yet.
      RequestState& victim = *running_.back();
      preempt(victim, plan);
      preempted = true;
      if (&victim == &r) break;
    }
    if (!fits) break;  // r itself was preempted; it was the last running request
    add_to_plan(plan, r, num_new, num_draft, /*admitted=*/false, 0);
    budget -= num_new + num_draft;
  }
  return preempted;
}

void Scheduler::schedule_waiting(StepPlan& plan, int32_t& budget) {
  while (!waiting_.empty() && budget > 0 && num_running() < config_.max_num_seqs) {
    if (!try_admit(*waiting_.begin()->second, plan, budget)) break;  // head-of-line: keep the order
  }
}

bool Scheduler::try_admit(RequestState& r, StepPlan& plan, int32_t& budget) {
  VOSTI_CHECK(r.num_tokens() < config_.max_model_len + 1,
              req(r.id) + " reached max_model_len; the engine must finish it");
  const bool lookup = config_.pool.enable_prefix_caching && r.use_prefix_cache;
  const std::span<const int32_t> known = std::span<const int32_t>(r.tokens).first(r.tokens.size() - 1);
  PrefixMatch match = lookup && config_.window.full_layers ? pool_.match_prefix(known) : PrefixMatch{};
  PrefixMatch window_match;
  if (window_pool_ && lookup) {
    // A hit must cover the same blocks in both pools; the window table takes only those its
    // window still reads, and the keys of the others (their blocks stay where they are).
    window_match = window_pool_->match_prefix(known);
    if (config_.window.full_layers) {
      const auto n = static_cast<int32_t>(std::min(match.blocks.size(), window_match.blocks.size()));
      match.truncate(n);
      window_match.truncate(n);
    }
    window_match.skip_leading(
        first_window_block(window_match.num_tokens, config_.window.window, config_.pool.block_size));
  }
  const int32_t num_hit = config_.window.full_layers ? match.num_tokens : window_match.num_tokens;
  const int32_t num_new = tokens_to_schedule(r, num_hit, budget);
  VOSTI_CHECK(num_new > 0, req(r.id) + " has nothing to compute on admission");
  if (!allocate(r, match, window_match, num_hit + num_new)) return false;
  match.num_tokens = num_hit;
  waiting_.erase(waiting_.begin());
  r.num_computed_tokens = match.num_tokens;
  r.status = RequestStatus::kRunning;
  if (r.num_cached_tokens < 0) r.num_cached_tokens = match.num_tokens;
  insert_running(&r);
  if (config_.pool.enable_prefix_caching && r.use_prefix_cache) {
    plan.num_prefix_query_tokens += r.num_tokens();
    plan.num_prefix_hit_tokens += match.num_tokens;
  }
  add_to_plan(plan, r, num_new, /*num_draft=*/0, /*admitted=*/true, match.num_tokens);
  budget -= num_new;
  return true;
}

void Scheduler::preempt(RequestState& victim, StepPlan& plan) {
  VOSTI_CHECK(!running_.empty() && running_.back() == &victim, "the preemption victim must sort last");
  running_.pop_back();
  release(victim);
  victim.draft.clear();
  victim.unverified.clear();
  victim.num_computed_tokens = 0;
  victim.status = RequestStatus::kPreempted;
  ++victim.num_preemptions;
  waiting_.emplace(order_key(victim), &victim);
  plan.preempted.push_back(victim.id);
  ++stats_.num_preemptions;
}

void Scheduler::insert_running(RequestState* r) {
  const auto pos = std::upper_bound(running_.begin(), running_.end(), order_key(*r),
                                    [](const OrderKey& k, const RequestState* x) { return k < order_key(*x); });
  running_.insert(pos, r);
}

void Scheduler::add_to_plan(StepPlan& plan, const RequestState& r, int32_t num_new, int32_t num_draft, bool admitted,
                            int32_t num_cached) {
  ScheduledRequest& s = plan.requests.emplace_back();
  s.id = r.id;
  s.num_computed_tokens = r.num_computed_tokens;
  s.num_new_tokens = num_new + num_draft;
  s.num_draft_tokens = num_draft;
  const auto first = r.tokens.begin() + r.num_computed_tokens;
  s.token_ids.assign(first, first + num_new);
  s.token_ids.insert(s.token_ids.end(), r.draft.begin(), r.draft.begin() + num_draft);
  const int32_t end = r.num_computed_tokens + num_new;
  VOSTI_CHECK(!config_.window.full_layers || r.block_table.num_blocks() == pool_.blocks_for(end + num_draft),
              req(r.id) + "'s block table does not cover the step exactly");
  s.block_table = r.block_table.blocks();
  if (window_pool_) {
    VOSTI_CHECK(r.window_table.num_blocks() == pool_.blocks_for(end + num_draft),
                req(r.id) + "'s window table does not cover the step exactly");
    s.window_block_table = r.window_table.blocks();
  }
  s.completes_known_tokens = end == r.num_tokens();
  s.newly_admitted = admitted;
  s.num_cached_tokens = num_cached;
  plan.num_batched_tokens += num_new + num_draft;
  plan.num_draft_tokens += num_draft;
}

void Scheduler::on_step_done(const StepPlan& plan) {
  for (const ScheduledRequest& s : plan.requests) {
    const auto it = requests_.find(s.id);
    if (it == requests_.end()) continue;  // finished or aborted since schedule()
    RequestState& r = *it->second;
    VOSTI_CHECK(r.status == RequestStatus::kRunning && r.num_computed_tokens == s.num_computed_tokens,
                "on_step_done() with a plan that is not the latest schedule() for " + req(s.id));
    r.num_computed_tokens += s.num_new_tokens - s.num_draft_tokens;  // drafts wait for append_token
    settle_computed(r);
    r.unverified.assign(s.token_ids.end() - s.num_draft_tokens, s.token_ids.end());
    r.draft.clear();
  }
}

bool Scheduler::append_token(RequestId id, int32_t token) {
  RequestState& r = state(id);
  VOSTI_CHECK(r.status == RequestStatus::kRunning && r.num_computed_tokens == r.num_tokens(),
              "append_token() on " + req(id) + " that is not running with all its tokens computed");
  r.tokens.push_back(token);
  r.draft.clear();
  if (!r.unverified.empty()) {
    if (r.unverified.front() == token) {  // the KV written for the draft token is this token's
      r.unverified.erase(r.unverified.begin());
      ++r.num_computed_tokens;
      settle_computed(r);  // releases only up to the verified positions: as plain decode would here
    } else {
      roll_back_draft(r);
    }
  }
  return r.num_tokens() >= config_.max_model_len;
}

void Scheduler::set_draft(RequestId id, std::vector<int32_t> draft) {
  const auto it = requests_.find(id);
  if (it == requests_.end() || it->second->status != RequestStatus::kRunning) return;
  it->second->draft = std::move(draft);
}

bool Scheduler::finish(RequestId id) {
  const auto it = requests_.find(id);
  if (it == requests_.end()) return false;
  RequestState& r = *it->second;
  if (r.status == RequestStatus::kRunning) {
    running_.erase(std::find(running_.begin(), running_.end(), &r));
  } else {
    waiting_.erase(order_key(r));
  }
  release(r);
  r.status = RequestStatus::kFinished;
  requests_.erase(it);
  return true;
}

const RequestState* Scheduler::find(RequestId id) const {
  const auto it = requests_.find(id);
  return it == requests_.end() ? nullptr : it->second.get();
}

RequestState& Scheduler::state(RequestId id) {
  const auto it = requests_.find(id);
  VOSTI_CHECK(it != requests_.end(), "unknown " + req(id));
  return *it->second;
}

}  // namespace vosti
