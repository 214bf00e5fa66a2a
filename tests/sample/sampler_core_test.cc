// The device sampler's scalar arithmetic (kernels/cuda/sampler_core.h, compiled here as plain
// C++) against the host sampler's (sample/sampler_math.h, sample/philox.h): the same bits for
// every input tried, so that the GPU sampler starts from the host's arithmetic. The GPU side
// (the same header under nvcc) is checked against sample_token() in tests/engine_cuda.
#include "kernels/cuda/sampler_core.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <limits>
#include <random>

#include "sample/philox.h"
#include "sample/sampler_math.h"

namespace vosti {
namespace {

TEST(SamplerCore, ExpNonpositiveMatchesTheHostOnEveryNegativeFloatSampled) {
  // Every 97th negative float (22 million values) plus the edges.
  int64_t checked = 0;
  for (uint64_t bits = 0x80000000u; bits <= 0xffffffffu; bits += 97) {
    const float d = std::bit_cast<float>(static_cast<uint32_t>(bits));
    const uint32_t host = std::bit_cast<uint32_t>(exp_nonpositive(d));
    const uint32_t core = std::bit_cast<uint32_t>(sampler_core::exp_nonpositive(d));
    ASSERT_EQ(host, core) << "d = " << d;
    ++checked;
  }
  for (float d : {0.0f, -0.0f, -87.0f, -87.00001f, -1e-30f, -std::numeric_limits<float>::infinity(), 1.0f, 3e38f}) {
    EXPECT_EQ(std::bit_cast<uint32_t>(exp_nonpositive(d)), std::bit_cast<uint32_t>(sampler_core::exp_nonpositive(d)))
        << d;
  }
  EXPECT_GT(checked, 20000000);
}

TEST(SamplerCore, ExpFromMaxOrderKeysAndComparisonsMatchTheHost) {
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(-40.0f, 40.0f);
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> values = {0.0f, -0.0f, inf, -inf, 1.0f, -1.0f, 1e-40f, -1e-40f};
  for (int i = 0; i < 100000; ++i) values.push_back(u(rng));
  for (size_t i = 0; i + 1 < values.size(); ++i) {
    const float x = values[i], y = values[i + 1];
    const float m = std::max(x, y);
    if (x <= m) {
      EXPECT_EQ(std::bit_cast<uint32_t>(exp_from_max(x, m)), std::bit_cast<uint32_t>(sampler_core::exp_from_max(x, m)));
    }
    EXPECT_EQ(order_key(x), sampler_core::order_key(x));
    EXPECT_EQ(sampler_core::from_order_key(sampler_core::order_key(x)), x);
    EXPECT_EQ(same_float(x, y), sampler_core::same_float(x, y));
    // select_key orders like the float comparison the sampler's sorts use.
    EXPECT_EQ(x > y, sampler_core::select_key(x) > sampler_core::select_key(y)) << x << " " << y;
    EXPECT_EQ(x == y, sampler_core::select_key(x) == sampler_core::select_key(y)) << x << " " << y;
  }
  EXPECT_EQ(sampler_core::select_key(0.0f), sampler_core::select_key(-0.0f));
}

TEST(SamplerCore, PhiloxAndTheSamplingUniformMatchTheHost) {
  std::mt19937_64 rng(9);
  for (int i = 0; i < 20000; ++i) {
    const uint64_t seed = rng(), pos = i < 100 ? static_cast<uint64_t>(i) : rng();
    EXPECT_EQ(std::bit_cast<uint64_t>(sampling_uniform(seed, pos)),
              std::bit_cast<uint64_t>(sampler_core::sampling_uniform(seed, pos)));
  }
}

TEST(SamplerCore, LaneTotalsAndLanePickFollowTheDraw) {
  LaneSums sums;
  double lanes[8];
  std::mt19937 rng(4);
  for (size_t j = 0; j < 8; ++j) lanes[j] = sums.lane[j] = static_cast<double>(rng() % 1000) / 7.0;
  EXPECT_EQ(std::bit_cast<uint64_t>(sums.total()), std::bit_cast<uint64_t>(sampler_core::lanes_total(lanes)));
  // u just below 1 picks the last lane; u = 0 the first lane with a positive sum.
  EXPECT_EQ(sampler_core::pick_lane(lanes, 0.999999).lane, 7);
  EXPECT_EQ(sampler_core::pick_lane(lanes, 0.0).lane, lanes[0] > 0 ? 0 : 1);
}

}  // namespace
}  // namespace vosti
