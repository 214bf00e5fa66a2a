// StepPlan: the scheduler's decision for one engine step, a named value the runner
// turns into a forward batch and the engine hands back to Scheduler::on_step_done.
// Thread safety: value type.
#pragma once

#include <cstdint>
#include <vector>

#include "cache/block_table.h"
#include "sched/request_state.h"

namespace vosti {

struct ScheduledRequest {
  RequestId id = 0;
  int32_t num_computed_tokens = 0;  // before the step = the first position computed
  int32_t num_new_tokens = 0;       // > 0: positions [num_computed_tokens, + num_new_tokens)
  std::vector<int32_t> token_ids;   // [num_new_tokens] the tokens at those positions
  // The last num_draft_tokens of token_ids are draft tokens after the known ones (speculative
  // decoding; then completes_known_tokens): the step samples every one of their rows too.
  int32_t num_draft_tokens = 0;
  std::vector<BlockId> block_table;  // [cdiv(num_computed + num_new, block_size)] physical blocks
  // Window-local KV: the window layers' table, [cdiv(num_computed + num_new, block_size)], its
  // released leading entries kNoBlock; empty without window-local KV (they use block_table).
  std::vector<BlockId> window_block_table;
  bool completes_known_tokens = false;  // computes the request's last known token: sample one after
  bool newly_admitted = false;          // admitted from the waiting queue this step
  int32_t num_cached_tokens = 0;        // prefix-cache hit tokens at this admission (0 if not admitted)
};

struct StepPlan {
  std::vector<ScheduledRequest> requests;  // running ones first (priority order), then admitted
  std::vector<RequestId> preempted;        // preempted this step (now waiting, no blocks)
  int32_t num_batched_tokens = 0;          // sum of num_new_tokens
  int32_t num_draft_tokens = 0;            // of which draft tokens
  int64_t num_prefix_query_tokens = 0;     // tokens looked up in the prefix cache at admission
  int64_t num_prefix_hit_tokens = 0;       // of which were cache hits

  bool empty() const { return requests.empty(); }
};

}  // namespace vosti
