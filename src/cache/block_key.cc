#include "cache/block_key.h"

#include <xxhash.h>

#include <array>
#include <cstring>
#include <vector>

namespace vosti {

// Token ids are hashed as their in-memory bytes: little-endian on every target we build.
BlockKey hash_block(const BlockKey& parent, std::span<const int32_t> tokens, uint64_t identity_seed) {
  constexpr size_t kStackBytes = 1024;
  const size_t num_bytes = sizeof(BlockKey) + tokens.size_bytes();
  std::array<unsigned char, kStackBytes> stack_buf;  // [num_bytes] when it fits
  std::vector<unsigned char> heap_buf;               // [num_bytes] otherwise
  unsigned char* buf = stack_buf.data();
  if (num_bytes > kStackBytes) {
    heap_buf.resize(num_bytes);
    buf = heap_buf.data();
  }
  std::memcpy(buf, &parent.lo, sizeof(uint64_t));
  std::memcpy(buf + sizeof(uint64_t), &parent.hi, sizeof(uint64_t));
  if (!tokens.empty()) std::memcpy(buf + sizeof(BlockKey), tokens.data(), tokens.size_bytes());
  const XXH128_hash_t h = XXH3_128bits_withSeed(buf, num_bytes, identity_seed);
  return BlockKey{h.low64, h.high64};
}

}  // namespace vosti
