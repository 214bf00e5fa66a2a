// What the engine checks and derives of a request when it is added (Engine::add_request): the
// request's validity against the deployment, with an error that names the problem, and its stop
// conditions (the model's and tokenizer's end ids with the request's own).
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "core/status.h"
#include "engine/request.h"
#include "sample/stop_checker.h"

namespace vosti {

class Tokenizer;

// What admission reads of the deployment.
struct AdmissionLimits {
  int64_t vocab_size = 0;
  int64_t max_model_len = 0;  // prompt and output together
  int32_t num_moe_layers = 0;
  std::string model_name;
  const Tokenizer* tokenizer = nullptr;  // null: the engine has none
  std::span<const int64_t> eos_token_ids;
};

// The request's stop conditions: end ids (the model's, then the tokenizer's stop ids not among
// them), its stop ids and strings, ignore_eos, include_stop_str_in_output and max_tokens.
StopConditions stop_conditions(const RequestSpec& spec, const AdmissionLimits& limits);

// OK, or kInvalidArgument naming what the deployment cannot run: an empty prompt or a token outside
// the vocabulary, a context past max_model_len, bad sampling parameters, routed experts without an
// expert layer, stop strings or structured outputs without a tokenizer, bad stop conditions.
Status validate_request(const RequestSpec& spec, const AdmissionLimits& limits);

}  // namespace vosti
