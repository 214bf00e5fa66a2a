// The host sampler's vector loops over the scalar arithmetic of sample/sampler_scalar.h (which
// the device sampler shares): maxima, first-match scans and lane sums over whole rows, written
// so that GCC vectorises them (integer masks on the bits, fixed-length blocks).
//
// Sums of weights use sampler_scalar.h's lane order, so that they vectorise and a draw need
// not walk the whole vocabulary. The order depends only on token ids, never on the
// vocabulary size, chunking or threads.
// Thread safety: pure functions.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>

#include "sample/sampler_scalar.h"

namespace vosti {

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
  return from_order_key(best);
}

struct LaneSums {
  std::array<double, kSumLanes> lane{};  // zero-initialised
  double total() const { return lanes_total(lane.data()); }
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
