// The sampler's arithmetic: its own exp, max and sums, bit-reproducible and vectorisable.
//
// The sampler's results must be a function of D only, so it cannot borrow libm's expf,
// whose last bits may change between C libraries and versions. exp_nonpositive uses only
// IEEE add, subtract, multiply and conversions (the build uses -ffp-contract=off and
// never -ffast-math), so it gives the same bits scalar or vectorised, on any x86-64.
//
// Sums of weights use one fixed order that is not a single chain, so that they vectorise
// and a draw need not walk the whole vocabulary ("lane sums"):
//   lane j (0 <= j < kSumLanes) = double sum, in ascending id order, of the weights of the
//   ids i with i % kSumLanes == j;  total = ((lane 0 + lane 1) + lane 2) + ... (from 0.0).
// The order depends only on token ids, never on the vocabulary size, chunking or threads.
//
// exp_nonpositive(d), for d <= 0 (larger d is clamped to 0):
//   d < -87 (or -inf) -> 0 (exp(-87) ~ 1.6e-38 is the smallest value kept; no subnormals)
//   kn = round-to-nearest-even(d * log2(e))   via the 1.5 * 2^23 trick
//   r  = (d - kn * ln2_hi) - kn * ln2_lo      |r| <= ln2 / 2 (Cody-Waite)
//   p  = Horner of the degree-7 Taylor polynomial of e^r, in float
//   result = p * 2^kn
// Accuracy: within a few ulp of exp (tested); exp_nonpositive(0) == 1 exactly.
// Thread safety: pure functions.
#pragma once

#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>

namespace vosti {

// An integer that orders like the float (for non-NaN; -0 < +0), so that comparisons in
// loops vectorise (GCC, with the default -ftrapping-math, turns a float
// comparison next to float arithmetic into a branch and then will not vectorise the loop).
inline int32_t order_key(float f) {
  const auto b = std::bit_cast<int32_t>(f);
  return b ^ ((b >> 31) & 0x7fffffff);
}

// x == v as floats (+0 == -0), on the bits. REQUIRES: neither NaN.
inline bool same_float(float x, float v) {
  const auto bx = std::bit_cast<uint32_t>(x), bv = std::bit_cast<uint32_t>(v);
  return static_cast<bool>(static_cast<uint32_t>(bx == bv) | static_cast<uint32_t>(((bx | bv) << 1) == 0));
}

// x > v as floats, on the bits. REQUIRES: v not NaN; for a NaN x the answer is
// unspecified (callers that may see NaN re-check what find_first returns).
inline bool greater_float(float x, float v) {
  const auto bx = std::bit_cast<uint32_t>(x), bv = std::bit_cast<uint32_t>(v);
  return static_cast<bool>(static_cast<uint32_t>(order_key(x) > order_key(v)) &
                           static_cast<uint32_t>(((bx | bv) << 1) != 0));
}

// The selects below are integer masks on the bits, for the reason given at order_key.
inline float exp_nonpositive(float d) {
  constexpr float kLog2e = 1.44269504088896341f;
  constexpr float kRound = 12582912.0f;   // 1.5 * 2^23
  constexpr float kLn2Hi = 0.693359375f;  // 9 significant bits: kn * kLn2Hi is exact
  constexpr float kLn2Lo = -2.12194440e-4f;
  constexpr uint32_t kMinus87 = std::bit_cast<uint32_t>(-87.0f);
  const auto bits = std::bit_cast<uint32_t>(d);
  const uint32_t negative = bits >> 31;                                          // d < 0, -0, -NaN
  const uint32_t in_range = negative & static_cast<uint32_t>(bits <= kMinus87);  // -87 <= d <= -0
  const uint32_t underflow = (0u - (negative & (in_range ^ 1u)));                // d < -87, -inf, -NaN
  const float xs = std::bit_cast<float>(bits & (0u - in_range));                 // out of range -> +0 (d >= 0: exp 1)
  const float kn = (xs * kLog2e + kRound) - kRound;
  const float r = (xs - kn * kLn2Hi) - kn * kLn2Lo;
  float p = 1.0f / 5040.0f;
  p = p * r + 1.0f / 720.0f;
  p = p * r + 1.0f / 120.0f;
  p = p * r + 1.0f / 24.0f;
  p = p * r + 1.0f / 6.0f;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  const auto scale = std::bit_cast<float>(static_cast<uint32_t>(static_cast<int32_t>(kn) + 127) << 23);
  return std::bit_cast<float>(std::bit_cast<uint32_t>(p * scale) & ~underflow);
}

// exp(x - m) as the sampler and logprobs define it: exactly 1 when x == m (+0 == -0; so
// infinite rows stay defined: inf - inf is never used), else exp_nonpositive(x - m).
// REQUIRES: x <= m, neither NaN.
inline float exp_from_max(float x, float m) {
  const uint32_t same = 0u - static_cast<uint32_t>(same_float(x, m));
  const auto e = std::bit_cast<uint32_t>(exp_nonpositive(x - m));
  return std::bit_cast<float>((std::bit_cast<uint32_t>(1.0f) & same) | (e & ~same));
}

// out[i] = exp_from_max(x[i], m) for i < n.
inline void exp_from_max_n(const float* x, float m, float* out, size_t n) {
  for (size_t i = 0; i < n; ++i) out[i] = exp_from_max(x[i], m);
}

// Whether pred holds for any of x[0..kFindBlock): a fixed-length OR reduction, which
// vectorises when pred is branch-free (like same_float and greater_float).
inline constexpr size_t kFindBlock = 64;
template <typename Pred>
bool any_in_block(const float* x, Pred pred) {
  uint32_t any = 0;
  for (size_t j = 0; j < kFindBlock; ++j) any |= static_cast<uint32_t>(pred(x[j]));
  return any != 0;
}

// The first i in [from, n) with pred(x[i]), or n. Skips whole blocks that any_in_block
// rules out, then scans the block that has a hit.
template <typename Pred>
size_t find_first(const float* x, size_t from, size_t n, Pred pred) {
  size_t i = from;
  while (i + kFindBlock <= n && !any_in_block(x + i, pred)) i += kFindBlock;
  for (; i < n; ++i)
    if (pred(x[i])) return i;
  return n;
}

// The largest of x[0..n), -inf if n == 0. REQUIRES: no NaN. Compared by order_key, so the
// result does not depend on the order of the scan and the loop vectorises.
inline float max_value(const float* x, size_t n) {
  int32_t best = order_key(-std::numeric_limits<float>::infinity());
  for (size_t i = 0; i < n; ++i) {
    const int32_t k = order_key(x[i]);
    best = best < k ? k : best;
  }
  return std::bit_cast<float>(best ^ ((best >> 31) & 0x7fffffff));
}

inline constexpr size_t kSumLanes = 8;

struct LaneSums {
  std::array<double, kSumLanes> lane{};  // zero-initialised
  double total() const {
    double t = 0.0;
    for (const double l : lane) t += l;
    return t;
  }
};

// Adds w[0..n) as the weights of ids first_id .. first_id + n - 1.
// REQUIRES: first_id % kSumLanes == 0 (chunks start on a lane boundary).
inline void add_lane_sums(const float* w, size_t n, LaneSums& sums) {
  size_t i = 0;
  for (; i + kSumLanes <= n; i += kSumLanes)
    for (size_t j = 0; j < kSumLanes; ++j) sums.lane[j] += static_cast<double>(w[i + j]);
  for (size_t j = 0; i + j < n; ++j) sums.lane[j] += static_cast<double>(w[i + j]);  // i % kSumLanes == 0
}

// Lane sums of w over the given ids. REQUIRES: ids ascending.
inline LaneSums lane_sums_of(const float* w, std::span<const int32_t> ids) {
  LaneSums sums;
  for (const int32_t id : ids) sums.lane[static_cast<size_t>(id) % kSumLanes] += static_cast<double>(w[id]);
  return sums;
}

}  // namespace vosti
