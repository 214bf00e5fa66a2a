// BlockTable: one request's page table, the physical KV blocks holding its positions
// in order (block i holds positions [i * block_size, (i + 1) * block_size)).
//
// A window table (the table of the sliding-window layers' KV, docs/SPEC.md section 4) may hold
// kNoBlock at its leading entries: blocks no window can read any more, released to the pool
// (BlockPool::release_leading). Logical block i stays entry i, so the slot formula is unchanged.
//
// Invariants: append-only while the request holds its blocks (BlockPool::apply appends,
// BlockPool::release empties it, release_leading turns a leading prefix into kNoBlock), except
// that BlockPool::truncate drops unhashed tail blocks (speculative decoding's roll-back of
// rejected draft positions); no block appears twice; the first num_hashed_blocks() blocks are
// full, computed, and their chain keys are keys()[0..num_hashed_blocks()), their registration
// serials serials()[...] (0: not cached when hashed).
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
  // Entries still holding a block (not kNoBlock).
  int32_t num_held_blocks() const;
  // Leading entries released (kNoBlock).
  int32_t num_released_blocks() const { return num_released_; }
  // Leading blocks whose chain key is known (prefix-cache hits or registered full blocks).
  int32_t num_hashed_blocks() const { return static_cast<int32_t>(keys_.size()); }
  const std::vector<BlockKey>& keys() const { return keys_; }        // [num_hashed_blocks]
  const std::vector<uint64_t>& serials() const { return serials_; }  // [num_hashed_blocks]

 private:
  friend class BlockPool;
  std::vector<BlockId> blocks_;    // [num_blocks] physical block ids
  std::vector<BlockKey> keys_;     // [num_hashed_blocks] chain keys of the leading full blocks
  std::vector<uint64_t> serials_;  // [num_hashed_blocks] their registration serials when hashed (0: none)
  int32_t num_released_ = 0;       // leading entries that are kNoBlock
};

// The first logical block a window table must still hold when its next query is at position
// num_computed and its layers read `window` positions back (attention_window_first): blocks
// before it end before first = num_computed - window + 1, and later queries start later still.
inline int32_t first_window_block(int64_t num_computed, int32_t window, int32_t block_size) {
  const int64_t first = num_computed - window + 1;
  return first <= 0 ? 0 : static_cast<int32_t>(first / block_size);
}

inline int32_t BlockTable::num_held_blocks() const { return num_blocks() - num_released_; }

}  // namespace vosti
