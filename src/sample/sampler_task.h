// SamplerRowTask: what a runner does with one logits row (score a prompt token, or sample one with
// the request's parameters), with the row's sampler adjustments (logit bias, repetition,
// frequency and presence penalties as one entry per touched token): the device sampler's input
// (kernels/cuda/sampler/sampler_kernels.h), built on the host with the step's batch
// (runner/step_batch.h). Plain values, the same on host and device.
// Thread safety: value types.
#pragma once

#include <cstdint>

namespace vosti {

enum SamplerRowKind : int32_t { kSamplerRowNone = 0, kSamplerRowScore = 1, kSamplerRowSample = 2 };

// What to do with one row (64 bytes; copied to the device with the step).
struct SamplerRowTask {
  int32_t kind = kSamplerRowNone;
  int32_t target_token = -1;  // kScore
  int32_t num_top = 0;        // top-n (<= sampling_params.h kMaxTopLogprobs)
  int32_t top_k = 0;          // 0: off
  float temperature = 1.0f;
  float top_p = 1.0f;
  float min_p = 0.0f;
  float repetition_penalty = 1.0f;
  float frequency_penalty = 0.0f;
  float presence_penalty = 0.0f;
  int32_t adjust_begin = 0;  // this row's entries in the adjustment list
  int32_t adjust_count = 0;
  uint64_t seed = 0;
  uint64_t output_position = 0;
};

// One token that sampler.h's steps 1-3 touch in a row (one entry per distinct token, any order).
struct SamplerAdjust {
  int32_t token = 0;
  uint32_t flags = 0;  // kAdjustBias | kAdjustRepeated | kAdjustCounted
  float bias = 0.0f;   // logit_bias (kAdjustBias)
  int32_t count = 0;   // occurrences among the outputs (kAdjustCounted: frequency/presence apply)
};
inline constexpr uint32_t kAdjustBias = 1;      // logit_bias names the token
inline constexpr uint32_t kAdjustRepeated = 2;  // in prompt + outputs, repetition penalty applies
inline constexpr uint32_t kAdjustCounted = 4;   // in the outputs (count > 0)

}  // namespace vosti
