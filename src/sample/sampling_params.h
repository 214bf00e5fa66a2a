// SamplingParams: how one request turns logits into tokens (DESIGN.md rule 6).
//
// Invariants after validate(): temperature finite and >= 0; top_p in (0, 1]; min_p in [0, 1];
// top_k == 0 (off) or >= 1; repetition_penalty finite and > 0; presence and frequency
// penalties in [-2, 2]; logit_bias ids in [0, vocab), each id once, biases in [-100, 100];
// num_top_logprobs in [0, kMaxTopLogprobs]. temperature == 0 means greedy (lowest id wins
// ties). How these are applied, in which order, is documented in sample/sampler.h.
// Thread safety: a value type.
#pragma once

#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "core/status.h"

namespace vosti {

inline constexpr int32_t kMaxTopLogprobs = 20;

struct SamplingParams {
  float temperature = 1.0f;
  int32_t top_k = 0;  // 0: off
  float top_p = 1.0f;
  float min_p = 0.0f;
  float repetition_penalty = 1.0f;  // HF/vLLM semantics over prompt + output tokens
  float presence_penalty = 0.0f;    // OpenAI semantics over output tokens
  float frequency_penalty = 0.0f;
  std::vector<std::pair<int32_t, float>> logit_bias;  // (token id, bias) added before sampling
  std::optional<uint64_t> seed;                       // absent: the engine draws one and reports it
  int32_t num_top_logprobs = 0;                       // top-n logprobs per position (0: only the chosen token's)
  bool logprobs = true;  // report the chosen token's raw logprob; false lets a runner skip the log-softmax

  // INVALID_ARGUMENT naming the field and the allowed range.
  Status validate(int64_t vocab_size) const;
};

}  // namespace vosti
