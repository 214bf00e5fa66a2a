// RequestState: what the scheduler knows about one request: its tokens (prompt, then
// outputs so far), how many of them have their KV computed, and its block table.
//
// Lifecycle: kWaiting -> kRunning -> (kPreempted -> kRunning)* -> kFinished. A preempted
// request is back in the waiting queue with no blocks and num_computed_tokens == 0; it
// recomputes its tokens (possibly from the prefix cache). There are no prefill and
// decode phases: num_computed_tokens catches up with num_tokens().
// Speculative decoding: `draft` holds tokens proposed after the known ones (Scheduler::set_draft);
// a step that computes all known tokens may also compute (some of) them, as positions
// num_tokens() onwards. Their KV is then written but unverified (`unverified`): append_token
// keeps a position exactly when the appended token equals the draft token it was computed for,
// and rolls the rest back (block table and window table trimmed, blocks freed).
// Invariants: 0 <= num_computed_tokens <= num_tokens(); waiting/preempted requests hold
// no blocks and no draft; a running request's table covers at least num_computed_tokens positions.
// Thread safety: none; owned by the Scheduler.
#pragma once

#include <cstdint>
#include <vector>

#include "cache/block_table.h"
#include "core/ids.h"

namespace vosti {

enum class RequestStatus : uint8_t { kWaiting, kRunning, kPreempted, kFinished };
const char* request_status_name(RequestStatus s);  // "waiting", "running", "preempted", "finished"

struct RequestState {
  RequestId id = 0;
  int32_t priority = 0;          // lower runs first
  uint64_t arrival = 0;          // scheduler-assigned arrival number (FCFS within a priority)
  bool use_prefix_cache = true;  // false: never looks up the prefix cache (e.g. prompt logprobs)
  RequestStatus status = RequestStatus::kWaiting;
  std::vector<int32_t> tokens;  // [num_tokens] prompt ++ outputs so far
  int32_t num_prompt_tokens = 0;
  int32_t num_computed_tokens = 0;  // leading tokens whose KV is in the cache
  int32_t num_cached_tokens = -1;   // prefix-cache hit tokens at first admission (-1: not yet admitted)
  int32_t num_preemptions = 0;
  BlockTable block_table;           // the full layers' blocks (every layer's without window-local KV)
  BlockTable window_table;          // window-local KV: the window layers' blocks, released ones kNoBlock
  std::vector<int32_t> draft;       // proposed tokens after tokens, not yet computed
  std::vector<int32_t> unverified;  // draft tokens at positions [num_tokens(), ...) whose KV the last step wrote

  int32_t num_tokens() const { return static_cast<int32_t>(tokens.size()); }
  int32_t num_output_tokens() const { return num_tokens() - num_prompt_tokens; }
};

}  // namespace vosti
