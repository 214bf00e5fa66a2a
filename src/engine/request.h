// RequestSpec and RequestOutput: what a caller gives the engine and gets back.
// Thread safety: value types.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "core/ids.h"
#include "sample/logits_digest.h"
#include "sample/logprobs.h"
#include "sample/sampler.h"
#include "sample/sampling_params.h"
#include "structured/structured_outputs.h"

namespace vosti {

enum class FinishReason : uint8_t { kNone, kStop, kLength, kAbort, kError };
const char* finish_reason_name(FinishReason r);  // "stop", "length", "abort", "error"

struct RequestSpec {
  std::vector<int32_t> prompt;  // token ids, non-empty
  SamplingParams sampling;
  int32_t max_tokens = 16;              // output tokens at most (0: score the prompt only)
  std::vector<int32_t> stop_token_ids;  // besides the model's EOS ids
  std::vector<std::string> stop;        // stop strings (need a tokenizer)
  bool ignore_eos = false;
  bool include_stop_str_in_output = false;
  int32_t priority = 0;          // lower runs first; FCFS within a priority
  bool prompt_logprobs = false;  // logprobs of the prompt tokens (echo + logprobs)
  bool logits_digests = false;   // 128-bit digest of every produced position's logits (scored prompt rows too)
  bool return_logits = false;    // the full logits row of every produced position (harness use)
  bool sampling_masks = false;   // each output position's sampling support (sample/sampler.h)
  // The experts every computed position (prompt and output) routed to in every MoE layer
  // (vLLM's return_routed_experts; MoE models only). Such a request skips the prefix cache, as
  // prompt_logprobs does: a cached position's routing was never computed for it.
  bool routed_experts = false;
  // The output must match this (vLLM's structured_outputs): every sampled row is masked to the
  // tokens the grammar allows after the committed outputs (sample/sampler.h step 3b), and the
  // request stops ("stop") when the grammar has accepted a stop token. Needs a tokenizer and the
  // cpu device.
  std::optional<StructuredOutputs> structured;
};

// The routing of a request's computed positions: positions 0 .. prompt + outputs - 2 (the last
// output token is never run), per position per MoE layer (layer order) its top_k experts in
// ascending index -- the combine's order (model/moe_layer.h).
struct RoutedExperts {
  int32_t num_layers = 0;    // MoE layers
  int32_t top_k = 0;         // experts per token
  std::vector<int32_t> ids;  // [positions, num_layers, top_k]
  int64_t num_positions() const {
    return num_layers * top_k > 0 ? static_cast<int64_t>(ids.size()) / (num_layers * top_k) : 0;
  }
};

// One scored position: the chosen (or prompt) token, its log-probability under the raw
// logits, and the num_top_logprobs best alternatives (sample/logprobs.h defines them).
using TopLogprob = TokenLogprob;
using PositionLogprobs = ScoredToken;

// A delta delivered to the request's callback after a step, and the final state.
struct RequestOutput {
  RequestId id = 0;
  uint64_t seed = 0;                                // the seed actually used
  std::vector<int32_t> new_tokens;                  // produced this step
  std::vector<PositionLogprobs> new_logprobs;       // [new_tokens]
  std::vector<LogitsDigest> new_digests;            // [new_tokens] if asked
  std::vector<std::vector<float>> new_logits;       // [new_tokens][vocab] if return_logits
  std::vector<SamplingSupport> new_sampling_masks;  // [new_tokens] if sampling_masks
  std::vector<PositionLogprobs> prompt_logprobs;    // once, when the prompt is done (if asked); [0] has no logprob
  // With prompt_logprobs and logits_digests, alongside them: [i] digests the row that scored
  // prompt[i] (position i - 1's logits); [0] has no row and is zero.
  std::vector<LogitsDigest> prompt_digests;
  std::string new_text;  // detokenised delta, if the engine has a tokenizer
  bool finished = false;
  FinishReason finish_reason = FinishReason::kNone;
  std::string error;             // when finish_reason == kError
  RoutedExperts routed_experts;  // with RequestSpec::routed_experts, in the finished output only
  int32_t num_prompt_tokens = 0;
  int32_t num_output_tokens = 0;         // so far
  int32_t num_cached_prompt_tokens = 0;  // prompt tokens served from the prefix cache
};

using OutputCallback = std::function<void(const RequestOutput&)>;

}  // namespace vosti
