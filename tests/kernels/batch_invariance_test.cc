// Batch invariance of the CPU backend, bit for bit (memcmp, zero tolerance):
// a row's output never depends on the number of rows, its index, the other rows,
// the thread count or (attention) the physical KV layout and the other queries.
// A deliberately broken backend (PlantedBug::kSplitKByRowCount) must be caught.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <vector>

#include "core/thread_pool.h"
#include "kernels/kernel_backend.h"
#include "tests/kernels/kernel_test_util.h"
#include "tests/support/planted.h"

namespace vosti {
namespace {

const int kThreadCounts[] = {1, 2, 3, 16};

// Counts (m, r, trial) cases where row r of an m-row matmul on `batched` differs in
// any bit from the same row computed alone (m = 1) on `alone`. Other rows are random
// and change between trials.
int count_matmul_row_mismatches(KernelBackend& alone, KernelBackend& batched, int64_t k, int64_t n, int64_t max_m,
                                const float* bias) {
  const auto w = testing::random_floats(static_cast<size_t>(n * k), 11);
  const auto target = testing::random_floats(static_cast<size_t>(k), 12);
  std::vector<float> y_alone(static_cast<size_t>(n));
  alone.matmul(target.data(), 1, k, w.data(), n, bias, y_alone.data());
  int mismatches = 0;
  for (int64_t m = 1; m <= max_m; ++m) {
    for (int64_t r : {int64_t{0}, m - 1, m / 2, (m * 7) / 11}) {
      for (uint64_t trial = 0; trial < 2; ++trial) {
        auto x = testing::random_floats(static_cast<size_t>(m * k),
                                        1000 * static_cast<uint64_t>(m) + 10 * trial + static_cast<uint64_t>(r));
        std::copy(target.begin(), target.end(), x.begin() + r * k);
        std::vector<float> y(static_cast<size_t>(m * n));
        batched.matmul(x.data(), m, k, w.data(), n, bias, y.data());
        if (!testing::bits_equal(y.data() + r * n, y_alone.data(), static_cast<size_t>(n))) ++mismatches;
      }
    }
  }
  return mismatches;
}

TEST(BatchInvariance, MatmulRowIsIndependentOfBatchAndThreads) {
  ThreadPool one(1);
  auto alone = make_cpu_backend(&one);
  const auto bias = testing::random_floats(247, 3);
  for (int threads : kThreadCounts) {
    ThreadPool pool(threads);
    auto cpu = make_cpu_backend(&pool);
    // k = 77: 9 lane blocks + a 5-element tail; n = 247: 5 column chunks + a partial one,
    // not a multiple of the 3-column micro-kernel.
    EXPECT_EQ(count_matmul_row_mismatches(*alone, *cpu, 77, 247, 70, nullptr), 0) << "threads=" << threads;
    EXPECT_EQ(count_matmul_row_mismatches(*alone, *cpu, 77, 247, 70, bias.data()), 0) << "threads=" << threads;
  }
}

TEST(BatchInvariance, MatmulRowIsIndependentOfBatchAtModelWidth) {
  ThreadPool one(1), two(2);
  auto alone = make_cpu_backend(&one);
  auto cpu = make_cpu_backend(&two);
  EXPECT_EQ(count_matmul_row_mismatches(*alone, *cpu, 576, 100, 20, nullptr), 0);
}

TEST(BatchInvariance, PlantedSplitKBugIsDetected) {
  ThreadPool one(1), two(2);
  auto alone = make_cpu_backend(&one);
  auto broken = make_planted_cpu_backend(&two);
  EXPECT_NE(broken->name(), alone->name());
  const int mismatches = count_matmul_row_mismatches(*alone, *broken, 77, 247, 70, nullptr);
  EXPECT_GT(mismatches, 0) << "the invariance check must catch a reduction split that reads the row count";
  // The bug is subtle: numerically the broken result is still close (within rounding).
  const auto x = testing::random_floats(2 * 77, 1);
  const auto w = testing::random_floats(247 * 77, 2);
  std::vector<float> yb(2 * 247), yg(2 * 247);
  broken->matmul(x.data(), 2, 77, w.data(), 247, nullptr, yb.data());
  alone->matmul(x.data(), 2, 77, w.data(), 247, nullptr, yg.data());
  EXPECT_LT(testing::rel_error(yb.data(), yg.data(), yb.size()), 1e-5);
  EXPECT_FALSE(testing::bits_equal(yb.data(), yg.data(), yb.size()));
}

TEST(BatchInvariance, RopeRowIsIndependentOfBatchAndThreads) {
  ThreadPool one(1);
  auto alone = make_cpu_backend(&one);
  const int heads = 3, head_dim = 64;
  const size_t row = static_cast<size_t>(heads * head_dim);
  std::vector<float> inv_freq(head_dim / 2);
  for (int i = 0; i < head_dim / 2; ++i) inv_freq[static_cast<size_t>(i)] = std::pow(10000.0f, -2.0f * i / head_dim);
  const auto target = testing::random_floats(row, 5);
  const int32_t target_pos = 77;
  for (RopeLayout layout : {RopeLayout::kNeox, RopeLayout::kGptj}) {
    std::vector<float> want = target;
    alone->rope(want.data(), 1, heads, head_dim, &target_pos, inv_freq.data(), layout);
    for (int threads : kThreadCounts) {
      ThreadPool pool(threads);
      auto cpu = make_cpu_backend(&pool);
      for (int64_t m : {2, 9, 40}) {
        const int64_t r = m - 1;
        auto x = testing::random_floats(static_cast<size_t>(m) * row, static_cast<uint64_t>(m));
        std::copy(target.begin(), target.end(), x.begin() + r * static_cast<int64_t>(row));
        std::vector<int32_t> positions(static_cast<size_t>(m));
        for (int64_t i = 0; i < m; ++i) positions[static_cast<size_t>(i)] = static_cast<int32_t>(i * 13);
        positions[static_cast<size_t>(r)] = target_pos;
        cpu->rope(x.data(), m, heads, head_dim, positions.data(), inv_freq.data(), layout);
        EXPECT_TRUE(testing::bits_equal(x.data() + r * static_cast<int64_t>(row), want.data(), row))
            << "threads=" << threads << " m=" << m;
      }
    }
  }
}

TEST(BatchInvariance, RmsNormAndSiluRowsAreIndependentOfBatchAndThreads) {
  ThreadPool one(1);
  auto alone = make_cpu_backend(&one);
  const int64_t n = 100;
  const auto target = testing::random_floats(static_cast<size_t>(2 * n), 1, -4, 4);
  const auto weight = testing::random_floats(static_cast<size_t>(n), 2);
  std::vector<float> norm_alone(static_cast<size_t>(n)), silu_alone(static_cast<size_t>(n));
  alone->rms_norm(target.data(), 1, n, weight.data(), 1e-6f, norm_alone.data());
  alone->silu_mul(target.data(), 1, n, silu_alone.data());
  for (int threads : kThreadCounts) {
    ThreadPool pool(threads);
    auto cpu = make_cpu_backend(&pool);
    for (int64_t m : {2, 5, 33, 70}) {
      const int64_t r = m / 3;
      auto x = testing::random_floats(static_cast<size_t>(m * 2 * n), static_cast<uint64_t>(m), -4, 4);
      std::copy(target.begin(), target.end(), x.begin() + r * 2 * n);
      std::vector<float> y(static_cast<size_t>(m * n));
      cpu->silu_mul(x.data(), m, n, y.data());
      EXPECT_TRUE(testing::bits_equal(y.data() + r * n, silu_alone.data(), static_cast<size_t>(n)));
      std::copy(target.begin(), target.begin() + n, x.begin() + r * n);
      std::vector<float> z(static_cast<size_t>(m * n));
      cpu->rms_norm(x.data(), m, n, weight.data(), 1e-6f, z.data());
      EXPECT_TRUE(testing::bits_equal(z.data() + r * n, norm_alone.data(), static_cast<size_t>(n)))
          << "threads=" << threads << " m=" << m;
    }
  }
}

// The target sequence's logical KV, a query at position p, and other sequences.
struct AttentionScenario {
  int num_heads, kv_heads, head_dim;
  int32_t p;
  int window;                       // sliding window of every query (0: none)
  std::vector<float> k_log, v_log;  // [p + 1, kv_heads, head_dim]
  std::vector<float> q;             // [num_heads, head_dim]
};

// Runs the target query at row `row` of a batch with `num_others` other queries (other
// sequences at random positions, and earlier positions of the target's own sequence as in
// a prefill chunk), with the KV in a layout shuffled by `layout_seed`; returns the target's output.
std::vector<float> attend_in_batch(KernelBackend& be, const AttentionScenario& s, int block_size, int64_t row,
                                   int64_t num_others, uint64_t layout_seed) {
  const int64_t len = s.p + 1;
  std::vector<int32_t> other_pos;
  std::vector<int64_t> counts = {testing::blocks_for(len, block_size)};
  for (int64_t i = 0; i < num_others; ++i) {
    other_pos.push_back(static_cast<int32_t>((layout_seed * 37 + static_cast<uint64_t>(i) * 53) % 150));
    counts.push_back(testing::blocks_for(other_pos.back() + 1, block_size));
  }
  int64_t total = 5;
  for (int64_t c : counts) total += c;
  testing::PagedPool pool(total, block_size, s.kv_heads, s.head_dim);
  const auto tables = testing::shuffled_block_tables(total, counts, layout_seed);
  pool.place(s.k_log, s.v_log, len, tables[0]);
  const int64_t m = num_others + 1;
  const size_t qrow = static_cast<size_t>(s.num_heads * s.head_dim);
  auto q = testing::random_floats(static_cast<size_t>(m) * qrow, layout_seed + 99);
  std::vector<AttentionQuery> queries;
  for (int64_t i = 0, other = 0; i < m; ++i) {
    if (i == row) {
      std::copy(s.q.begin(), s.q.end(), q.begin() + static_cast<std::ptrdiff_t>(static_cast<size_t>(i) * qrow));
      queries.push_back({tables[0].data(), s.p, attention_window_first(s.p, s.window)});
    } else if (other % 3 == 2) {  // an earlier position of the target's own sequence
      const auto p = static_cast<int32_t>((s.p * (other + 1)) / (num_others + 1));
      queries.push_back({tables[0].data(), p, attention_window_first(p, s.window)});
      ++other;
    } else {
      const size_t o = static_cast<size_t>(other++);
      const size_t sz = static_cast<size_t>((other_pos[o] + 1) * s.kv_heads * s.head_dim);
      pool.place(testing::random_floats(sz, layout_seed + o), testing::random_floats(sz, layout_seed + 50 + o),
                 other_pos[o] + 1, tables[o + 1]);
      queries.push_back({tables[o + 1].data(), other_pos[o], attention_window_first(other_pos[o], s.window)});
    }
  }
  std::vector<float> out(static_cast<size_t>(m) * qrow);
  be.attention(q.data(), m, s.num_heads, queries.data(), pool.view, 0.125f, out.data());
  return std::vector<float>(out.begin() + static_cast<std::ptrdiff_t>(static_cast<size_t>(row) * qrow),
                            out.begin() + static_cast<std::ptrdiff_t>(static_cast<size_t>(row + 1) * qrow));
}

TEST(BatchInvariance, AttentionTokenIsIndependentOfBatchLayoutAndThreads) {
  ThreadPool one(1);
  auto alone = make_cpu_backend(&one);
  int compared = 0;
  for (int ratio : {1, 3, 4, 10}) {
    for (int32_t p : {0, 31, 32, 70, 129}) {
      // A sliding window of 45 for odd ratios: the first tile starts inside a tile.
      AttentionScenario s{2 * ratio, 2, 64, p, ratio % 2 ? 45 : 0, {}, {}, {}};
      const size_t kv_size = static_cast<size_t>((p + 1) * s.kv_heads * s.head_dim);
      s.k_log = testing::random_floats(kv_size, static_cast<uint64_t>(p) * 7 + 1, -2, 2);
      s.v_log = testing::random_floats(kv_size, static_cast<uint64_t>(p) * 7 + 2);
      s.q = testing::random_floats(static_cast<size_t>(s.num_heads * s.head_dim), static_cast<uint64_t>(p) + 3, -2, 2);
      const auto reference = attend_in_batch(*alone, s, 16, 0, 0, 1);
      for (int threads : kThreadCounts) {
        ThreadPool pool(threads);
        auto cpu = make_cpu_backend(&pool);
        for (int64_t others : {1, 6, 13}) {
          for (int block_size : {16, 8}) {  // the tiles are logical: even another block size agrees
            const auto got =
                attend_in_batch(*cpu, s, block_size, others / 2, others, 7 + static_cast<uint64_t>(others));
            ASSERT_TRUE(testing::bits_equal(got.data(), reference.data(), reference.size()))
                << "ratio=" << ratio << " p=" << p << " threads=" << threads << " others=" << others
                << " block_size=" << block_size;
            ++compared;
          }
        }
      }
    }
  }
  EXPECT_EQ(compared, 4 * 5 * 4 * 3 * 2);
}

}  // namespace
}  // namespace vosti
