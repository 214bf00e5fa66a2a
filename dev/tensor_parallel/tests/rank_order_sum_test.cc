// The tensor-parallel all-reduce's arithmetic on the CPU (kernels/cuda/collective/rank_order_sum.h):
// the kernel's decomposition (every thread of several grids, float4 groups and the scalar tail)
// run on the host against the plain rank-order reference, over many message sizes and rank
// counts; and the reference's order itself pinned down (other associations give other bits).
#include "kernels/cuda/collective/rank_order_sum.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "tests/kernels/rank_order_sum_reference.h"

namespace vosti {
namespace {

namespace ref = rank_order_reference;

// copies [num_ranks, stride] in one buffer, 16-byte aligned (std::vector<float> of a 4-multiple
// stride is: operator new aligns to 16), with the values of `messages` and NaN in the padding.
std::vector<float> pack(const std::vector<std::vector<float>>& messages, int64_t stride) {
  std::vector<float> out(messages.size() * static_cast<size_t>(stride), std::nanf(""));
  for (size_t r = 0; r < messages.size(); ++r)
    std::copy(messages[r].begin(), messages[r].end(), out.begin() + static_cast<int64_t>(r) * stride);
  return out;
}

// The kernel's grid emulated on the host: every thread's share, in thread order.
std::vector<float> emulate(const std::vector<float>& copies, int64_t stride, int num_ranks, int64_t count,
                           bool float4_groups, int64_t num_threads) {
  std::vector<float> out(static_cast<size_t>(count), std::nanf(""));
  const int64_t groups = float4_groups ? count / 4 : 0;
  for (int64_t t = 0; t < num_threads; ++t)
    rank_order::thread_share(copies.data(), stride, num_ranks, count, groups, out.data(), t, num_threads);
  return out;
}

TEST(RankOrderSum, TheKernelsDecompositionGivesTheReferenceBits) {
  const std::vector<int64_t> counts = {1, 2, 3, 4, 5, 7, 8, 63, 64, 65, 127, 255, 256, 257, 1000, 4096, 4099, 12291};
  for (int num_ranks = 1; num_ranks <= 8; ++num_ranks) {
    for (int64_t count : counts) {
      std::vector<std::vector<float>> messages;
      for (int r = 0; r < num_ranks; ++r)
        messages.push_back(ref::spread_values(static_cast<size_t>(count), 1000u * num_ranks + 7u * r + count));
      const std::vector<float> want = ref::sum_messages(messages);
      for (int64_t stride : {count, (count + 3) / 4 * 4, (count + 3) / 4 * 4 + 8}) {
        const std::vector<float> copies = pack(messages, stride);
        const bool aligned = stride % 4 == 0;
        for (int64_t threads : {int64_t{1}, int64_t{3}, int64_t{32}, int64_t{1280}}) {
          for (bool groups : {false, aligned}) {
            const std::vector<float> got = emulate(copies, stride, num_ranks, count, groups, threads);
            ASSERT_TRUE(ref::same_bits(got.data(), want.data(), want.size()))
                << num_ranks << " ranks, count " << count << ", stride " << stride << ", " << threads
                << " threads, float4 groups " << groups;
          }
        }
      }
    }
  }
}

TEST(RankOrderSum, ARowsBitsDoNotDependOnTheMessageAroundIt) {
  // A row of 64 values, summed inside messages of 1..40 rows at every row index: the same bits.
  constexpr int kRanks = 4;
  constexpr int64_t kWidth = 64;
  std::vector<std::vector<float>> row(kRanks);
  for (int r = 0; r < kRanks; ++r) row[static_cast<size_t>(r)] = ref::spread_values(kWidth, 77u + r);
  const std::vector<float> want = ref::sum_messages(row);
  for (int64_t rows = 1; rows <= 40; rows += 3) {
    for (int64_t at = 0; at < rows; at += 2) {
      std::vector<std::vector<float>> messages(kRanks);
      for (int r = 0; r < kRanks; ++r) {
        messages[static_cast<size_t>(r)] = ref::spread_values(static_cast<size_t>(rows * kWidth), 5u * rows + r);
        std::copy(row[static_cast<size_t>(r)].begin(), row[static_cast<size_t>(r)].end(),
                  messages[static_cast<size_t>(r)].begin() + at * kWidth);
      }
      const int64_t count = rows * kWidth;
      const std::vector<float> got = emulate(pack(messages, count), count, kRanks, count, true, 1 + rows % 7);
      ASSERT_TRUE(ref::same_bits(got.data() + at * kWidth, want.data(), kWidth)) << rows << " rows, row " << at;
    }
  }
}

TEST(RankOrderSum, TheOrderIsVisible) {
  // The test data tells associations apart: from three ranks on, a pairwise tree and the reverse
  // order give other bits than the rank order on some elements; with two, every order agrees.
  constexpr size_t kCount = 4096;
  for (int num_ranks = 2; num_ranks <= 8; ++num_ranks) {
    std::vector<std::vector<float>> copies;
    for (int r = 0; r < num_ranks; ++r) copies.push_back(ref::spread_values(kCount, 31u * num_ranks + r));
    const std::vector<float> want = ref::sum_messages(copies);
    int64_t tree_differs = 0, reverse_differs = 0;
    for (size_t i = 0; i < kCount; ++i) {
      std::vector<float> level;
      for (const auto& c : copies) level.push_back(c[i]);
      while (level.size() > 1) {  // pairwise: (c0 + c1) + (c2 + c3) ...
        std::vector<float> next;
        for (size_t k = 0; k + 1 < level.size(); k += 2) next.push_back(level[k] + level[k + 1]);
        if (level.size() % 2 == 1) next.push_back(level.back());
        level = next;
      }
      float reverse = copies.back()[i];
      for (int r = num_ranks - 2; r >= 0; --r) reverse = reverse + copies[static_cast<size_t>(r)][i];
      tree_differs += !ref::same_bits(&level[0], &want[i], 1);
      reverse_differs += !ref::same_bits(&reverse, &want[i], 1);
    }
    if (num_ranks == 2) {
      EXPECT_EQ(tree_differs, 0);
      EXPECT_EQ(reverse_differs, 0) << "a + b and b + a are the same IEEE sum";
    } else {
      EXPECT_GT(reverse_differs, 0) << num_ranks << " ranks";
      if (num_ranks >= 4) {
        EXPECT_GT(tree_differs, 0) << num_ranks << " ranks";
      }
    }
  }
}

}  // namespace
}  // namespace vosti
