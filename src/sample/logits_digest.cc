#include "sample/logits_digest.h"

#include <xxhash.h>

namespace vosti {

LogitsDigest logits_digest(std::span<const float> logits) {
  const XXH128_hash_t h = XXH3_128bits(logits.data(), logits.size_bytes());
  return {h.low64, h.high64};
}

}  // namespace vosti
