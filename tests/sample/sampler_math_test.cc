#include "sample/sampler_math.h"

#include <gtest/gtest.h>

#include <algorithm>
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
  x[3] = 5.0f;  // in a lane
  EXPECT_EQ(max_value(x.data(), x.size()), 5.0f);
  x[9] = kInf;
  EXPECT_EQ(max_value(x.data(), x.size()), kInf);
}

TEST(SamplerMath, LaneSumsFollowTheDocumentedOrder) {
  std::vector<float> w(8 * kSumLanes + 105);  // several ids a lane, the last lanes one fewer
  for (size_t i = 0; i < w.size(); ++i) w[i] = 1.0f / static_cast<float>(i + 1) + static_cast<float>(i % 7) * 1e-3f;
  double lanes[kSumLanes] = {};
  for (size_t i = 0; i < w.size(); ++i) lanes[i % kSumLanes] += static_cast<double>(w[i]);
  double total = 0.0;
  for (const double l : lanes) total += l;
  // All at once, in chunks that start on lane boundaries, and over an id list.
  LaneSums whole, chunked;
  add_lane_sums(w.data(), w.size(), whole);
  constexpr size_t kPiece = 3 * kSumLanes;
  for (size_t begin = 0; begin < w.size(); begin += kPiece)
    add_lane_sums(w.data() + begin, std::min<size_t>(kPiece, w.size() - begin), chunked);
  std::vector<int32_t> ids(w.size());
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>(i);
  const LaneSums listed = lane_sums_of(w.data(), ids);
  for (size_t j = 0; j < kSumLanes; ++j) {
    EXPECT_EQ(whole.lane[j], lanes[j]);
    EXPECT_EQ(chunked.lane[j], lanes[j]);
    EXPECT_EQ(listed.lane[j], lanes[j]);
  }
  EXPECT_EQ(whole.total(), total);
}

TEST(SamplerMath, BitComparisonsMatchFloatComparisons) {
  const float values[] = {-kInf, -3.5f, -1e-30f, -0.0f, 0.0f, 1e-30f, 2.0f, 2.0000002f, kInf};
  for (const float a : values) {
    for (const float b : values) {
      EXPECT_EQ(same_float(a, b), a == b) << a << " " << b;
      EXPECT_EQ(greater_float(a, b), a > b) << a << " " << b;
      if (a < b) {
        EXPECT_LT(order_key(a), order_key(b));
      }
    }
  }
}

TEST(SamplerMath, FindFirstScansBlocksAndTail) {
  std::vector<float> x(300, 1.0f);
  auto above = [](float v) { return [v](float y) { return greater_float(y, v); }; };
  EXPECT_EQ(find_first(x.data(), 0, x.size(), above(1.0f)), x.size());
  x[200] = 3.0f;
  x[299] = 5.0f;
  EXPECT_EQ(find_first(x.data(), 0, x.size(), above(1.0f)), 200u);
  EXPECT_EQ(find_first(x.data(), 201, x.size(), above(1.0f)), 299u);  // in the ragged tail
  EXPECT_EQ(find_first(x.data(), 0, x.size(), above(4.0f)), 299u);
  x[5] = -0.0f;
  EXPECT_EQ(find_first(x.data(), 0, x.size(), [](float y) { return same_float(y, 0.0f); }), 5u);
}

}  // namespace
}  // namespace vosti
