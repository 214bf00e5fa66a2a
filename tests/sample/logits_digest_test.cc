// The logits digest (sample/logits_digest.h: sample/xxh3.h, the source the device digest compiles
// too) against libxxhash's XXH3-128, an independent implementation: equal for every row length a
// logits row can have, above and below XXH3's long-input threshold.
#include "sample/logits_digest.h"

#include <gtest/gtest.h>

#include <random>
#include <vector>

#include <xxhash.h>

namespace vosti {
namespace {

TEST(LogitsDigest, SharedArithmeticMatchesLibxxhash) {
  std::mt19937 rng(1);
  std::vector<int64_t> vocabs = {1,   2,   59,   60,   61,    62,     64,     255,   256,
                                 257, 320, 1000, 4096, 49152, 128256, 151936, 262144};
  for (int i = 0; i < 40; ++i) vocabs.push_back(61 + static_cast<int64_t>(rng() % 70000));
  for (const int64_t vocab : vocabs) {
    std::vector<float> row(static_cast<size_t>(vocab));
    std::normal_distribution<float> n(0.0f, 3.0f);
    for (float& x : row) x = n(rng);
    const LogitsDigest ours = logits_digest(row);
    const XXH128_hash_t reference = XXH3_128bits(row.data(), row.size() * sizeof(float));
    EXPECT_EQ(ours[0], reference.low64) << "vocab " << vocab;
    EXPECT_EQ(ours[1], reference.high64) << "vocab " << vocab;
  }
}

TEST(LogitsDigest, OneBitChangesTheDigest) {
  std::vector<float> row(1000, 0.5f);
  const LogitsDigest a = logits_digest(row);
  row[517] = std::nextafter(row[517], 1.0f);
  EXPECT_NE(a, logits_digest(row));
}

}  // namespace
}  // namespace vosti
