// Token bitmasks: the set of tokens a row may sample (structured outputs), one bit per token id,
// bit t % 32 of word t / 32 set when t is allowed (xgrammar's layout). Applying one sets every
// disallowed logit to -inf: the sampler's step 3b (sample/sampler.h).
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <limits>
#include <span>

#include "core/host_device.h"

namespace vosti {

// Words of a mask over `vocab` tokens.
inline int32_t token_mask_words(int64_t vocab) { return static_cast<int32_t>((vocab + 31) / 32); }

VOSTI_HD bool token_allowed(const uint32_t* mask, int32_t token) {
  return ((mask[token >> 5] >> (token & 31)) & 1u) != 0;
}

// logits[t] = -inf for every t the mask does not allow.
// REQUIRES: mask.size() >= token_mask_words(logits.size()).
inline void apply_token_bitmask(std::span<float> logits /*[vocab]*/, std::span<const uint32_t> mask) {
  const float neg_inf = -std::numeric_limits<float>::infinity();
  for (size_t t = 0; t < logits.size(); ++t)
    if (!token_allowed(mask.data(), static_cast<int32_t>(t))) logits[t] = neg_inf;
}

// Whether any of the first `vocab` tokens is allowed.
inline bool any_token_allowed(std::span<const uint32_t> mask, int64_t vocab) {
  for (int64_t t = 0; t < vocab; ++t)
    if (token_allowed(mask.data(), static_cast<int32_t>(t))) return true;
  return false;
}

}  // namespace vosti
