// BlockPool: bookkeeping for the paged KV cache. No tensors: only block ids, reference
// counts, the free list and the prefix-cache map (nano-vllm's block manager with vLLM
// v1's eviction order and lazy eviction; llama.cpp's plan -> apply).
//
// Model. num_blocks physical blocks of block_size token slots. A block is USED (ref
// count > 0: held by that many block tables) or FREE (ref 0, on the free list). The free
// list is in eviction order: release() appends to its tail, allocation takes from its
// head, a prefix-cache hit on a free block takes it out of the middle. A full, computed
// block may be CACHED: it is findable by its chain key (block_key.h) and the pool keeps
// its tokens, its parent key and its parent's registration serial. A cached block stays
// cached after it is freed, until allocation reuses it (lazy eviction: only then is its
// key dropped). Only full blocks are ever cached or shared.
//
// A hit at chain level i requires: the key matches, the stored tokens equal the
// request's tokens, the stored parent key equals the request's key at level i-1, and
// the stored parent serial equals the serial of the block matched at level i-1. By
// induction a hit block holds exactly the KV of the request's prefix, whatever the hash.
//
// Window tables (block_table.h): the sliding-window layers' blocks live in a pool of their own
// and a request releases the leading blocks its window can no longer read (release_leading);
// a released block stays cached, keyed by the prefix it completes, never by where it sits.
// A prefix hit seeds such a table with kNoBlock for the matched blocks it does not need.
//
// Invariants (check_invariants): ref counts equal the number of tables holding each
// block; free <=> ref 0 <=> on the free list, exactly once; the key map and the block
// metadata agree both ways; every cached block's key recomputes from its parent key and
// tokens; used + free == num_blocks.
//
// Thread safety: none. One owner (the scheduler) on one thread.
#pragma once

#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

#include "cache/block_key.h"
#include "cache/block_table.h"
#include "core/status.h"

namespace vosti {

struct BlockPoolConfig {
  int32_t block_size = 16;            // tokens per block (a deployment constant)
  int64_t num_blocks = 0;             // > 0
  bool enable_prefix_caching = true;  // off: match_prefix finds nothing, nothing is registered
  uint64_t identity_seed = 0;         // the deployment's identity, mixed into every key
  uint64_t shuffle_seed = 0;          // != 0: initial free order is a seeded permutation
  BlockHashFn hash_fn = &hash_block;  // tests substitute a colliding hash
};

// The longest chain of cached full blocks that equals a token prefix.
struct PrefixMatch {
  std::vector<BlockId> blocks;    // [num_blocks] hit blocks, in table order
  std::vector<BlockKey> keys;     // [num_blocks] their chain keys
  std::vector<uint64_t> serials;  // [num_blocks] their registration serials
  int32_t num_tokens = 0;         // blocks.size() * block_size

  // Keeps the first num_blocks blocks (a hit as long as another group's).
  void truncate(int32_t num_blocks);
  // Marks the first num_blocks blocks kNoBlock: a window table takes their keys, not the blocks.
  void skip_leading(int32_t num_blocks);
};

// What allocating for one table would do; apply() performs exactly this.
struct AllocationPlan {
  bool ok = false;                      // can_allocate: enough free blocks
  std::vector<BlockId> hit_blocks;      // [num_hits] cached blocks to share (table was empty)
  std::vector<BlockKey> hit_keys;       // [num_hits]
  std::vector<uint64_t> hit_serials;    // [num_hits]
  std::vector<BlockId> new_blocks;      // [num_new] taken from the free-list head, in order
  std::vector<BlockId> evicted_blocks;  // subset of new_blocks whose cache entry is dropped
  int32_t num_free_after = 0;           // free blocks left if applied
  uint64_t pool_version = 0;            // apply() REQUIRES the pool unchanged since planning
};

class BlockPool {
 public:
  // Validates the config (block_size > 0, num_blocks > 0, hash_fn set).
  static Result<BlockPool> create(const BlockPoolConfig& config);

  const BlockPoolConfig& config() const { return config_; }
  int32_t block_size() const { return config_.block_size; }
  int64_t num_blocks() const { return config_.num_blocks; }
  int64_t num_free_blocks() const { return num_free_; }
  int64_t num_used_blocks() const { return config_.num_blocks - num_free_; }
  int64_t num_cached_blocks() const { return static_cast<int64_t>(cache_.size()); }
  // Blocks needed to hold num_tokens positions.
  int32_t blocks_for(int64_t num_tokens) const;

  // Longest cached chain equal to tokens' leading FULL blocks (the partial tail is
  // never matched). Empty if prefix caching is off.
  PrefixMatch match_prefix(std::span<const int32_t> tokens) const;

  // Plans growing `table` to cover num_tokens positions, sharing `match` first.
  // REQUIRES: match is empty unless table is empty; match came from this pool unchanged.
  AllocationPlan plan_allocation(const BlockTable& table, const PrefixMatch& match, int64_t num_tokens) const;

  // Applies a plan made against the current pool state. REQUIRES: plan.ok, and no
  // mutation since plan_allocation (checked via pool_version).
  void apply(const AllocationPlan& plan, BlockTable& table);

  // Registers table's full, computed blocks [num_hashed_blocks, num_computed_tokens /
  // block_size) in the prefix cache, chaining from the table's keys. A block whose key
  // is already cached, or whose parent is not the cached block of its parent key, is
  // left unregistered (and so are its successors). The chain keys are still recorded.
  // REQUIRES: tokens are the table owner's tokens, num_computed_tokens <= tokens.size().
  void register_full_blocks(BlockTable& table, std::span<const int32_t> tokens, int64_t num_computed_tokens);

  // Drops table's references (last block first, so a chain's tail is evicted before
  // its head) and empties the table. Cached blocks stay findable until reused.
  void release(BlockTable& table);

  // Releases table's entries [0, num_blocks) that still hold a block (last first) and makes
  // them kNoBlock: a window table's blocks that no query of its owner can read any more.
  // REQUIRES: num_blocks <= table.num_blocks().
  void release_leading(BlockTable& table, int32_t num_blocks);
  // Drops the references of table's blocks past its first num_blocks (last first) and keeps the
  // rest: speculative decoding's roll-back of blocks that held only rejected draft positions.
  // A window table keeps its released entries. REQUIRES: num_blocks >= table.num_hashed_blocks() (a
  // registered block is never dropped so) and >= table.num_released_blocks().
  void truncate(BlockTable& table, int32_t num_blocks);

  // Forgets every prefix-cache entry (free and used blocks alike: no later match finds a block
  // registered before the call). Ref counts, tables and the free order are untouched; a used
  // block's later successors stay unregistered (their parent is no longer cached). Returns the
  // number of entries dropped.
  int64_t reset_prefix_cache();

  // Full consistency check; `tables` must be every live table holding blocks of this pool.
  Status check_invariants(std::span<const BlockTable* const> tables) const;

  // Test and debug views.
  int32_t ref_count(BlockId b) const { return meta_[static_cast<size_t>(b)].ref_count; }
  bool is_cached(BlockId b) const { return meta_[static_cast<size_t>(b)].serial != 0; }
  // [block_size] the tokens a cached block was registered with (empty if not cached).
  std::span<const int32_t> cached_tokens(BlockId b) const { return meta_[static_cast<size_t>(b)].tokens; }
  std::vector<BlockId> free_list() const;  // head (next evicted) first

 private:
  struct BlockMeta {
    int32_t ref_count = 0;
    BlockId prev_free = kNoBlock;  // free-list links (valid while on the list)
    BlockId next_free = kNoBlock;
    bool on_free_list = false;
    uint64_t serial = 0;          // != 0: cached, registration number (unique)
    uint64_t parent_serial = 0;   // the parent's registration serial (0: root)
    BlockKey key;                 // valid while cached
    BlockKey parent_key;          // valid while cached
    std::vector<int32_t> tokens;  // [block_size] valid while cached
  };

  explicit BlockPool(const BlockPoolConfig& config);
  BlockMeta& meta(BlockId b) { return meta_[static_cast<size_t>(b)]; }
  const BlockMeta& meta(BlockId b) const { return meta_[static_cast<size_t>(b)]; }
  void push_free_tail(BlockId b);
  void unlink_free(BlockId b);
  void evict(BlockId b);
  // The registration serial of table entry i's parent (entry i - 1, or its recorded serial
  // once a window table released it). REQUIRES: 0 < i < table.num_hashed_blocks() + 1.
  uint64_t parent_serial_of(const BlockTable& table, size_t i) const;
  Status check_free_list(std::vector<uint8_t>& on_list) const;
  Status check_cache() const;

  BlockPoolConfig config_;
  std::vector<BlockMeta> meta_;  // [num_blocks]
  BlockId free_head_ = kNoBlock;
  BlockId free_tail_ = kNoBlock;
  int64_t num_free_ = 0;
  std::unordered_map<BlockKey, BlockId, BlockKeyHasher> cache_;  // key -> cached block
  uint64_t next_serial_ = 1;
  uint64_t version_ = 0;  // bumped by every mutation
};

}  // namespace vosti
