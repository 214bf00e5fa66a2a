#include "sample/philox.h"

#include <gtest/gtest.h>

#include <set>

namespace vosti {
namespace {

struct Kat {
  PhiloxCounter counter;
  PhiloxKey key;
  PhiloxCounter expected;
};

// Random123 tests/kat_vectors, the "philox4x32 10" lines: counter[4] key[2] -> output[4].
constexpr Kat kKat10[] = {
    {{0x00000000, 0x00000000, 0x00000000, 0x00000000},
     {0x00000000, 0x00000000},
     {0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}},
    {{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff},
     {0xffffffff, 0xffffffff},
     {0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}},
    {{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344},
     {0xa4093822, 0x299f31d0},
     {0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}},
};

// The "philox4x32 7" lines of the same file: they pin the round schedule independently.
constexpr Kat kKat7[] = {
    {{0x00000000, 0x00000000, 0x00000000, 0x00000000},
     {0x00000000, 0x00000000},
     {0x5f6fb709, 0x0d893f64, 0x4f121f81, 0x4f730a48}},
    {{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff},
     {0xffffffff, 0xffffffff},
     {0x5207ddc2, 0x45165e59, 0x4d8ee751, 0x8c52f662}},
    {{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344},
     {0xa4093822, 0x299f31d0},
     {0x4dfccaba, 0x190a87f0, 0xc47362ba, 0xb6b5242a}},
};

static_assert(philox4x32_10(kKat10[2].counter, kKat10[2].key) == kKat10[2].expected,
              "Philox4x32-10 is usable and correct at compile time");

TEST(Philox, Random123KnownAnswers10Rounds) {
  for (const Kat& kat : kKat10) EXPECT_EQ(philox4x32_10(kat.counter, kat.key), kat.expected);
}

TEST(Philox, Random123KnownAnswers7Rounds) {
  for (const Kat& kat : kKat7) EXPECT_EQ(philox4x32<7>(kat.counter, kat.key), kat.expected);
}

TEST(Philox, SeedSplitsLowWordFirst) {
  EXPECT_EQ(philox_key_from_seed(0x0123456789abcdefull), (PhiloxKey{0x89abcdef, 0x01234567}));
}

TEST(Philox, UniformMappingIsExact) {
  EXPECT_EQ(uniform_from_philox({0, 0, 7, 7}), 0.0);
  // All 53 bits set: the largest double below 1.
  EXPECT_EQ(uniform_from_philox({0xffffffff, 0xffffffff, 0, 0}), 1.0 - 0x1p-53);
  // Bit 31 of x[0] is the top bit: exactly one half. The low 11 bits of x[1] are dropped.
  EXPECT_EQ(uniform_from_philox({0x80000000, 0x000007ff, 0, 0}), 0.5);
  EXPECT_EQ(uniform_from_philox({0, 0x00000800, 0, 0}), 0x1p-53);
}

TEST(Philox, SamplingUniformUsesPositionAsCounter) {
  const uint64_t seed = 0xfeedface12345678ull;
  const uint64_t pos = 0x0000000500000003ull;
  const PhiloxCounter x = philox4x32_10({3, 5, kSamplingStream, 0}, philox_key_from_seed(seed));
  EXPECT_EQ(sampling_uniform(seed, pos), uniform_from_philox(x));
}

TEST(Philox, DistinctPositionsAndSeedsGiveDistinctUniforms) {
  std::set<double> seen;
  for (uint64_t pos = 0; pos < 4096; ++pos) {
    const double u = sampling_uniform(42, pos);
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
    seen.insert(u);
  }
  for (uint64_t seed = 0; seed < 4096; ++seed) seen.insert(sampling_uniform(seed, 0));
  EXPECT_EQ(seen.size(), 2u * 4096u - 1u);  // (seed 42, pos 0) is in both loops
}

}  // namespace
}  // namespace vosti
