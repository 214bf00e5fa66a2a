// BlockTable: one request's page table, the physical KV blocks holding its positions
// in order (block i holds positions [i * block_size, (i + 1) * block_size)).
//
// Invariants: append-only while the request holds its blocks (BlockPool::apply appends,
// BlockPool::release empties it), except that BlockPool::truncate drops unhashed tail blocks
// (speculative decoding's roll-back of rejected draft positions); no block appears twice; the first num_hashed_blocks()
// blocks are full, computed, and their chain keys are keys()[0..num_hashed_blocks()).
// Only BlockPool mutates a table.
// Thread safety: none; owned by one request state, used from the scheduler's thread.
#pragma once

#include <cstdint>
#include <vector>

#include "cache/block_key.h"

namespace vosti {

using BlockId = int32_t;
inline constexpr BlockId kNoBlock = -1;

class BlockTable {
 public:
  const std::vector<BlockId>& blocks() const { return blocks_; }  // [num_blocks]
  int32_t num_blocks() const { return static_cast<int32_t>(blocks_.size()); }
  BlockId operator[](int32_t i) const { return blocks_[static_cast<size_t>(i)]; }
  bool empty() const { return blocks_.empty(); }
  // Leading blocks whose chain key is known (prefix-cache hits or registered full blocks).
  int32_t num_hashed_blocks() const { return static_cast<int32_t>(keys_.size()); }
  const std::vector<BlockKey>& keys() const { return keys_; }  // [num_hashed_blocks]

 private:
  friend class BlockPool;
  std::vector<BlockId> blocks_;  // [num_blocks] physical block ids
  std::vector<BlockKey> keys_;   // [num_hashed_blocks] chain keys of the leading full blocks
};

}  // namespace vosti
