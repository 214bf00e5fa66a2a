#include "sample/logits_digest.h"

#include <xxhash.h>

#include <cstdio>

#include "sample/xxh3.h"

namespace vosti {

LogitsDigest logits_digest(std::span<const float> logits) {
  const auto* bytes = reinterpret_cast<const uint8_t*>(logits.data());
  if (logits.size_bytes() >= xxh3::kMinLongBytes) {  // every logits row of a real vocabulary
    static constexpr uint8_t kSecret[] = VOSTI_XXH3_SECRET_BYTES;
    LogitsDigest d{};
    xxh3::hash128_long(bytes, logits.size_bytes(), kSecret, &d[0], &d[1]);
    return d;
  }
  const XXH128_hash_t h = XXH3_128bits(bytes, logits.size_bytes());  // XXH3's short paths
  return {h.low64, h.high64};
}

std::string digest_hex(const LogitsDigest& digest) {
  char buf[33];
  std::snprintf(buf, sizeof(buf), "%016llx%016llx", static_cast<unsigned long long>(digest[1]),
                static_cast<unsigned long long>(digest[0]));
  return std::string(buf, 32);
}

}  // namespace vosti
