#include "sample/sampler_math.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

namespace vosti {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

TEST(SamplerMath, SpecialValues) {
  EXPECT_EQ(exp_nonpositive(0.0f), 1.0f);
  EXPECT_EQ(exp_nonpositive(-0.0f), 1.0f);
  EXPECT_EQ(exp_nonpositive(3.0f), 1.0f);  // clamped to 0
  EXPECT_EQ(exp_nonpositive(-kInf), 0.0f);
  EXPECT_EQ(exp_nonpositive(-87.5f), 0.0f);
  EXPECT_GT(exp_nonpositive(-87.0f), 0.0f);
  EXPECT_GE(exp_nonpositive(-87.0f), std::numeric_limits<float>::min());  // never subnormal
  EXPECT_EQ(exp_from_max(kInf, kInf), 1.0f);
  EXPECT_EQ(exp_from_max(-kInf, -kInf), 1.0f);
  EXPECT_EQ(exp_from_max(1.0f, kInf), 0.0f);
}

// Within 4 ulp of the correctly rounded exp over the whole kept range.
TEST(SamplerMath, AccurateOverTheRange) {
  float worst_ulps = 0.0f;
  for (float d = -87.0f; d <= 0.0f; d += 0.000731f) {
    const double want = std::exp(static_cast<double>(d));
    const float got = exp_nonpositive(d);
    const double ulp = std::nextafter(static_cast<float>(want), kInf) - static_cast<float>(want);
    worst_ulps = std::max(worst_ulps, static_cast<float>(std::abs(got - want) / ulp));
  }
  EXPECT_LT(worst_ulps, 4.0f);
}

TEST(SamplerMath, VectorLoopMatchesScalarBitForBit) {
  std::vector<float> x(1003), out(1003);
  for (size_t i = 0; i < x.size(); ++i) x[i] = -static_cast<float>(i) * 0.0917f;
  x[5] = -kInf;
  exp_from_max_n(x.data(), 0.0f, out.data(), x.size());
  for (size_t i = 0; i < x.size(); ++i) ASSERT_EQ(out[i], exp_from_max(x[i], 0.0f)) << i;
}

TEST(SamplerMath, MaxValue) {
  std::vector<float> x(37, -1.0f);
  EXPECT_EQ(max_value(x.data(), 0), -kInf);
  x[36] = 2.0f;  // in the scalar tail
  EXPECT_EQ(max_value(x.data(), x.size()), 2.0f);
  x[3] = 5.0f;   // in a lane
  EXPECT_EQ(max_value(x.data(), x.size()), 5.0f);
  x[9] = kInf;
  EXPECT_EQ(max_value(x.data(), x.size()), kInf);
}

}  // namespace
}  // namespace vosti
