#include "cache/block_pool.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <vector>

namespace vosti {
namespace {

BlockPool make_pool(int32_t block_size, int64_t num_blocks, bool caching = true, uint64_t shuffle_seed = 0,
                    BlockHashFn hash_fn = &hash_block) {
  BlockPoolConfig c;
  c.block_size = block_size;
  c.num_blocks = num_blocks;
  c.enable_prefix_caching = caching;
  c.shuffle_seed = shuffle_seed;
  c.identity_seed = 42;
  c.hash_fn = hash_fn;
  Result<BlockPool> pool = BlockPool::create(c);
  VOSTI_CHECK(pool.ok(), pool.status().to_string());
  return std::move(pool).value();
}

std::vector<int32_t> iota_tokens(int32_t n, int32_t start = 100) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  std::iota(t.begin(), t.end(), start);
  return t;
}

// Grows `table` to num_tokens (with a prefix lookup when tokens are given); expects success.
AllocationPlan grow(BlockPool& pool, BlockTable& table, int64_t num_tokens, const PrefixMatch& match = {}) {
  AllocationPlan plan = pool.plan_allocation(table, match, num_tokens);
  EXPECT_TRUE(plan.ok);
  if (plan.ok) pool.apply(plan, table);
  return plan;
}

void expect_ok(const BlockPool& pool, std::vector<const BlockTable*> tables) {
  const Status s = pool.check_invariants(tables);
  EXPECT_TRUE(s.ok()) << s.to_string();
}

TEST(BlockPoolTest, CreateRejectsBadConfigs) {
  BlockPoolConfig c;
  c.num_blocks = 4;
  c.block_size = 0;
  EXPECT_EQ(BlockPool::create(c).status().code(), StatusCode::kInvalidArgument);
  c.block_size = 16;
  c.num_blocks = 0;
  EXPECT_EQ(BlockPool::create(c).status().code(), StatusCode::kInvalidArgument);
  c.num_blocks = 4;
  c.hash_fn = nullptr;
  EXPECT_EQ(BlockPool::create(c).status().code(), StatusCode::kInvalidArgument);
}

TEST(BlockPoolTest, StartsAllFreeInIdOrder) {
  BlockPool pool = make_pool(4, 5);
  EXPECT_EQ(pool.num_free_blocks(), 5);
  EXPECT_EQ(pool.free_list(), (std::vector<BlockId>{0, 1, 2, 3, 4}));
  expect_ok(pool, {});
}

TEST(BlockPoolTest, ShuffleSeedPermutesTheInitialOrderDeterministically) {
  const std::vector<BlockId> a = make_pool(4, 64, true, 7).free_list();
  EXPECT_EQ(a, make_pool(4, 64, true, 7).free_list());
  EXPECT_NE(a, make_pool(4, 64, true, 8).free_list());
  std::vector<BlockId> sorted = a;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(sorted, make_pool(4, 64).free_list());
  EXPECT_NE(a, sorted);
}

TEST(BlockPoolTest, BlocksFor) {
  BlockPool pool = make_pool(4, 2);
  EXPECT_EQ(pool.blocks_for(0), 0);
  EXPECT_EQ(pool.blocks_for(1), 1);
  EXPECT_EQ(pool.blocks_for(4), 1);
  EXPECT_EQ(pool.blocks_for(5), 2);
}

TEST(BlockPoolTest, PlanDoesNotMutateAndApplyTakesFromTheHead) {
  BlockPool pool = make_pool(4, 5);
  BlockTable t;
  const AllocationPlan plan = pool.plan_allocation(t, {}, 9);  // 3 blocks
  ASSERT_TRUE(plan.ok);
  EXPECT_EQ(plan.new_blocks, (std::vector<BlockId>{0, 1, 2}));
  EXPECT_TRUE(plan.evicted_blocks.empty());
  EXPECT_EQ(plan.num_free_after, 2);
  EXPECT_EQ(pool.num_free_blocks(), 5);
  EXPECT_TRUE(t.empty());
  pool.apply(plan, t);
  EXPECT_EQ(t.blocks(), (std::vector<BlockId>{0, 1, 2}));
  EXPECT_EQ(pool.num_free_blocks(), 2);
  EXPECT_EQ(pool.ref_count(1), 1);
  expect_ok(pool, {&t});
  grow(pool, t, 12);  // still 3 blocks: nothing new
  EXPECT_EQ(t.num_blocks(), 3);
  grow(pool, t, 13);
  EXPECT_EQ(t.blocks(), (std::vector<BlockId>{0, 1, 2, 3}));
  expect_ok(pool, {&t});
}

TEST(BlockPoolTest, CannotAllocateMoreThanFree) {
  BlockPool pool = make_pool(4, 3);
  BlockTable t;
  EXPECT_FALSE(pool.plan_allocation(t, {}, 13).ok);  // 4 blocks > 3
  EXPECT_TRUE(pool.plan_allocation(t, {}, 12).ok);
}

TEST(BlockPoolTest, StalePlanIsRejected) {
  BlockPool pool = make_pool(4, 4);
  BlockTable a, b;
  const AllocationPlan plan = pool.plan_allocation(a, {}, 4);
  grow(pool, b, 4);
  EXPECT_DEATH(pool.apply(plan, a), "stale plan");
}

TEST(BlockPoolTest, ReleaseAppendsToTheTailLastBlockFirst) {
  BlockPool pool = make_pool(2, 6);
  BlockTable t;
  grow(pool, t, 6);  // blocks 0, 1, 2
  pool.release(t);
  EXPECT_TRUE(t.empty());
  EXPECT_EQ(pool.free_list(), (std::vector<BlockId>{3, 4, 5, 2, 1, 0}));
  expect_ok(pool, {&t});
}

TEST(BlockPoolTest, CheckInvariantsCatchesAMissingTable) {
  BlockPool pool = make_pool(2, 4);
  BlockTable t;
  grow(pool, t, 3);
  EXPECT_FALSE(pool.check_invariants({}).ok());  // ref counts 1 but no table holds them
  const BlockTable* twice[] = {&t, &t};
  EXPECT_FALSE(pool.check_invariants(twice).ok());
  expect_ok(pool, {&t});
}

TEST(BlockPoolTest, FullComputedBlocksAreRegisteredAndMatched) {
  BlockPool pool = make_pool(4, 8);
  const std::vector<int32_t> tokens = iota_tokens(10);
  BlockTable a;
  grow(pool, a, 10);
  pool.register_full_blocks(a, tokens, 6);  // only block 0 is full and computed
  EXPECT_EQ(a.num_hashed_blocks(), 1);
  EXPECT_TRUE(pool.is_cached(a[0]));
  EXPECT_FALSE(pool.is_cached(a[1]));
  pool.register_full_blocks(a, tokens, 10);  // block 1 now; block 2 is partial: never
  EXPECT_EQ(a.num_hashed_blocks(), 2);
  EXPECT_EQ(pool.num_cached_blocks(), 2);
  expect_ok(pool, {&a});

  const PrefixMatch m = pool.match_prefix(tokens);  // 10 tokens: 2 full blocks
  EXPECT_EQ(m.blocks, (std::vector<BlockId>{a[0], a[1]}));
  EXPECT_EQ(m.num_tokens, 8);
  EXPECT_EQ(pool.match_prefix(std::span<const int32_t>(tokens).first(7)).num_tokens, 4);
  std::vector<int32_t> other = tokens;
  other[5] = -1;  // differs inside block 1
  EXPECT_EQ(pool.match_prefix(other).num_tokens, 4);
  other[0] = -1;
  EXPECT_EQ(pool.match_prefix(other).num_tokens, 0);
}

TEST(BlockPoolTest, ResetPrefixCacheForgetsFreeAndUsedBlocks) {
  BlockPool pool = make_pool(4, 8);
  const std::vector<int32_t> tokens = iota_tokens(12);
  BlockTable a, b;
  grow(pool, a, 12);
  pool.register_full_blocks(a, tokens, 12);  // 3 cached blocks, used by a
  grow(pool, b, 8);
  pool.register_full_blocks(b, iota_tokens(8, 500), 8);
  pool.release(b);  // 2 cached blocks, free
  ASSERT_EQ(pool.num_cached_blocks(), 5);
  const std::vector<BlockId> free_before = pool.free_list();
  EXPECT_EQ(pool.reset_prefix_cache(), 5);
  EXPECT_EQ(pool.num_cached_blocks(), 0);
  EXPECT_EQ(pool.match_prefix(tokens).num_tokens, 0);
  EXPECT_EQ(pool.match_prefix(iota_tokens(8, 500)).num_tokens, 0);
  EXPECT_EQ(pool.free_list(), free_before);  // the eviction order is untouched
  EXPECT_EQ(pool.ref_count(a[0]), 1);
  expect_ok(pool, {&a});
  // a's table keeps its chain keys, but a later full block of a has no cached parent: it stays
  // unregistered, so nothing cached before the reset can be reached through it.
  std::vector<int32_t> longer = iota_tokens(16);
  grow(pool, a, 16);
  pool.register_full_blocks(a, longer, 16);
  EXPECT_EQ(pool.num_cached_blocks(), 0);
  expect_ok(pool, {&a});
  EXPECT_EQ(pool.reset_prefix_cache(), 0);
}

TEST(BlockPoolTest, HitSharesBlocksAndCountsReferences) {
  BlockPool pool = make_pool(4, 8);
  const std::vector<int32_t> tokens = iota_tokens(12);
  BlockTable a, b;
  grow(pool, a, 12);
  pool.register_full_blocks(a, tokens, 12);
  const PrefixMatch m = pool.match_prefix(std::span<const int32_t>(tokens).first(11));
  ASSERT_EQ(m.num_tokens, 8);
  const AllocationPlan plan = grow(pool, b, 12, m);
  EXPECT_EQ(plan.hit_blocks.size(), 2u);
  EXPECT_EQ(plan.new_blocks.size(), 1u);
  EXPECT_EQ(b[0], a[0]);
  EXPECT_EQ(b[1], a[1]);
  EXPECT_NE(b[2], a[2]);
  EXPECT_EQ(pool.ref_count(a[0]), 2);
  EXPECT_EQ(b.num_hashed_blocks(), 2);
  expect_ok(pool, {&a, &b});
  pool.release(a);
  EXPECT_EQ(pool.ref_count(b[0]), 1);
  expect_ok(pool, {&a, &b});
}

TEST(BlockPoolTest, FreedCachedBlocksStayFindableUntilReused) {
  BlockPool pool = make_pool(2, 4);
  const std::vector<int32_t> tokens = iota_tokens(4);
  BlockTable a;
  grow(pool, a, 4);  // blocks 0, 1
  pool.register_full_blocks(a, tokens, 4);
  pool.release(a);  // free list: 2, 3, 1, 0
  EXPECT_EQ(pool.match_prefix(tokens).num_tokens, 4);
  // A hit on a free block takes it out of the middle of the free list.
  BlockTable b;
  grow(pool, b, 4, pool.match_prefix(tokens));
  EXPECT_EQ(b.blocks(), (std::vector<BlockId>{0, 1}));
  EXPECT_EQ(pool.free_list(), (std::vector<BlockId>{2, 3}));
  pool.release(b);  // free list: 2, 3, 1, 0
  BlockTable c;
  const AllocationPlan plan = grow(pool, c, 6);  // 3 blocks: 2, 3, then 1 is evicted (lazily)
  EXPECT_EQ(plan.new_blocks, (std::vector<BlockId>{2, 3, 1}));
  EXPECT_EQ(plan.evicted_blocks, (std::vector<BlockId>{1}));
  EXPECT_FALSE(pool.is_cached(1));
  EXPECT_TRUE(pool.is_cached(0));
  EXPECT_EQ(pool.match_prefix(tokens).num_tokens, 2);  // block 0 still hits, block 1 is gone
  expect_ok(pool, {&c});
}

TEST(BlockPoolTest, PlanSkipsFreeHitBlocksWhenTakingNewOnes) {
  BlockPool pool = make_pool(2, 3);
  const std::vector<int32_t> tokens = iota_tokens(4);
  BlockTable a;
  grow(pool, a, 4);  // blocks 0, 1
  pool.register_full_blocks(a, tokens, 4);
  pool.release(a);  // free list: 2, 1, 0
  BlockTable b;
  const PrefixMatch m = pool.match_prefix(std::span<const int32_t>(tokens).first(3));  // block 0 only
  ASSERT_EQ(m.blocks, (std::vector<BlockId>{0}));
  AllocationPlan plan = pool.plan_allocation(b, m, 6);  // hit 0, plus 2 new: 2 and 1 (evicted)
  ASSERT_TRUE(plan.ok);
  EXPECT_EQ(plan.new_blocks, (std::vector<BlockId>{2, 1}));
  EXPECT_EQ(plan.evicted_blocks, (std::vector<BlockId>{1}));
  EXPECT_FALSE(pool.plan_allocation(b, m, 7).ok);  // would need a 4th block
  pool.apply(plan, b);
  expect_ok(pool, {&b});
}

TEST(BlockPoolTest, DuplicateContentIsNotRegisteredTwice) {
  BlockPool pool = make_pool(2, 8);
  const std::vector<int32_t> tokens = iota_tokens(4);
  BlockTable a, b;
  grow(pool, a, 4);
  grow(pool, b, 4);  // computed the same prefix independently (both missed)
  pool.register_full_blocks(a, tokens, 4);
  pool.register_full_blocks(b, tokens, 4);
  EXPECT_EQ(pool.num_cached_blocks(), 2);
  EXPECT_FALSE(pool.is_cached(b[0]));
  EXPECT_EQ(b.num_hashed_blocks(), 2);  // b still knows its chain keys
  expect_ok(pool, {&a, &b});
  EXPECT_EQ(pool.match_prefix(tokens).blocks, (std::vector<BlockId>{a[0], a[1]}));
}

TEST(BlockPoolTest, CachingOffNeverMatchesOrRegisters) {
  BlockPool pool = make_pool(2, 4, /*caching=*/false);
  const std::vector<int32_t> tokens = iota_tokens(4);
  BlockTable a;
  grow(pool, a, 4);
  pool.register_full_blocks(a, tokens, 4);
  EXPECT_EQ(pool.num_cached_blocks(), 0);
  EXPECT_EQ(pool.match_prefix(tokens).num_tokens, 0);
  expect_ok(pool, {&a});
}

// Test-only hashes that collide on purpose.
BlockKey constant_hash(const BlockKey&, std::span<const int32_t>, uint64_t) { return BlockKey{1, 2}; }
BlockKey sum_hash(const BlockKey&, std::span<const int32_t> tokens, uint64_t) {  // ignores the parent
  return BlockKey{static_cast<uint64_t>(std::accumulate(tokens.begin(), tokens.end(), int64_t{0})), 0};
}

TEST(BlockPoolTest, ConstantHashNeverGivesAFalseHit) {
  BlockPool pool = make_pool(2, 8, true, 0, &constant_hash);
  const std::vector<int32_t> tokens = {1, 2, 3, 4};
  BlockTable a;
  grow(pool, a, 4);
  pool.register_full_blocks(a, tokens, 4);
  EXPECT_EQ(pool.num_cached_blocks(), 1);  // block 1's key collides with block 0's: not cached
  expect_ok(pool, {&a});
  EXPECT_EQ(pool.match_prefix(std::vector<int32_t>{9, 9, 3, 4}).num_tokens, 0);
  EXPECT_EQ(pool.match_prefix(std::vector<int32_t>{1, 2, 3, 4}).num_tokens, 2);
  EXPECT_EQ(pool.match_prefix(std::vector<int32_t>{1, 2, 1, 2}).num_tokens, 2);  // level 1 parent key differs
}

TEST(BlockPoolTest, ParentIgnoringHashNeverGivesAFalseHit) {
  BlockPool pool = make_pool(2, 16, true, 0, &sum_hash);
  const std::vector<int32_t> q = {2, 1, 5, 6, 7, 8};  // block 0 sums to 3, like p's
  const std::vector<int32_t> p = {1, 2, 5, 6, 7, 8};
  BlockTable a;
  grow(pool, a, 6);
  pool.register_full_blocks(a, q, 6);
  expect_ok(pool, {&a});
  EXPECT_EQ(pool.match_prefix(p).num_tokens, 0);      // level-0 key collides, tokens differ
  const std::vector<int32_t> r = {9, 9, 5, 6, 7, 8};  // same later blocks, another first block
  EXPECT_EQ(pool.match_prefix(r).num_tokens, 0);
  BlockTable b;
  grow(pool, b, 6);
  pool.register_full_blocks(b, r, 6);  // r's level-1 key is taken by q's block: r's chain stops
  EXPECT_EQ(pool.num_cached_blocks(), 4);
  EXPECT_EQ(pool.match_prefix(r).num_tokens, 2);
  expect_ok(pool, {&a, &b});
}

}  // namespace
}  // namespace vosti
