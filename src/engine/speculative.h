// Speculative decoding's configuration and its drafting methods. A request that speculates gets
// draft tokens after its known ones; the engine verifies them in its next step (the scheduler
// adds them as query tokens, the runner samples every row of them with the request's own sampler)
// and keeps a draft token exactly when it equals the token the target sampled at its position.
// The sampler is keyed by (seed, output position) and a row's logits do not depend on how its
// tokens are chunked, so the output is bit for bit the output without speculation: speculation
// is an execution variation (docs/SPEC.md), not part of the deployment.
//
// The configuration is vLLM's `--speculative-config` JSON, parsed once (parse_speculative_config);
// a method is data: a Drafter made from it (make_drafter), never a branch in the runner.
// Thread safety: SpeculativeConfig is a value; a Drafter is used by one engine's step thread
// (NgramDrafter is pure; the draft model's drafter drives an engine of its own).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/engine_config.h"
#include "core/speculative_config.h"
#include "core/status.h"

namespace vosti {

struct ModelConfig;

// Proposes draft tokens from a request's tokens (prompt ++ outputs).
class Drafter {
 public:
  virtual ~Drafter() = default;
  // At most max_tokens draft tokens to follow `tokens`; fewer (or none) when the method has none.
  virtual std::vector<int32_t> propose(std::span<const int32_t> tokens, int32_t max_tokens) const = 0;
};

// vLLM's ngram method (prompt lookup decoding): the longest suffix of the tokens, of
// prompt_lookup_min..prompt_lookup_max tokens, that occurs earlier in them; at its most recent
// earlier occurrence, the tokens that followed it (up to k, and up to the end of the tokens).
class NgramDrafter final : public Drafter {
 public:
  // REQUIRES: 1 <= min_n <= max_n.
  NgramDrafter(int32_t min_n, int32_t max_n) : min_n_(min_n), max_n_(max_n) {}
  std::vector<int32_t> propose(std::span<const int32_t> tokens, int32_t max_tokens) const override;

 private:
  int32_t min_n_;
  int32_t max_n_;
};

// The drafter of an enabled config for an engine of `engine_config` serving a model of `target`.
// draft_model: the model at config.model loaded on the target's device and run greedily by an
// engine of its own (its own KV cache, prefix caching on, so each proposal computes only the new
// tokens).
// REQUIRES: config came from parse_speculative_config and is enabled.
// Errors: kInvalidArgument when the draft model cannot load or has another vocabulary size than
// the target (named); the draft engine's errors.
Result<std::shared_ptr<const Drafter>> make_drafter(const SpeculativeConfig& config, const EngineConfig& engine_config,
                                                    const ModelConfig& target);

}  // namespace vosti
