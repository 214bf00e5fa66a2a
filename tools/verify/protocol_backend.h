// ProtocolBackend: what the paper protocol (paper_runner.h) needs of the engine it tests, and
// the two that plug in: the engine in this process (engine_backend.h: full f32 rows, an engine
// per arm with the arm's token budget) and an OpenAI-compatible server (http_backend.h: the
// rows' digests where the server gives them, else token ids and top-20 logprobs; chunking
// induced by a filler prompt; "cold" by the server's reset route).
// Thread safety: one caller at a time.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/status.h"

namespace vosti {

// What a compared row is, strongest first.
enum class Evidence : uint8_t { kFullRows, kDigests, kTopLogprobs };
// "full f32 rows", "logits digests (XXH3-128 of each full f32 row)", "token ids + top-20 logprobs".
const char* evidence_name(Evidence e);

// One prompt of a call, as the engine produced it.
struct PromptResult {
  std::vector<int32_t> tokens;           // the output token ids
  std::vector<std::vector<float>> rows;  // kFullRows: [recorded positions][vocab]
  std::vector<std::string> row_texts;    // otherwise: [recorded positions] the row's digest or top-20 text
  int64_t num_cached_tokens = -1;        // prompt tokens served from the prefix cache; -1: not reported
};

// One call: prompts submitted together, run to completion.
struct CallResult {
  std::vector<PromptResult> prompts;  // in the call's order
  std::optional<bool> co_scheduled;   // some step ran two or more of them (where observable)
  int64_t num_cached_tokens = -1;     // over all its prompts; -1: not reported
  std::optional<int64_t> num_steps;   // engine steps the call took (where observable)
};

// The engine settings one arm of a relation runs under.
struct ArmSettings {
  std::string name;
  int32_t token_budget = 4096;  // the step token budget: prompts longer than it are chunked
  bool prefix_caching = false;  // off: every call starts cold
  bool fresh = false;           // a fresh engine, used for this arm only
};

class ProtocolBackend {
 public:
  virtual ~ProtocolBackend() = default;
  virtual Evidence evidence() const = 0;
  // One line for the report: "in-process cpu (...)", "http://host:port (vosti), model X".
  virtual std::string description() const = 0;
  // Later calls run under `arm`. Errors: the engine cannot be made, or the server cannot honour it.
  virtual Status begin_arm(const ArmSettings& arm) = 0;
  // Submits `prompts` together; each generates `max_tokens` greedily (EOS ignored); the rows of
  // output positions [0, record_positions) come back. Errors: a failed request, named.
  virtual Result<CallResult> run_call(std::span<const std::vector<int32_t>> prompts, int32_t max_tokens,
                                      int32_t record_positions) = 0;
  // Empties the prefix cache (every block evicted). Errors: the engine cannot.
  virtual Status reset_prefix_cache() = 0;
  // Whether begin_arm({.fresh = true}) really gives a new engine (a remote server cannot).
  virtual bool fresh_engines() const = 0;
  // Why this backend cannot run its prompts under `budget` tokens a step ("" if it can).
  virtual std::string chunking_unavailable(int32_t budget) const = 0;
  // Why this backend cannot test prefix reuse (no cache, no reset), "" if it can.
  virtual std::string prefix_reuse_unavailable() const = 0;
  // Notes for the report (how chunking is induced, what "fresh" means here), may be empty.
  virtual std::vector<std::string> notes() const = 0;
};

}  // namespace vosti
