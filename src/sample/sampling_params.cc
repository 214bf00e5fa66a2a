#include "sample/sampling_params.h"

#include <cmath>
#include <string>
#include <unordered_set>

#include <fmt/format.h>

namespace vosti {
namespace {

// NaN fails every comparison, so each check is written as "in range" and negated.
Status out_of_bounds(const char* field, float value, const char* allowed) {
  return invalid_argument(fmt::format("sampling parameter {} = {} is invalid: must be {}", field, value, allowed));
}

}  // namespace

Status SamplingParams::validate(int64_t vocab_size) const {
  if (vocab_size <= 0) return invalid_argument(fmt::format("vocab_size = {} must be positive", vocab_size));
  if (!(std::isfinite(temperature) && temperature >= 0.0f))
    return out_of_bounds("temperature", temperature, "a finite number >= 0 (0 means greedy)");
  if (top_k < 0)
    return invalid_argument(fmt::format("sampling parameter top_k = {} is invalid: must be 0 (off) or >= 1", top_k));
  if (!(top_p > 0.0f && top_p <= 1.0f)) return out_of_bounds("top_p", top_p, "in (0, 1] (1 means off)");
  if (!(min_p >= 0.0f && min_p <= 1.0f)) return out_of_bounds("min_p", min_p, "in [0, 1] (0 means off)");
  if (!(std::isfinite(repetition_penalty) && repetition_penalty > 0.0f))
    return out_of_bounds("repetition_penalty", repetition_penalty, "a finite number > 0 (1 means off)");
  if (!(presence_penalty >= -2.0f && presence_penalty <= 2.0f))
    return out_of_bounds("presence_penalty", presence_penalty, "in [-2, 2] (0 means off)");
  if (!(frequency_penalty >= -2.0f && frequency_penalty <= 2.0f))
    return out_of_bounds("frequency_penalty", frequency_penalty, "in [-2, 2] (0 means off)");
  std::unordered_set<int32_t> biased;
  for (const auto& [token, bias] : logit_bias) {
    if (token < 0 || token >= vocab_size)
      return invalid_argument(
          fmt::format("logit_bias token id {} is out of range: the vocabulary has ids 0..{}", token, vocab_size - 1));
    if (!(bias >= -100.0f && bias <= 100.0f))
      return invalid_argument(
          fmt::format("logit_bias for token id {} = {} is invalid: must be in [-100, 100]", token, bias));
    if (!biased.insert(token).second)
      return invalid_argument(fmt::format("logit_bias names token id {} twice: give each token one bias", token));
  }
  if (num_top_logprobs < 0 || num_top_logprobs > kMaxTopLogprobs)
    return invalid_argument(
        fmt::format("num_top_logprobs = {} is invalid: must be in [0, {}]", num_top_logprobs, kMaxTopLogprobs));
  return Status::ok_status();
}

}  // namespace vosti
