// Philox4x32-R: the counter-based random generator of the sampler (DESIGN.md rule 6), written
// once for the host sampler and the device sampler (VOSTI_HD: the same source compiles for both).
//
// Salmon, Moraes, Dror, Shaw, "Parallel Random Numbers: As Easy as 1, 2, 3" (SC11).
// A draw is a pure function of (counter, key): there is no state to share between
// requests or threads, so a request's randomness can never depend on anything else.
// Philox4x32-10 is checked against the Random123 known-answer vectors in
// tests/sample/philox_test.cc.
//
// How the sampler uses it (the exact, documented mapping):
//   key     = (seed & 0xffffffff, seed >> 32)
//   counter = (pos & 0xffffffff, pos >> 32, stream, 0) with pos = output position
//             (uint64) and stream = kSamplingStream for token sampling
//   u       = ((uint64(x[0]) << 21) | (x[1] >> 11)) * 2^-53, x = philox4x32_10(counter, key)
// u is a double in [0, 1) with 53 random bits, exactly representable.
// Thread safety: pure functions.
#pragma once

#include <cstdint>

#include "core/host_device.h"

namespace vosti {

struct PhiloxCounter {
  uint32_t x[4];
  friend constexpr bool operator==(const PhiloxCounter&, const PhiloxCounter&) = default;
};
struct PhiloxKey {
  uint32_t k[2];
  friend constexpr bool operator==(const PhiloxKey&, const PhiloxKey&) = default;
};

// Counter word 2 names what a draw is for, so future uses never reuse a token draw.
inline constexpr uint32_t kSamplingStream = 0;

namespace philox_detail {
inline constexpr uint32_t kMul0 = 0xD2511F53u;
inline constexpr uint32_t kMul1 = 0xCD9E8D57u;
inline constexpr uint32_t kWeyl0 = 0x9E3779B9u;  // golden ratio
inline constexpr uint32_t kWeyl1 = 0xBB67AE85u;  // sqrt(3) - 1

VOSTI_HD constexpr PhiloxCounter round(const PhiloxCounter& c, const PhiloxKey& k) {
  const uint64_t p0 = static_cast<uint64_t>(kMul0) * c.x[0];
  const uint64_t p1 = static_cast<uint64_t>(kMul1) * c.x[2];
  const auto hi0 = static_cast<uint32_t>(p0 >> 32), lo0 = static_cast<uint32_t>(p0);
  const auto hi1 = static_cast<uint32_t>(p1 >> 32), lo1 = static_cast<uint32_t>(p1);
  return {{hi1 ^ c.x[1] ^ k.k[0], lo1, hi0 ^ c.x[3] ^ k.k[1], lo0}};
}
}  // namespace philox_detail

// Philox4x32 with `kRounds` rounds (10 is the standard, crush-resistant choice).
template <int kRounds>
VOSTI_HD constexpr PhiloxCounter philox4x32(PhiloxCounter counter, PhiloxKey key) {
  static_assert(kRounds >= 1 && kRounds <= 16);
  for (int r = 0; r < kRounds; ++r) {
    if (r > 0) {
      key.k[0] += philox_detail::kWeyl0;
      key.k[1] += philox_detail::kWeyl1;
    }
    counter = philox_detail::round(counter, key);
  }
  return counter;
}

VOSTI_HD constexpr PhiloxCounter philox4x32_10(const PhiloxCounter& counter, const PhiloxKey& key) {
  return philox4x32<10>(counter, key);
}

// The 64-bit seed split into the two key words, low word first.
VOSTI_HD constexpr PhiloxKey philox_key_from_seed(uint64_t seed) {
  return {{static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32)}};
}

// 53 bits of the first two output words as a double in [0, 1): exact (the product by a power
// of two rounds nothing), so no explicitly rounded device intrinsic is needed.
VOSTI_HD constexpr double uniform_from_philox(const PhiloxCounter& x) {
  const uint64_t bits = (static_cast<uint64_t>(x.x[0]) << 21) | (x.x[1] >> 11);
  return static_cast<double>(bits) * 0x1p-53;
}

// The uniform that decides the token at `output_position` of a request seeded with `seed`.
VOSTI_HD constexpr double sampling_uniform(uint64_t seed, uint64_t output_position) {
  const PhiloxCounter counter = {
      {static_cast<uint32_t>(output_position), static_cast<uint32_t>(output_position >> 32), kSamplingStream, 0}};
  return uniform_from_philox(philox4x32_10(counter, philox_key_from_seed(seed)));
}

}  // namespace vosti
