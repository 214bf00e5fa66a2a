// BlockKey: the prefix-cache key of one FULL KV block (DESIGN.md section 2 rule 5).
//
// A full block's key is chained over the whole token prefix it completes:
//   key(block i) = H(key(block i-1), the block's block_size token ids, deployment seed),
// with key(block -1) = kRootBlockKey. H is XXH3-128 over the parent key's 16 bytes
// followed by the token ids' little-endian bytes, seeded by the deployment identity.
// A key is only a lookup hint: BlockPool also compares the tokens and the parent chain,
// so a hash collision never produces a false hit.
// Thread safety: pure functions and value types.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace vosti {

struct BlockKey {
  uint64_t lo = 0;
  uint64_t hi = 0;
  friend bool operator==(const BlockKey&, const BlockKey&) = default;
};

// The parent key of a sequence's first block.
inline constexpr BlockKey kRootBlockKey{0, 0};

struct BlockKeyHasher {
  size_t operator()(const BlockKey& k) const { return static_cast<size_t>(k.lo ^ (k.hi * 0x9E3779B97F4A7C15ull)); }
};

// The chain function. Tests may substitute a deliberately weak one (to simulate collisions).
using BlockHashFn = BlockKey (*)(const BlockKey& parent, std::span<const int32_t> tokens, uint64_t identity_seed);

// XXH3-128 of (parent key bytes, token bytes) seeded with identity_seed: the production chain function.
BlockKey hash_block(const BlockKey& parent, std::span<const int32_t> tokens, uint64_t identity_seed);

}  // namespace vosti
