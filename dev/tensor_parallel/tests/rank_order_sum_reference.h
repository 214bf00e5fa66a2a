// The host reference of the tensor-parallel all-reduce (DESIGN.md rule 7), written once, plainly,
// for every test of it: the CPU test of the kernel's decomposition (rank_order_sum_test.cc) and
// the GPU tests of the device kernel and of the NCCL collectives (tests/collective_cuda).
//   sum = ((v_0 + v_1) + v_2) + ... + v_{N-1}, one f32 add at a time, left to right.
// The tests build with -ffp-contract=off (CMakeLists.txt), so each + is one rounded f32 add.
// Thread safety: pure functions.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

namespace vosti::rank_order_reference {

// The rank-order sum of one element's values, rank 0 first.
inline float sum(const std::vector<float>& by_rank) {
  float s = by_rank[0];
  for (size_t r = 1; r < by_rank.size(); ++r) s = s + by_rank[r];
  return s;
}

// Element-wise over messages: out[i] = sum({copies[0][i], copies[1][i], ...}).
inline std::vector<float> sum_messages(const std::vector<std::vector<float>>& copies) {
  std::vector<float> out(copies[0].size());
  std::vector<float> by_rank(copies.size());
  for (size_t i = 0; i < out.size(); ++i) {
    for (size_t r = 0; r < copies.size(); ++r) by_rank[r] = copies[r][i];
    out[i] = sum(by_rank);
  }
  return out;
}

// Values whose sums depend on the association: magnitudes spread over 2^-12 .. 2^12, both signs.
inline std::vector<float> spread_values(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> mantissa(1.0f, 2.0f);
  std::uniform_int_distribution<int> exponent(-12, 12);
  std::vector<float> out(n);
  for (float& v : out) v = std::ldexp(mantissa(rng), exponent(rng)) * ((rng() & 1) != 0 ? -1.0f : 1.0f);
  return out;
}

// Whether two float arrays hold the same bits.
inline bool same_bits(const float* a, const float* b, size_t n) { return std::memcmp(a, b, n * sizeof(float)) == 0; }

}  // namespace vosti::rank_order_reference
