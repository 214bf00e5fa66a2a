// The sampler's scalar arithmetic (sample/sampler_scalar.h), the one source the host sampler and
// the device sampler compile: its order keys and lane walk against plain float and double
// comparisons written here. (Its exp is tested in sampler_math_test.cc; the device build of the
// same source is checked against sample_token() in tests/engine_cuda.)
#include "sample/sampler_scalar.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

namespace vosti {
namespace {

std::vector<float> sample_floats() {
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(-40.0f, 40.0f);
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> values = {0.0f, -0.0f, inf, -inf, 1.0f, -1.0f, 1e-40f, -1e-40f};
  for (int i = 0; i < 100000; ++i) values.push_back(u(rng));
  return values;
}

TEST(SamplerScalar, KeysOrderLikeTheFloats) {
  const std::vector<float> values = sample_floats();
  for (size_t i = 0; i + 1 < values.size(); ++i) {
    const float x = values[i], y = values[i + 1];
    EXPECT_EQ(from_order_key(order_key(x)), x);
    EXPECT_EQ(std::bit_cast<uint32_t>(from_order_key(order_key(x))), std::bit_cast<uint32_t>(x));
    EXPECT_EQ(same_float(x, y), x == y);
    EXPECT_EQ(greater_float(x, y), x > y) << x << " " << y;
    // select_key orders like the float comparison the sampler's sorts use.
    EXPECT_EQ(x > y, select_key(x) > select_key(y)) << x << " " << y;
    EXPECT_EQ(x == y, select_key(x) == select_key(y)) << x << " " << y;
  }
  EXPECT_EQ(select_key(0.0f), select_key(-0.0f));
  EXPECT_LT(order_key(-0.0f), order_key(0.0f));
}

TEST(SamplerScalar, SanitizeMapsNanToMinusInfinityOnly) {
  EXPECT_EQ(sanitize_logit(std::numeric_limits<float>::quiet_NaN()), -std::numeric_limits<float>::infinity());
  EXPECT_EQ(sanitize_logit(-std::numeric_limits<float>::quiet_NaN()), -std::numeric_limits<float>::infinity());
  for (const float x : sample_floats())
    EXPECT_EQ(std::bit_cast<uint32_t>(sanitize_logit(x)), std::bit_cast<uint32_t>(x));
}

TEST(SamplerScalar, LaneWalkFollowsTheDocumentedDraw) {
  std::mt19937 rng(4);
  for (int trial = 0; trial < 2000; ++trial) {
    double lanes[kSumLanes];
    for (double& l : lanes) l = rng() % 3 == 0 ? 0.0 : static_cast<double>(rng() % 1000) / 7.0;
    double total = 0.0;
    for (const double l : lanes) total = total + l;
    if (total == 0.0) continue;
    EXPECT_EQ(std::bit_cast<uint64_t>(lanes_total(lanes)), std::bit_cast<uint64_t>(total));
    const double u = static_cast<double>(rng()) / 4294967296.0;
    // sampler.h step 8: the first lane whose running sum exceeds u * W, else the last.
    const double target = u * total;
    int lane = 0;
    double before = 0.0;
    while (lane + 1 < kSumLanes && !(before + lanes[lane] > target)) before += lanes[lane++];
    const LanePick pick = pick_lane(lanes, u);
    ASSERT_EQ(pick.lane, lane) << "u " << u;
    EXPECT_EQ(std::bit_cast<uint64_t>(pick.lane_target), std::bit_cast<uint64_t>(target - before));
    EXPECT_GT(lanes[pick.lane], 0.0) << "a chosen lane has weight";
  }
}

}  // namespace
}  // namespace vosti
