// Scheduler::check_invariants: the declared invariants of scheduler.h, all of them.
#include <algorithm>
#include <string>
#include <vector>

#include "sched/scheduler.h"

namespace vosti {
namespace {

Status broken(RequestId id, const std::string& what) {
  return internal_error("scheduler invariant broken for request " + std::to_string(id) + ": " + what);
}

}  // namespace

Status Scheduler::check_invariants() const {
  std::vector<const BlockTable*> tables;         // [num_requests]
  std::vector<const BlockTable*> window_tables;  // [num_requests] (window-local KV)
  tables.reserve(requests_.size());
  for (const auto& [id, r] : requests_) {
    if (r->id != id) return broken(id, "stored under another id");
    VOSTI_RETURN_IF_ERROR(check_request(*r));
    tables.push_back(&r->block_table);
    window_tables.push_back(&r->window_table);
  }
  if (running_.size() + waiting_.size() != requests_.size()) {
    return internal_error("scheduler invariant broken: running + waiting != live requests");
  }
  if (num_running() > config_.max_num_seqs)
    return internal_error("scheduler invariant broken: more than max_num_seqs running");
  for (size_t i = 0; i < running_.size(); ++i) {
    const RequestState* r = running_[i];
    if (find(r->id) != r || r->status != RequestStatus::kRunning)
      return broken(r->id, "in the running list but not running");
    if (i > 0 && !(order_key(*running_[i - 1]) < order_key(*r))) return broken(r->id, "running list out of order");
  }
  for (const auto& [key, r] : waiting_) {
    if (find(r->id) != r || key != order_key(*r)) return broken(r->id, "waiting queue entry is stale");
    if (r->status != RequestStatus::kWaiting && r->status != RequestStatus::kPreempted) {
      return broken(r->id, std::string("in the waiting queue but ") + request_status_name(r->status));
    }
    if (!r->block_table.empty() || !r->window_table.empty() || r->num_computed_tokens != 0)
      return broken(r->id, "waiting but holds blocks or computed tokens");
    if (!r->draft.empty() || !r->unverified.empty()) return broken(r->id, "waiting with draft tokens");
  }
  if (window_pool_) VOSTI_RETURN_IF_ERROR(window_pool_->check_invariants(window_tables));
  return pool_.check_invariants(tables);
}

Status Scheduler::check_request(const RequestState& r) const {
  if (r.num_tokens() < 1 || r.num_prompt_tokens < 1 || r.num_prompt_tokens > r.num_tokens())
    return broken(r.id, "bad token counts");
  if (r.num_computed_tokens < 0 || r.num_computed_tokens > r.num_tokens())
    return broken(r.id, "num_computed_tokens out of range");
  if (r.num_computed_tokens > config_.max_model_len) return broken(r.id, "computed past max_model_len");
  if (window_pool_) {
    const int32_t first = first_window_block(r.num_computed_tokens, config_.window.window, pool_.block_size());
    if (r.window_table.num_released_blocks() > first)
      return broken(r.id, "window table released a block its window still reads");
    VOSTI_RETURN_IF_ERROR(check_table(r, r.window_table, *window_pool_, "window table"));
  }
  if (!config_.window.full_layers) return Status::ok_status();
  if (r.block_table.num_released_blocks() != 0) return broken(r.id, "block table released a block");
  return check_table(r, r.block_table, pool_, "block table");
}

Status Scheduler::check_table(const RequestState& r, const BlockTable& t, const BlockPool& pool,
                              const std::string& name) const {
  const int32_t bs = pool.block_size();
  // Draft positions: scheduled (between schedule() and on_step_done()) or computed and not yet
  // verified by append_token.
  const int32_t max_positions = r.num_tokens() + static_cast<int32_t>(std::max(r.draft.size(), r.unverified.size()));
  const int32_t max_blocks = pool.blocks_for(std::min(max_positions, config_.max_model_len));
  if (t.num_blocks() < pool.blocks_for(r.num_computed_tokens) || t.num_blocks() > max_blocks) {
    return broken(r.id, name + " of " + std::to_string(t.num_blocks()) + " blocks does not fit " +
                            std::to_string(r.num_computed_tokens) + " computed tokens");
  }
  if (t.num_hashed_blocks() > r.num_computed_tokens / bs)
    return broken(r.id, "a block hashed before its KV was computed");
  BlockKey parent = kRootBlockKey;
  for (int32_t i = 0; i < t.num_hashed_blocks(); ++i) {
    const std::span<const int32_t> tokens =
        std::span<const int32_t>(r.tokens).subspan(static_cast<size_t>(i * bs), static_cast<size_t>(bs));
    const BlockKey key = config_.pool.hash_fn(parent, tokens, config_.pool.identity_seed);
    if (!(key == t.keys()[static_cast<size_t>(i)]))
      return broken(r.id, "chain key of block " + std::to_string(i) + " is wrong");
    if (t[i] != kNoBlock && pool.is_cached(t[i])) {
      const std::span<const int32_t> cached = pool.cached_tokens(t[i]);
      if (!std::equal(cached.begin(), cached.end(), tokens.begin(), tokens.end())) {
        return broken(r.id, "cached block " + std::to_string(i) + " holds other tokens than the request's");
      }
    }
    parent = key;
  }
  return Status::ok_status();
}

}  // namespace vosti
