#include "cache/block_pool.h"

#include <algorithm>
#include <limits>
#include <string>
#include <utility>

namespace vosti {
namespace {

// SplitMix64: a small, fully specified generator, so the shuffled order is the same on
// every platform (std::shuffle's algorithm is implementation-defined).
uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

bool contains(const std::vector<BlockId>& v, BlockId b) { return std::find(v.begin(), v.end(), b) != v.end(); }

std::string block_name(BlockId b) { return "block " + std::to_string(b); }

}  // namespace

Result<BlockPool> BlockPool::create(const BlockPoolConfig& config) {
  if (config.block_size <= 0) {
    return invalid_argument("block pool: block_size must be > 0, got " + std::to_string(config.block_size));
  }
  if (config.num_blocks <= 0 || config.num_blocks > std::numeric_limits<BlockId>::max()) {
    return invalid_argument("block pool: num_blocks must be in [1, 2^31), got " + std::to_string(config.num_blocks) +
                            "; set num_blocks or kv_cache_bytes");
  }
  if (config.hash_fn == nullptr) return invalid_argument("block pool: hash_fn must be set (default: hash_block)");
  return BlockPool(config);
}

BlockPool::BlockPool(const BlockPoolConfig& config) : config_(config), meta_(static_cast<size_t>(config.num_blocks)) {
  std::vector<BlockId> order(meta_.size());  // [num_blocks] initial free order
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<BlockId>(i);
  if (config_.shuffle_seed != 0) {
    uint64_t state = config_.shuffle_seed;
    for (size_t i = order.size(); i > 1; --i) {  // Fisher-Yates
      const size_t j = static_cast<size_t>(splitmix64(state) % i);
      std::swap(order[i - 1], order[j]);
    }
  }
  for (BlockId b : order) push_free_tail(b);
}

int32_t BlockPool::blocks_for(int64_t num_tokens) const {
  return static_cast<int32_t>((num_tokens + config_.block_size - 1) / config_.block_size);
}

void PrefixMatch::truncate(int32_t n) {
  if (static_cast<size_t>(n) >= blocks.size()) return;
  const int32_t block_size = num_tokens / static_cast<int32_t>(blocks.size());
  num_tokens = block_size * n;
  blocks.resize(static_cast<size_t>(n));
  keys.resize(static_cast<size_t>(n));
  serials.resize(static_cast<size_t>(n));
}

void PrefixMatch::skip_leading(int32_t n) {
  for (size_t i = 0; i < blocks.size() && i < static_cast<size_t>(n); ++i) blocks[i] = kNoBlock;
}

PrefixMatch BlockPool::match_prefix(std::span<const int32_t> tokens) const {
  PrefixMatch match;
  if (!config_.enable_prefix_caching) return match;
  const size_t bs = static_cast<size_t>(config_.block_size);
  const size_t num_full = tokens.size() / bs;
  BlockKey parent_key = kRootBlockKey;
  uint64_t parent_serial = 0;
  for (size_t i = 0; i < num_full; ++i) {
    const std::span<const int32_t> block_tokens = tokens.subspan(i * bs, bs);
    const BlockKey key = config_.hash_fn(parent_key, block_tokens, config_.identity_seed);
    const auto it = cache_.find(key);
    if (it == cache_.end()) break;
    const BlockMeta& m = meta(it->second);
    const bool same = m.parent_key == parent_key && m.parent_serial == parent_serial &&
                      std::equal(m.tokens.begin(), m.tokens.end(), block_tokens.begin(), block_tokens.end());
    if (!same) break;  // a hash collision, or a chain that diverged: never a hit
    match.blocks.push_back(it->second);
    match.keys.push_back(key);
    match.serials.push_back(m.serial);
    parent_key = key;
    parent_serial = m.serial;
  }
  match.num_tokens = static_cast<int32_t>(match.blocks.size() * bs);
  return match;
}

AllocationPlan BlockPool::plan_allocation(const BlockTable& table, const PrefixMatch& match, int64_t num_tokens) const {
  VOSTI_CHECK(match.blocks.empty() || table.empty(), "a prefix match can only seed an empty block table");
  VOSTI_CHECK(match.num_tokens <= num_tokens, "the prefix match covers more than the planned tokens");
  AllocationPlan plan;
  plan.pool_version = version_;
  plan.hit_blocks = match.blocks;
  plan.hit_keys = match.keys;
  plan.hit_serials = match.serials;
  int64_t num_hits_free = 0;
  for (BlockId b : match.blocks) num_hits_free += b != kNoBlock && meta(b).on_free_list ? 1 : 0;
  const int64_t have = table.num_blocks() + static_cast<int64_t>(match.blocks.size());
  const int64_t need = std::max<int64_t>(0, blocks_for(num_tokens) - have);
  const int64_t available = num_free_ - num_hits_free;
  plan.ok = need <= available;
  if (!plan.ok) return plan;
  plan.num_free_after = static_cast<int32_t>(available - need);
  for (BlockId b = free_head_; static_cast<int64_t>(plan.new_blocks.size()) < need; b = meta(b).next_free) {
    VOSTI_CHECK(b != kNoBlock, "free list shorter than num_free");
    if (num_hits_free > 0 && contains(match.blocks, b)) continue;
    plan.new_blocks.push_back(b);
    if (meta(b).serial != 0) plan.evicted_blocks.push_back(b);
  }
  return plan;
}

void BlockPool::apply(const AllocationPlan& plan, BlockTable& table) {
  VOSTI_CHECK(plan.ok, "apply() of a plan that cannot be allocated");
  VOSTI_CHECK(plan.pool_version == version_, "apply() of a stale plan: the pool changed since plan_allocation()");
  VOSTI_CHECK(plan.hit_blocks.empty() || table.empty(), "prefix hits can only seed an empty block table");
  for (size_t i = 0; i < plan.hit_blocks.size(); ++i) {
    const BlockId b = plan.hit_blocks[i];
    table.keys_.push_back(plan.hit_keys[i]);
    table.serials_.push_back(plan.hit_serials[i]);
    if (b == kNoBlock) {  // a window table's leading block that its window no longer reads
      VOSTI_CHECK(table.num_released_ == static_cast<int32_t>(i), "only leading hits are skipped");
      table.blocks_.push_back(kNoBlock);
      ++table.num_released_;
      continue;
    }
    VOSTI_CHECK(meta(b).serial != 0, "a prefix hit on an uncached block");
    if (meta(b).on_free_list) unlink_free(b);
    ++meta(b).ref_count;
    table.blocks_.push_back(b);
  }
  for (BlockId b : plan.new_blocks) {
    VOSTI_CHECK(meta(b).on_free_list && meta(b).ref_count == 0, "allocating a block that is not free");
    unlink_free(b);
    if (meta(b).serial != 0) evict(b);
    meta(b).ref_count = 1;
    table.blocks_.push_back(b);
  }
  ++version_;
}

void BlockPool::register_full_blocks(BlockTable& table, std::span<const int32_t> tokens, int64_t num_computed_tokens) {
  if (!config_.enable_prefix_caching) return;
  VOSTI_CHECK(num_computed_tokens <= static_cast<int64_t>(tokens.size()), "more computed tokens than tokens");
  const size_t bs = static_cast<size_t>(config_.block_size);
  const size_t num_full = std::min(static_cast<size_t>(num_computed_tokens) / bs, table.blocks_.size());
  for (size_t i = table.keys_.size(); i < num_full; ++i) {
    const BlockKey parent_key = i == 0 ? kRootBlockKey : table.keys_[i - 1];
    const std::span<const int32_t> block_tokens = tokens.subspan(i * bs, bs);
    const BlockKey key = config_.hash_fn(parent_key, block_tokens, config_.identity_seed);
    table.keys_.push_back(key);
    table.serials_.push_back(0);
    const BlockId b = table.blocks_[i];
    VOSTI_CHECK(b != kNoBlock, "registering a released block");
    VOSTI_CHECK(meta(b).serial == 0, "registering " + block_name(b) + " that is already cached");
    const uint64_t parent_serial = i == 0 ? 0 : parent_serial_of(table, i);
    if (i > 0 && parent_serial == 0) continue;  // parent not cached: this block is unreachable
    if (cache_.contains(key)) continue;         // same prefix cached elsewhere, or a collision
    BlockMeta& m = meta(b);
    m.serial = next_serial_++;
    m.parent_serial = parent_serial;
    m.key = key;
    m.parent_key = parent_key;
    m.tokens.assign(block_tokens.begin(), block_tokens.end());
    cache_.emplace(key, b);
    table.serials_.back() = m.serial;
  }
  ++version_;
}

void BlockPool::release(BlockTable& table) {
  for (auto it = table.blocks_.rbegin(); it != table.blocks_.rend(); ++it) {
    if (*it == kNoBlock) continue;  // released by release_leading
    BlockMeta& m = meta(*it);
    VOSTI_CHECK(m.ref_count > 0, "releasing " + block_name(*it) + " with ref count 0");
    if (--m.ref_count == 0) push_free_tail(*it);
  }
  table.blocks_.clear();
  table.keys_.clear();
  table.serials_.clear();
  table.num_released_ = 0;
  ++version_;
}

void BlockPool::release_leading(BlockTable& table, int32_t num_blocks) {
  VOSTI_CHECK(num_blocks <= table.num_blocks(), "release_leading past the table's end");
  for (int32_t i = num_blocks - 1; i >= table.num_released_; --i) {
    const BlockId b = table.blocks_[static_cast<size_t>(i)];
    BlockMeta& m = meta(b);
    VOSTI_CHECK(m.ref_count > 0, "releasing " + block_name(b) + " with ref count 0");
    if (--m.ref_count == 0) push_free_tail(b);
    table.blocks_[static_cast<size_t>(i)] = kNoBlock;
  }
  table.num_released_ = std::max(table.num_released_, num_blocks);
  ++version_;
}

uint64_t BlockPool::parent_serial_of(const BlockTable& table, size_t i) const {
  const BlockId parent = table.blocks_[i - 1];
  return parent != kNoBlock ? meta(parent).serial : table.serials_[i - 1];
}

void BlockPool::truncate(BlockTable& table, int32_t num_blocks) {
  VOSTI_CHECK(num_blocks >= table.num_hashed_blocks(), "truncating a table into its hashed blocks");
  VOSTI_CHECK(num_blocks >= table.num_released_, "truncating a window table into its released blocks");
  while (table.num_blocks() > num_blocks) {
    const BlockId b = table.blocks_.back();
    BlockMeta& m = meta(b);
    VOSTI_CHECK(m.ref_count > 0, "releasing " + block_name(b) + " with ref count 0");
    if (--m.ref_count == 0) push_free_tail(b);
    table.blocks_.pop_back();
  }
  ++version_;
}

std::vector<BlockId> BlockPool::free_list() const {
  std::vector<BlockId> out;  // [num_free]
  for (BlockId b = free_head_; b != kNoBlock && out.size() <= meta_.size(); b = meta(b).next_free) out.push_back(b);
  return out;
}

void BlockPool::push_free_tail(BlockId b) {
  BlockMeta& m = meta(b);
  VOSTI_CHECK(!m.on_free_list, block_name(b) + " is already on the free list");
  m.on_free_list = true;
  m.prev_free = free_tail_;
  m.next_free = kNoBlock;
  if (free_tail_ != kNoBlock) {
    meta(free_tail_).next_free = b;
  } else {
    free_head_ = b;
  }
  free_tail_ = b;
  ++num_free_;
}

void BlockPool::unlink_free(BlockId b) {
  BlockMeta& m = meta(b);
  VOSTI_CHECK(m.on_free_list, block_name(b) + " is not on the free list");
  if (m.prev_free != kNoBlock) {
    meta(m.prev_free).next_free = m.next_free;
  } else {
    free_head_ = m.next_free;
  }
  if (m.next_free != kNoBlock) {
    meta(m.next_free).prev_free = m.prev_free;
  } else {
    free_tail_ = m.prev_free;
  }
  m.prev_free = m.next_free = kNoBlock;
  m.on_free_list = false;
  --num_free_;
}

int64_t BlockPool::reset_prefix_cache() {
  std::vector<BlockId> cached;
  cached.reserve(cache_.size());
  for (const auto& [key, b] : cache_) cached.push_back(b);
  for (BlockId b : cached) evict(b);
  ++version_;
  return static_cast<int64_t>(cached.size());
}

void BlockPool::evict(BlockId b) {
  BlockMeta& m = meta(b);
  const auto it = cache_.find(m.key);
  VOSTI_CHECK(it != cache_.end() && it->second == b, "evicting " + block_name(b) + " missing from the key map");
  cache_.erase(it);
  m.serial = 0;
  m.parent_serial = 0;
  m.key = m.parent_key = kRootBlockKey;
  m.tokens.clear();
}

}  // namespace vosti
