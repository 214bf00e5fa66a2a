// exp_f32 (the shared exp of silu_mul and CPU attention) and its 8-lane twin; the tanh GELU and
// tanh_f32 built on it against double-precision formulas; the transposed 8-way tree sum of the
// CPU attention against hsum8.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "kernels/cpu/simd_avx2.h"
#include "kernels/ref/scalar_math.h"
#include "tests/kernels/kernel_test_util.h"

namespace vosti {
namespace {

std::vector<float> exp_inputs() {
  std::vector<float> xs = {0.0f,
                           -0.0f,
                           1.0f,
                           -1.0f,
                           0.5f,
                           1e-8f,
                           -1e-8f,
                           88.0f,
                           88.7f,
                           kExpOverflow,
                           std::nextafter(kExpOverflow, 100.0f),
                           89.0f,
                           -87.0f,
                           kExpUnderflow,
                           std::nextafter(kExpUnderflow, -100.0f),
                           -88.0f,
                           -100.0f,
                           1e30f,
                           -1e30f,
                           std::numeric_limits<float>::infinity(),
                           -std::numeric_limits<float>::infinity(),
                           std::numeric_limits<float>::quiet_NaN()};
  for (float x = -90.0f; x < 90.0f; x += 0.0137f) xs.push_back(x);
  while (xs.size() % 8 != 0) xs.push_back(0.25f);
  return xs;
}

TEST(ScalarMath, ExpLane8MatchesExpF32BitForBit) {
  const auto xs = exp_inputs();
  for (size_t i = 0; i < xs.size(); i += 8) {
    float lanes[8];
    _mm256_storeu_ps(lanes, avx2::exp_lane8(_mm256_loadu_ps(xs.data() + i)));
    for (int l = 0; l < 8; ++l) {
      const float want = exp_f32(xs[i + static_cast<size_t>(l)]);
      ASSERT_EQ(std::memcmp(&lanes[l], &want, sizeof(float)), 0) << "x=" << xs[i + static_cast<size_t>(l)];
    }
  }
}

// gelu_tanh_times(g, 1) against the tanh GELU in double, x * sigmoid(2z) (PyTorch's
// 0.5 x (1 + tanh z) in exact arithmetic; in double that form cancels to 0 in the far left
// tail): within 4 + 4|2z| ulp of the result (or 1e-37, past f32's range). Where PyTorch's form
// does not cancel (|g| < 4), also within that of it.
TEST(ScalarMath, GeluTanhMatchesTheFormula) {
  for (double g = -12.0; g <= 12.0; g += 0.00731) {
    const auto gf = static_cast<float>(g);
    const double x = gf;
    const double z = std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x);
    const double want = x / (1.0 + std::exp(-2.0 * z));
    const double got = gelu_tanh_times(gf, 1.0f);
    // exp's f32 argument -2z carries a few |2z| ulps of rounding (as in PyTorch's f32 evaluation).
    const double ulps = 4.0 + 4.0 * std::fabs(2.0 * z);
    ASSERT_NEAR(got, want, ulps * std::fabs(want) * 6e-8 + 1e-37) << "g=" << gf;  // f32 underflows below ~1e-38
    if (std::fabs(x) < 4.0) {
      const double torch_form = 0.5 * x * (1.0 + std::tanh(z));
      ASSERT_NEAR(got, torch_form, ulps * std::fabs(torch_form) * 6e-8) << "g=" << gf;
    }
  }
  EXPECT_EQ(gelu_tanh_times(-1e13f, 1.0f), 0.0f);
  EXPECT_EQ(gelu_tanh_times(1e13f, 2.0f), 2e13f);
  EXPECT_TRUE(std::isnan(gelu_tanh_times(std::numeric_limits<float>::quiet_NaN(), 1.0f)));
}

TEST(ScalarMath, TanhF32MatchesTanh) {
  for (double x = -20.0; x <= 20.0; x += 0.00917) {
    const auto xf = static_cast<float>(x);
    ASSERT_NEAR(tanh_f32(xf), std::tanh(static_cast<double>(xf)), 1.2e-7) << "x=" << xf;
  }
  EXPECT_EQ(tanh_f32(1000.0f), 1.0f);
  EXPECT_EQ(tanh_f32(-1000.0f), -1.0f);
  EXPECT_EQ(tanh_f32(0.0f), 0.0f);
}

TEST(ScalarMath, Hsum8x8MatchesHsum8BitForBit) {
  const auto vals = testing::random_floats(64 * 50, 4, -1e4f, 1e4f);
  for (size_t base = 0; base < vals.size(); base += 64) {
    __m256 acc[8];
    for (int j = 0; j < 8; ++j) acc[j] = _mm256_loadu_ps(vals.data() + base + 8 * static_cast<size_t>(j));
    float got[8];
    _mm256_storeu_ps(got, avx2::hsum8x8(acc));
    for (int j = 0; j < 8; ++j) {
      const float want = avx2::hsum8(acc[j]);
      ASSERT_EQ(std::memcmp(&got[j], &want, sizeof(float)), 0) << "accumulator " << j;
    }
  }
  // The order is observable with cancellation: the tree ((a0+a4)+(a2+a6))+((a1+a5)+(a3+a7))
  // gives 0 here, the sequential sum gives 0.5.
  const float lanes[8] = {1e8f, 1.0f, -1e8f, 1.0f, 3.0f, -1e8f, 1e8f, 0.5f};
  float sequential = 0.0f;
  for (float v : lanes) sequential += v;
  EXPECT_EQ(sequential, 0.5f);
  __m256 acc[8];
  for (int j = 0; j < 8; ++j) acc[j] = _mm256_loadu_ps(lanes);
  float got[8];
  _mm256_storeu_ps(got, avx2::hsum8x8(acc));
  for (int j = 0; j < 8; ++j) EXPECT_EQ(got[j], 0.0f);
  EXPECT_EQ(avx2::hsum8(acc[0]), 0.0f);
}

TEST(ScalarMath, ExpF32IsAccurate) {
  // Relative error against double exp: <= 2 ulp (2.4e-7) over the normal range.
  double worst = 0.0;
  for (float x = -87.0f; x < 88.5f; x += 0.00731f) {
    const double want = std::exp(static_cast<double>(x));
    worst = std::max(worst, std::abs(static_cast<double>(exp_f32(x)) - want) / want);
  }
  EXPECT_LT(worst, 2.4e-7);
  EXPECT_EQ(exp_f32(0.0f), 1.0f);
  EXPECT_EQ(exp_f32(-200.0f), 0.0f);
  EXPECT_EQ(exp_f32(200.0f), std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(exp_f32(std::numeric_limits<float>::quiet_NaN())));
}

}  // namespace
}  // namespace vosti
