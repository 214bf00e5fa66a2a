// BlockPool::check_invariants: the declared invariants of block_pool.h, all of them.
#include <string>
#include <unordered_map>
#include <vector>

#include "cache/block_pool.h"

namespace vosti {
namespace {

Status broken(const std::string& what) { return internal_error("block pool invariant broken: " + what); }
std::string blk(BlockId b) { return "block " + std::to_string(b); }

}  // namespace

Status BlockPool::check_invariants(std::span<const BlockTable* const> tables) const {
  const int64_t n = config_.num_blocks;
  std::vector<int32_t> holders(static_cast<size_t>(n), 0);    // [num_blocks] tables holding each block
  std::vector<size_t> last_table(static_cast<size_t>(n), 0);  // [num_blocks] 1 + index of the last table seen
  for (size_t t = 0; t < tables.size(); ++t) {
    const BlockTable& table = *tables[t];
    if (table.keys_.size() > table.blocks_.size()) return broken("a table has more keys than blocks");
    if (table.serials_.size() != table.keys_.size()) return broken("a table's serials and keys disagree");
    for (size_t i = 0; i < table.blocks_.size(); ++i) {
      const BlockId b = table.blocks_[i];
      const bool released = static_cast<int32_t>(i) < table.num_released_;
      if (released != (b == kNoBlock)) return broken("a table's released entries are not exactly its leading ones");
      if (released) continue;
      if (b < 0 || b >= n) return broken("table holds out-of-range " + blk(b));
      if (last_table[static_cast<size_t>(b)] == t + 1) return broken("a table holds " + blk(b) + " twice");
      last_table[static_cast<size_t>(b)] = t + 1;
      ++holders[static_cast<size_t>(b)];
      const BlockMeta& m = meta(b);
      if (m.serial == 0) continue;
      if (i >= table.keys_.size()) return broken("cached " + blk(b) + " sits past its table's hashed prefix");
      if (!(m.key == table.keys_[i])) return broken("cached " + blk(b) + " has a key other than its table's chain key");
      const uint64_t parent_serial = i == 0 ? 0 : parent_serial_of(table, i);
      if (m.parent_serial != parent_serial)
        return broken("cached " + blk(b) + " is not chained to its table's previous block");
    }
  }
  int64_t num_used = 0;
  for (BlockId b = 0; b < n; ++b) {
    const BlockMeta& m = meta(b);
    if (m.ref_count != holders[static_cast<size_t>(b)]) {
      return broken(blk(b) + " has ref count " + std::to_string(m.ref_count) + " but " +
                    std::to_string(holders[static_cast<size_t>(b)]) + " tables hold it");
    }
    if ((m.ref_count == 0) != m.on_free_list) return broken(blk(b) + " is both free and used, or neither");
    num_used += m.ref_count > 0 ? 1 : 0;
  }
  std::vector<uint8_t> on_list(static_cast<size_t>(n), 0);  // [num_blocks]
  VOSTI_RETURN_IF_ERROR(check_free_list(on_list));
  for (BlockId b = 0; b < n; ++b) {
    if ((on_list[static_cast<size_t>(b)] != 0) != meta(b).on_free_list)
      return broken(blk(b) + " free flag disagrees with the list");
  }
  if (num_used + num_free_ != n) return broken("used + free != num_blocks");
  return check_cache();
}

Status BlockPool::check_free_list(std::vector<uint8_t>& on_list) const {
  int64_t count = 0;
  BlockId prev = kNoBlock;
  for (BlockId b = free_head_; b != kNoBlock; b = meta(b).next_free) {
    if (b < 0 || b >= config_.num_blocks) return broken("free list holds out-of-range " + blk(b));
    if (on_list[static_cast<size_t>(b)] != 0) return broken("free list holds " + blk(b) + " twice");
    on_list[static_cast<size_t>(b)] = 1;
    if (meta(b).prev_free != prev) return broken("free list back link of " + blk(b) + " is wrong");
    prev = b;
    ++count;
  }
  if (prev != free_tail_) return broken("free list tail is wrong");
  if (count != num_free_)
    return broken("free list length " + std::to_string(count) + " != num_free " + std::to_string(num_free_));
  return Status::ok_status();
}

Status BlockPool::check_cache() const {
  if (!config_.enable_prefix_caching && !cache_.empty()) return broken("blocks cached with prefix caching off");
  std::unordered_map<uint64_t, BlockId> by_serial;  // registration serial -> cached block
  for (BlockId b = 0; b < config_.num_blocks; ++b) {
    const BlockMeta& m = meta(b);
    if (m.serial == 0) continue;
    if (m.serial >= next_serial_ || !by_serial.emplace(m.serial, b).second) return broken(blk(b) + " has a bad serial");
    const auto it = cache_.find(m.key);
    if (it == cache_.end() || it->second != b)
      return broken("cached " + blk(b) + " is not in the key map under its key");
  }
  if (by_serial.size() != cache_.size()) return broken("the key map holds blocks that are not cached");
  for (const auto& [serial, b] : by_serial) {
    const BlockMeta& m = meta(b);
    if (m.tokens.size() != static_cast<size_t>(config_.block_size)) return broken("cached " + blk(b) + " is not full");
    if (!(config_.hash_fn(m.parent_key, m.tokens, config_.identity_seed) == m.key)) {
      return broken("cached " + blk(b) + "'s key does not chain from its parent key and tokens");
    }
    if (m.parent_serial >= serial) return broken("cached " + blk(b) + " was registered before its parent");
    if (m.parent_serial == 0 && !(m.parent_key == kRootBlockKey))
      return broken("first block " + blk(b) + " has a parent key");
    const auto parent = by_serial.find(m.parent_serial);
    if (parent != by_serial.end() && !(meta(parent->second).key == m.parent_key)) {
      return broken("cached " + blk(b) + "'s parent key differs from its cached parent's key");
    }
  }
  return Status::ok_status();
}

}  // namespace vosti
