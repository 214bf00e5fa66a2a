// The CPU backend against the scalar oracle, op by op, over many shapes.
//
// Bit-exact (same formula, same operation sequence): rope, silu_mul, gelu_tanh_mul, kv_write.
// Within tolerance (different reduction order): matmul and the rms_norm sum of
// squares (oracle: sequential mul+add; CPU: lane-8 FMA dot), attention (oracle:
// two-pass softmax over all positions; CPU: online softmax over 32-position tiles,
// with exp_f32 instead of std::exp).
// Bound: kRelTol = 1e-5 on ||cpu - ref|| / ||ref||. With f32 unit roundoff
// u = 6e-8, the worst-case dot error over k terms is k*u*sum|x_i w_i| and the
// typical one grows like sqrt(k)*u; for k <= 1536 with random signs that is
// ~2e-6 relative, and softmax/exp adds a few ulps. 1e-5 leaves margin for
// rounding, yet an indexing or formula bug gives errors of order 1e-1 or more.
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "core/thread_pool.h"
#include "kernels/kernel_backend.h"
#include "tests/kernels/kernel_test_util.h"

namespace vosti {
namespace {

constexpr double kRelTol = 1e-5;

class CpuVsRef : public ::testing::Test {
 protected:
  ThreadPool pool_{2};
  std::unique_ptr<KernelBackend> cpu_ = make_cpu_backend(&pool_);
  std::unique_ptr<KernelBackend> ref_ = make_ref_backend();
};

TEST_F(CpuVsRef, MatmulOverShapes) {
  int cases = 0;
  for (int64_t k : {1, 7, 8, 9, 63, 64, 100, 576}) {
    for (int64_t n : {1, 2, 3, 5, 47, 48, 49, 97}) {
      for (int64_t m : {1, 2, 3, 4, 5, 7, 8, 13, 33, 67}) {
        const uint64_t seed = static_cast<uint64_t>(k * 10007 + n * 101 + m);
        const auto x = testing::random_floats(static_cast<size_t>(m * k), seed);
        const auto w = testing::random_floats(static_cast<size_t>(n * k), seed + 1);
        const auto bias = testing::random_floats(static_cast<size_t>(n), seed + 2);
        for (const float* b : {static_cast<const float*>(nullptr), bias.data()}) {
          std::vector<float> yc(static_cast<size_t>(m * n)), yr(static_cast<size_t>(m * n));
          cpu_->matmul(x.data(), m, k, w.data(), n, b, yc.data());
          ref_->matmul(x.data(), m, k, w.data(), n, b, yr.data());
          ASSERT_LT(testing::rel_error(yc.data(), yr.data(), yc.size()), kRelTol)
              << "m=" << m << " k=" << k << " n=" << n << " bias=" << (b != nullptr);
          ++cases;
        }
      }
    }
  }
  EXPECT_EQ(cases, 8 * 8 * 10 * 2);
}

TEST_F(CpuVsRef, MatmulEveryRowCountUpTo67) {
  const int64_t k = 77, n = 101;
  const auto w = testing::random_floats(static_cast<size_t>(n * k), 5);
  for (int64_t m = 1; m <= 67; ++m) {
    const auto x = testing::random_floats(static_cast<size_t>(m * k), 100 + static_cast<uint64_t>(m));
    std::vector<float> yc(static_cast<size_t>(m * n)), yr(static_cast<size_t>(m * n));
    cpu_->matmul(x.data(), m, k, w.data(), n, nullptr, yc.data());
    ref_->matmul(x.data(), m, k, w.data(), n, nullptr, yr.data());
    ASSERT_LT(testing::rel_error(yc.data(), yr.data(), yc.size()), kRelTol) << "m=" << m;
  }
}

TEST_F(CpuVsRef, RmsNorm) {
  for (int64_t n : {1, 5, 8, 64, 100, 576, 1536}) {
    for (int64_t m : {1, 3, 17}) {
      const auto x = testing::random_floats(static_cast<size_t>(m * n), static_cast<uint64_t>(n * 31 + m), -3, 3);
      const auto w = testing::random_floats(static_cast<size_t>(n), static_cast<uint64_t>(n), 0.5f, 1.5f);
      std::vector<float> yc(x.size()), yr(x.size());
      cpu_->rms_norm(x.data(), m, n, w.data(), 1e-5f, yc.data());
      ref_->rms_norm(x.data(), m, n, w.data(), 1e-5f, yr.data());
      ASSERT_LT(testing::rel_error(yc.data(), yr.data(), yc.size()), kRelTol) << "m=" << m << " n=" << n;
      // In place (y aliases x) gives the same bits as out of place.
      std::vector<float> inplace = x;
      cpu_->rms_norm(inplace.data(), m, n, w.data(), 1e-5f, inplace.data());
      ASSERT_TRUE(testing::bits_equal(inplace.data(), yc.data(), yc.size()));
    }
  }
}

TEST_F(CpuVsRef, RopeIsBitExact) {
  for (RopeLayout layout : {RopeLayout::kNeox, RopeLayout::kGptj}) {
    for (int head_dim : {20, 64, 128}) {
      const int num_heads = 3;
      const int64_t m = 9;
      const std::vector<int32_t> positions = {0, 1, 31, 32, 33, 511, 4095, 100000, 7};
      std::vector<float> inv_freq(static_cast<size_t>(head_dim / 2));
      for (int i = 0; i < head_dim / 2; ++i)
        inv_freq[static_cast<size_t>(i)] = std::pow(10000.0f, -2.0f * i / head_dim);
      const auto x = testing::random_floats(static_cast<size_t>(m * num_heads * head_dim), 77);
      std::vector<float> xc = x, xr = x;
      cpu_->rope(xc.data(), m, num_heads, head_dim, positions.data(), inv_freq.data(), layout);
      ref_->rope(xr.data(), m, num_heads, head_dim, positions.data(), inv_freq.data(), layout);
      ASSERT_TRUE(testing::bits_equal(xc.data(), xr.data(), x.size())) << "head_dim=" << head_dim;
      ASSERT_FALSE(testing::bits_equal(xc.data(), x.data(), x.size()));  // it did rotate
    }
  }
}

TEST_F(CpuVsRef, SiluMulIsBitExact) {
  for (int64_t n : {1, 9, 1536}) {
    for (int64_t m : {1, 4, 13}) {
      const auto gu = testing::random_floats(static_cast<size_t>(m * 2 * n), static_cast<uint64_t>(n + m), -8, 8);
      std::vector<float> yc(static_cast<size_t>(m * n)), yr(static_cast<size_t>(m * n));
      cpu_->silu_mul(gu.data(), m, n, yc.data());
      ref_->silu_mul(gu.data(), m, n, yr.data());
      ASSERT_TRUE(testing::bits_equal(yc.data(), yr.data(), yc.size())) << "m=" << m << " n=" << n;
    }
  }
}

TEST_F(CpuVsRef, SiluMulIsBitExactAtExtremes) {
  // exp overflow and underflow inside silu: g = -100 gives exp(100) = inf and silu = -0.
  const std::vector<float> gate = {-100.0f, 100.0f,  -88.8f, 88.8f,  -87.4f, 87.4f, 0.0f,  -0.0f,
                                   1e-30f,  -1e-30f, 30.0f,  -30.0f, 3.5f,   -3.5f, 1e10f, -1e10f};
  const int64_t n = static_cast<int64_t>(gate.size());
  std::vector<float> gu(gate);
  const auto up = testing::random_floats(gate.size(), 9, 0.5f, 2.0f);
  gu.insert(gu.end(), up.begin(), up.end());
  std::vector<float> yc(gate.size()), yr(gate.size());
  cpu_->silu_mul(gu.data(), 1, n, yc.data());
  ref_->silu_mul(gu.data(), 1, n, yr.data());
  EXPECT_TRUE(testing::bits_equal(yc.data(), yr.data(), yc.size()));
  EXPECT_EQ(yr[0], 0.0f);
  EXPECT_FLOAT_EQ(yr[1], 100.0f * up[1]);
}

TEST_F(CpuVsRef, GeluTanhMulIsBitExact) {
  for (int64_t n : {1, 9, 1536}) {
    for (int64_t m : {1, 4, 13}) {
      const auto gu = testing::random_floats(static_cast<size_t>(m * 2 * n), static_cast<uint64_t>(3 * n + m), -8, 8);
      std::vector<float> yc(static_cast<size_t>(m * n)), yr(static_cast<size_t>(m * n));
      cpu_->gelu_tanh_mul(gu.data(), m, n, yc.data());
      ref_->gelu_tanh_mul(gu.data(), m, n, yr.data());
      ASSERT_TRUE(testing::bits_equal(yc.data(), yr.data(), yc.size())) << "m=" << m << " n=" << n;
    }
  }
}

TEST_F(CpuVsRef, GeluTanhMulIsBitExactAtExtremes) {
  // exp overflow and underflow inside the GELU, and g^3 overflowing to +-inf (g = +-1e13).
  const std::vector<float> gate = {-100.0f, 100.0f,  -30.0f, 30.0f, -10.0f, 10.0f,  0.0f,  -0.0f,
                                   1e-30f,  -1e-30f, 3.5f,   -3.5f, 1e10f,  -1e10f, 1e13f, -1e13f};
  const int64_t n = static_cast<int64_t>(gate.size());
  std::vector<float> gu(gate);
  const auto up = testing::random_floats(gate.size(), 19, 0.5f, 2.0f);
  gu.insert(gu.end(), up.begin(), up.end());
  std::vector<float> yc(gate.size()), yr(gate.size());
  cpu_->gelu_tanh_mul(gu.data(), 1, n, yc.data());
  ref_->gelu_tanh_mul(gu.data(), 1, n, yr.data());
  EXPECT_TRUE(testing::bits_equal(yc.data(), yr.data(), yc.size()));
  EXPECT_EQ(yr[0], 0.0f);
  EXPECT_FLOAT_EQ(yr[1], 100.0f * up[1]);
  EXPECT_EQ(yr[15], 0.0f);
}

TEST_F(CpuVsRef, KvWriteIsBitExact) {
  testing::PagedPool pc(6, 4, 2, 8), pr(6, 4, 2, 8);
  const auto kn = testing::random_floats(5 * 2 * 8, 1);
  const auto vn = testing::random_floats(5 * 2 * 8, 2);
  const std::vector<int32_t> slots = {23, 0, -1, 9, 14};
  cpu_->kv_write(kn.data(), vn.data(), 5, slots.data(), pc.view);
  ref_->kv_write(kn.data(), vn.data(), 5, slots.data(), pr.view);
  EXPECT_EQ(pc.k, pr.k);
  EXPECT_EQ(pc.v, pr.v);
  EXPECT_EQ(pc.k[static_cast<size_t>(23 * 16)], kn[0]);
}

// Queries of several sequences at positions crossing tile (32) and block boundaries,
// KV in shuffled physical blocks, GQA ratios 1, 3, 4, 10, head_dim 20, 64, 96, 128; every
// other query under a sliding window of 40 positions (its first tile cut inside a tile).
TEST_F(CpuVsRef, AttentionOverShapes) {
  const std::vector<int32_t> positions = {0, 1, 15, 16, 31, 32, 33, 63, 64, 65, 100, 257, 71, 72};
  for (int head_dim : {20, 64, 96, 128}) {  // 20 and 96 exercise the non-multiple-of-64 paths
    for (int ratio : {1, 3, 4, 10}) {       // 10: more heads per kv head than one CPU work item takes (8)
      for (int block_size : {16, 12}) {
        const int kv_heads = 2, num_heads = kv_heads * ratio;
        std::vector<int64_t> counts;
        for (int32_t p : positions) counts.push_back(testing::blocks_for(p + 1, block_size));
        int64_t total = 0;
        for (int64_t c : counts) total += c;
        testing::PagedPool pool(total + 3, block_size, kv_heads, head_dim);
        const auto tables = testing::shuffled_block_tables(total + 3, counts, static_cast<uint64_t>(head_dim + ratio));
        std::vector<AttentionQuery> queries;
        for (size_t s = 0; s < positions.size(); ++s) {
          const int64_t len = positions[s] + 1;
          const size_t sz = static_cast<size_t>(len * kv_heads * head_dim);
          pool.place(testing::random_floats(sz, 10 + s, -2, 2), testing::random_floats(sz, 20 + s), len, tables[s]);
          queries.push_back({tables[s].data(), positions[s], attention_window_first(positions[s], s % 2 ? 40 : 0)});
        }
        const int64_t m = static_cast<int64_t>(positions.size());
        const auto q = testing::random_floats(static_cast<size_t>(m * num_heads * head_dim), 3, -2, 2);
        std::vector<float> oc(q.size()), orf(q.size());
        const float scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
        cpu_->attention(q.data(), m, num_heads, queries.data(), pool.view, scale, oc.data());
        ref_->attention(q.data(), m, num_heads, queries.data(), pool.view, scale, orf.data());
        ASSERT_LT(testing::rel_error(oc.data(), orf.data(), oc.size()), kRelTol)
            << "head_dim=" << head_dim << " ratio=" << ratio << " block_size=" << block_size;
      }
    }
  }
}

}  // namespace
}  // namespace vosti
