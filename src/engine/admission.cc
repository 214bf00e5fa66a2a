#include "engine/admission.h"

#include <algorithm>

#include "structured/grammar.h"
#include "tokenizer/tokenizer.h"

namespace vosti {

StopConditions stop_conditions(const RequestSpec& spec, const AdmissionLimits& limits) {
  StopConditions c;
  for (int64_t id : limits.eos_token_ids) c.eos_token_ids.push_back(static_cast<int32_t>(id));
  if (limits.tokenizer != nullptr)
    for (int32_t id : limits.tokenizer->stop_ids())
      if (std::find(c.eos_token_ids.begin(), c.eos_token_ids.end(), id) == c.eos_token_ids.end())
        c.eos_token_ids.push_back(id);
  c.stop_token_ids = spec.stop_token_ids;
  c.stop_strings = spec.stop;
  c.ignore_eos = spec.ignore_eos;
  c.include_stop_str_in_output = spec.include_stop_str_in_output;
  c.max_tokens = spec.max_tokens;
  return c;
}

Status validate_request(const RequestSpec& spec, const AdmissionLimits& limits) {
  const int64_t vocab = limits.vocab_size;
  if (spec.prompt.empty()) return invalid_argument("the prompt is empty: give at least one token");
  for (size_t i = 0; i < spec.prompt.size(); ++i) {
    if (spec.prompt[i] < 0 || spec.prompt[i] >= vocab)
      return invalid_argument("prompt token " + std::to_string(i) + " has id " + std::to_string(spec.prompt[i]) +
                              ", outside the vocabulary [0, " + std::to_string(vocab) + ")");
  }
  const int64_t n = static_cast<int64_t>(spec.prompt.size());
  if (n > limits.max_model_len || (spec.max_tokens > 0 && n >= limits.max_model_len))
    return invalid_argument("the prompt has " + std::to_string(n) +
                            " tokens; this deployment's maximum context length is " +
                            std::to_string(limits.max_model_len) + " tokens, prompt and output together");
  if (spec.max_tokens < 0) return invalid_argument("max_tokens must be >= 0, got " + std::to_string(spec.max_tokens));
  VOSTI_RETURN_IF_ERROR(spec.sampling.validate(vocab));
  if (spec.routed_experts && limits.num_moe_layers == 0)
    return invalid_argument("return_routed_experts needs a mixture-of-experts model; " + limits.model_name +
                            " has no expert layer");
  if (!spec.stop.empty() && limits.tokenizer == nullptr)
    return invalid_argument("stop strings need a tokenizer, and this engine has none");
  if (spec.structured) {
    if (limits.tokenizer == nullptr)
      return invalid_argument("structured outputs need a tokenizer, and this engine has none");
    VOSTI_RETURN_IF_ERROR(spec.structured->validate());
  }
  return stop_conditions(spec, limits).validate(vocab);
}

}  // namespace vosti
