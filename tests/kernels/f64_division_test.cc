// The arithmetic fact the tensor-core attention's divide_row (src/kernels/cuda/attention/attention_mma_tile.cuh)
// rests on: for f32 x and l > 0, f32(f64(x) * RN64(1 / l)) is the correctly rounded quotient x / l
// (one IEEE f32 division) wherever that result is normal or x is 0; a subnormal result can differ
// (the quotient can be a midpoint between two subnormals), which is why divide_row divides such a
// row again with div.rn. The host's f64 multiply, reciprocal and conversions round to nearest as
// the GPU's __dmul_rn, __drcp_rn and __double2float_rn do, and the host's f32 division is IEEE's.
#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>

namespace vosti {
namespace {

float bits_to_float(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
uint32_t float_to_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

// divide_row's common path, one value.
float divide_f64(float x, float l) {
  const double inv = 1.0 / static_cast<double>(l);
  return static_cast<float>(static_cast<double>(x) * inv);
}

// divide_row's guard: where the f64 path may differ from the division.
bool needs_division(float x, float q) { return x != 0.f && std::fabs(q) < FLT_MIN; }

struct Counts {
  int64_t compared = 0, guarded = 0, guarded_differ = 0;
};

void check(float x, float l, Counts* c) {
  if (!std::isfinite(x) || !std::isfinite(l) || !(l > 0.f)) return;
  const float q = divide_f64(x, l), exact = x / l;
  if (needs_division(x, q)) {
    ++c->guarded;
    c->guarded_differ += float_to_bits(q) != float_to_bits(exact);
    return;
  }
  ++c->compared;
  ASSERT_EQ(float_to_bits(q), float_to_bits(exact)) << std::hexfloat << x << " / " << l << ": " << q << " vs " << exact;
}

TEST(F64Division, EqualsTheF32DivisionWhereTheResultIsNormal) {
  std::mt19937_64 rng(20261203);
  Counts c;
  for (int i = 0; i < 4'000'000; ++i) {
    const uint64_t r = rng();
    // Any finite x; l anywhere, then l in [1, 2^16) as attention's row sums are.
    const float x = bits_to_float(static_cast<uint32_t>(r));
    uint32_t lb = static_cast<uint32_t>(r >> 32) & 0x7fffffffu;
    if (i % 2 == 1) lb = (lb & 0x007fffffu) | ((127u + ((lb >> 23) & 15u)) << 23);
    check(x, bits_to_float(lb), &c);
    if (HasFatalFailure()) return;
  }
  EXPECT_GT(c.compared, 3'000'000);
}

TEST(F64Division, HardCasesAndTheSubnormalGuard) {
  std::mt19937_64 rng(7);
  Counts c;
  // Divisors with short or all-ones significands, numerators near their multiples, and tiny
  // numerators whose quotients are subnormal (where midpoints occur).
  for (int i = 0; i < 2'000'000; ++i) {
    const uint64_t r = rng();
    uint32_t lb = (static_cast<uint32_t>(r >> 32) & 0x007fffffu) | ((127u + ((r >> 55) & 15u)) << 23);
    if (i % 3 == 0) lb &= 0xffff0000u;
    if (i % 3 == 1) lb |= 0x007ffff0u;
    const float l = bits_to_float(lb);
    const float near = std::nextafter(l * static_cast<float>(static_cast<int>(r & 0xff) + 1), INFINITY);
    check(near, l, &c);
    check(bits_to_float(static_cast<uint32_t>(r) & 0x00ffffffu), l, &c);  // subnormal or tiny x
    if (HasFatalFailure()) return;
  }
  EXPECT_GT(c.guarded, 100'000);
  // The guard is needed: some subnormal quotients do differ (they go through div.rn).
  EXPECT_GT(c.guarded_differ, 0);
}

}  // namespace
}  // namespace vosti
