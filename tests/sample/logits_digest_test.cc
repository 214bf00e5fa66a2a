// The logits digest (sample/logits_digest.h, libxxhash's XXH3-128) and the device digest's
// arithmetic (kernels/cuda/xxh3_core.h, here compiled as plain C++, sequential form): equal for
// every row length a logits row can have above XXH3's short paths.
#include "sample/logits_digest.h"

#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "kernels/cuda/xxh3_core.h"

namespace vosti {
namespace {

TEST(LogitsDigest, DeviceArithmeticMatchesLibxxhash) {
  static const uint8_t secret[] = VOSTI_XXH3_SECRET_BYTES;
  std::mt19937 rng(1);
  std::vector<int64_t> vocabs = {61, 62, 64, 255, 256, 257, 320, 1000, 4096, 49152, 128256, 151936};
  for (int i = 0; i < 40; ++i) vocabs.push_back(61 + static_cast<int64_t>(rng() % 70000));
  for (const int64_t vocab : vocabs) {
    std::vector<float> row(static_cast<size_t>(vocab));
    std::normal_distribution<float> n(0.0f, 3.0f);
    for (float& x : row) x = n(rng);
    const LogitsDigest host = logits_digest(row);
    uint64_t lo = 0, hi = 0;
    xxh3::hash128_long(reinterpret_cast<const uint8_t*>(row.data()), row.size() * sizeof(float), secret, &lo, &hi);
    EXPECT_EQ(host[0], lo) << "vocab " << vocab;
    EXPECT_EQ(host[1], hi) << "vocab " << vocab;
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
