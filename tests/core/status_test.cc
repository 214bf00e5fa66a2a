#include "core/status.h"

#include <gtest/gtest.h>

#include "core/dtype.h"
#include "core/thread_pool.h"

namespace vosti {
namespace {

Result<int> half_of(int x) {
  if (x % 2 != 0) return invalid_argument("odd: " + std::to_string(x));
  return x / 2;
}

Result<int> quarter_of(int x) {
  VOSTI_ASSIGN_OR_RETURN(int h, half_of(x));
  return half_of(h);
}

TEST(Status, ResultCarriesValueOrError) {
  EXPECT_EQ(*quarter_of(8), 2);
  auto r = quarter_of(6);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(r.status().to_string(), "INVALID_ARGUMENT: odd: 3");
  EXPECT_EQ(r.status().with_context("f.gguf").message(), "f.gguf: odd: 3");
}

TEST(DType, F16RoundTripsEveryValue) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float f = f16_to_f32(static_cast<uint16_t>(h));
    if (f != f) continue;  // NaN payloads are not preserved bit for bit
    ASSERT_EQ(f32_to_f16(f), h) << h;
  }
}

TEST(DType, F16RoundsToNearestEven) {
  // 1 + 2^-11 is halfway between 1 and the next f16 (1 + 2^-10): ties to even -> 1.
  EXPECT_EQ(f32_to_f16(1.0f + 0x1p-11f), 0x3c00);
  EXPECT_EQ(f32_to_f16(1.0f + 0x1p-11f + 0x1p-20f), 0x3c01);
  EXPECT_EQ(f32_to_f16(65520.0f), 0x7c00);  // rounds to infinity
  EXPECT_EQ(f32_to_f16(0x1p-25f), 0x0000);  // halfway to the smallest subnormal: even -> 0
  EXPECT_EQ(f32_to_f16(0x1.8p-25f), 0x0001);
}

TEST(DType, Bf16RoundsToNearestEven) {
  EXPECT_EQ(f32_to_bf16(1.0f), 0x3f80);
  EXPECT_EQ(f32_to_bf16(std::bit_cast<float>(0x3f808000u)), 0x3f80);  // tie -> even
  EXPECT_EQ(f32_to_bf16(std::bit_cast<float>(0x3f818000u)), 0x3f82);  // tie -> even (up)
  EXPECT_EQ(bf16_to_f32(0x3f80), 1.0f);
}

TEST(ThreadPool, CoversTheRangeOnceForAnyThreadCount) {
  for (int threads : {1, 2, 3, 7}) {
    ThreadPool pool(threads);
    std::vector<int> hits(1000, 0);
    for (int rep = 0; rep < 20; ++rep) {
      pool.parallel_for(hits.size(), 16, [&](size_t b, size_t e) {
        for (size_t i = b; i < e; ++i) hits[i]++;
      });
    }
    for (int h : hits) ASSERT_EQ(h, 20);
  }
}

}  // namespace
}  // namespace vosti
