#include "cache/block_key.h"

#include <gtest/gtest.h>

#include <vector>

namespace vosti {
namespace {

TEST(BlockKeyTest, SameInputsGiveTheSameKey) {
  const std::vector<int32_t> t = {1, 2, 3, 4};
  EXPECT_EQ(hash_block(kRootBlockKey, t, 7), hash_block(kRootBlockKey, t, 7));
}

TEST(BlockKeyTest, KeyDependsOnTokensOrderParentAndSeed) {
  const std::vector<int32_t> t = {1, 2, 3, 4};
  const std::vector<int32_t> swapped = {2, 1, 3, 4};
  const BlockKey k = hash_block(kRootBlockKey, t, 7);
  EXPECT_NE(k, hash_block(kRootBlockKey, swapped, 7));
  EXPECT_NE(k, hash_block(kRootBlockKey, t, 8));
  EXPECT_NE(k, hash_block(BlockKey{1, 0}, t, 7));
  EXPECT_NE(k, hash_block(BlockKey{0, 1}, t, 7));
  EXPECT_NE(k, kRootBlockKey);
}

TEST(BlockKeyTest, ChainedKeysDistinguishEqualBlocksWithDifferentPrefixes) {
  const std::vector<int32_t> a = {5, 6}, b = {7, 8}, c = {9, 9};
  const BlockKey after_a = hash_block(hash_block(kRootBlockKey, a, 0), c, 0);
  const BlockKey after_b = hash_block(hash_block(kRootBlockKey, b, 0), c, 0);
  EXPECT_NE(after_a, after_b);
}

TEST(BlockKeyTest, LargeBlocksUseTheHeapPathConsistently) {
  std::vector<int32_t> big(1000);  // 4000 bytes: past the stack buffer
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<int32_t>(i * 31);
  const BlockKey k = hash_block(kRootBlockKey, big, 3);
  EXPECT_EQ(k, hash_block(kRootBlockKey, big, 3));
  big[999] += 1;
  EXPECT_NE(k, hash_block(kRootBlockKey, big, 3));
}

}  // namespace
}  // namespace vosti
