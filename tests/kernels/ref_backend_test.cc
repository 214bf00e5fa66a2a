// The scalar oracle against values worked out by hand.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "kernels/kernel_backend.h"
#include "tests/kernels/kernel_test_util.h"

namespace vosti {
namespace {

TEST(RefBackend, MatmulSmallExactValues) {
  auto ref = make_ref_backend();
  const std::vector<float> x = {1, 2, 3, 4, 5, 6};                        // [2, 3]
  const std::vector<float> w = {1, 0, 0, 0, 1, 1, 2, 2, 2, 1, -1, 0.5f};  // [4, 3]
  const std::vector<float> bias = {0.5f, 0, 0, -1};
  std::vector<float> y(8);
  ref->matmul(x.data(), 2, 3, w.data(), 4, bias.data(), y.data());
  const std::vector<float> want = {1.5f, 5, 12, -1 + 0.5f, 4.5f, 11, 30, -1 + 2};
  EXPECT_EQ(y, want);
}

TEST(RefBackend, MatmulIsTheSequentialSumForEveryColumn) {
  auto ref = make_ref_backend();
  const int64_t m = 3, k = 29, n = 7;  // columns 0..3 take the 4-column path, 4..6 the single one
  const auto x = testing::random_floats(static_cast<size_t>(m * k), 1);
  const auto w = testing::random_floats(static_cast<size_t>(n * k), 2);
  const auto bias = testing::random_floats(static_cast<size_t>(n), 3);
  std::vector<float> y(static_cast<size_t>(m * n));
  ref->matmul(x.data(), m, k, w.data(), n, bias.data(), y.data());
  for (int64_t r = 0; r < m; ++r) {
    for (int64_t c = 0; c < n; ++c) {
      float s = 0.0f;
      for (int64_t i = 0; i < k; ++i) s += x[static_cast<size_t>(r * k + i)] * w[static_cast<size_t>(c * k + i)];
      s += bias[static_cast<size_t>(c)];
      EXPECT_EQ(y[static_cast<size_t>(r * n + c)], s) << "r=" << r << " c=" << c;
    }
  }
}

TEST(RefBackend, RmsNormOfConstantRowIsWeight) {
  auto ref = make_ref_backend();
  const std::vector<float> x = {2, 2, 2, 2, -3, 3, -3, 3};  // [2, 4]
  const std::vector<float> w = {1, 2, 0.5f, -1};
  std::vector<float> y(8);
  ref->rms_norm(x.data(), 2, 4, w.data(), 0.0f, y.data());
  const std::vector<float> want = {1, 2, 0.5f, -1, -1, 2, -0.5f, -1};
  EXPECT_EQ(y, want);
}

TEST(RefBackend, RopeAtPositionZeroIsIdentityAndRotatesPairs) {
  auto ref = make_ref_backend();
  const std::vector<float> inv_freq = {1.0f, 0.5f};
  std::vector<float> x = {1, 2, 3, 4};  // [1 token, 1 head, 4]
  const int32_t pos0 = 0;
  ref->rope(x.data(), 1, 1, 4, &pos0, inv_freq.data(), RopeLayout::kNeox);
  EXPECT_EQ(x, (std::vector<float>{1, 2, 3, 4}));
  // NeoX pairs (x0, x2) with angle p*1 and (x1, x3) with angle p*0.5.
  const int32_t pos = 2;
  ref->rope(x.data(), 1, 1, 4, &pos, inv_freq.data(), RopeLayout::kNeox);
  EXPECT_FLOAT_EQ(x[0], 1 * std::cos(2.0f) - 3 * std::sin(2.0f));
  EXPECT_FLOAT_EQ(x[2], 3 * std::cos(2.0f) + 1 * std::sin(2.0f));
  EXPECT_FLOAT_EQ(x[1], 2 * std::cos(1.0f) - 4 * std::sin(1.0f));
  // GPT-J pairs (x0, x1) with angle p*1.
  std::vector<float> g = {1, 2, 3, 4};
  ref->rope(g.data(), 1, 1, 4, &pos, inv_freq.data(), RopeLayout::kGptj);
  EXPECT_FLOAT_EQ(g[0], 1 * std::cos(2.0f) - 2 * std::sin(2.0f));
  EXPECT_FLOAT_EQ(g[1], 2 * std::cos(2.0f) + 1 * std::sin(2.0f));
  EXPECT_FLOAT_EQ(g[3], 4 * std::cos(1.0f) + 3 * std::sin(1.0f));
}

TEST(RefBackend, SiluMulValues) {
  auto ref = make_ref_backend();
  const std::vector<float> gu = {0, 1, -2, 3, 5, 7};  // [1, 2*3]: gate {0,1,-2}, up {3,5,7}
  std::vector<float> y(3);
  ref->silu_mul(gu.data(), 1, 3, y.data());
  EXPECT_EQ(y[0], 0.0f);
  EXPECT_FLOAT_EQ(y[1], 5.0f / (1.0f + std::exp(-1.0f)));
  EXPECT_FLOAT_EQ(y[2], 7.0f * -2.0f / (1.0f + std::exp(2.0f)));
}

TEST(RefBackend, AttentionOverOnePositionReturnsItsValue) {
  auto ref = make_ref_backend();
  testing::PagedPool pool(4, 2, 1, 4);
  const std::vector<float> k = {1, 0, 0, 0};
  const std::vector<float> v = {3, -1, 2, 8};
  const std::vector<int32_t> table = {3};
  pool.place(k, v, 1, table);
  const std::vector<float> q = {5, 5, 5, 5};
  const AttentionQuery query{table.data(), 0};
  std::vector<float> out(4);
  ref->attention(q.data(), 1, 1, &query, pool.view, 0.5f, out.data());
  EXPECT_EQ(out, v);
}

TEST(RefBackend, AttentionWithEqualKeysAveragesValues) {
  auto ref = make_ref_backend();
  testing::PagedPool pool(8, 2, 1, 2);
  const std::vector<float> k = {1, 1, 1, 1, 1, 1};  // [3, 1, 2]: all keys equal
  const std::vector<float> v = {0, 3, 3, 6, 6, 0};  // mean (3, 3)
  const std::vector<int32_t> table = {5, 1};        // positions 0,1 in block 5; 2 in block 1
  pool.place(k, v, 3, table);
  const std::vector<float> q = {0.3f, -0.7f};
  const AttentionQuery query{table.data(), 2};
  std::vector<float> out(2);
  ref->attention(q.data(), 1, 1, &query, pool.view, 1.0f, out.data());
  EXPECT_FLOAT_EQ(out[0], 3.0f);
  EXPECT_FLOAT_EQ(out[1], 3.0f);
}

TEST(RefBackend, AttentionReadsOnlyFromTheQuerysFirstPosition) {
  auto ref = make_ref_backend();
  testing::PagedPool pool(8, 2, 1, 2);
  const std::vector<float> k = {9, 9, 1, 1, 1, 1};  // [3, 1, 2]: position 0 would dominate
  const std::vector<float> v = {100, 100, 0, 3, 6, 3};
  const std::vector<int32_t> table = {5, 1};
  pool.place(k, v, 3, table);
  const std::vector<float> q = {1.0f, 1.0f};
  const AttentionQuery query{table.data(), 2, 1};  // positions 1..2, equal keys: the mean of their values
  std::vector<float> out(2);
  ref->attention(q.data(), 1, 1, &query, pool.view, 1.0f, out.data());
  EXPECT_FLOAT_EQ(out[0], 3.0f);
  EXPECT_FLOAT_EQ(out[1], 3.0f);
}

TEST(RefBackend, KvWriteSkipsPaddingSlots) {
  auto ref = make_ref_backend();
  testing::PagedPool pool(2, 2, 1, 2);
  const std::vector<float> kn = {1, 2, 3, 4};  // [2, 1, 2]
  const std::vector<float> vn = {5, 6, 7, 8};
  const std::vector<int32_t> slots = {3, -1};
  ref->kv_write(kn.data(), vn.data(), 2, slots.data(), pool.view);
  EXPECT_EQ(pool.k[6], 1.0f);
  EXPECT_EQ(pool.k[7], 2.0f);
  EXPECT_EQ(pool.v[6], 5.0f);
  EXPECT_EQ(pool.k[0], 1e4f);  // untouched
}

}  // namespace
}  // namespace vosti
