// The sampler's scalar arithmetic, written once for the host sampler (sample/sampler.cc, whose
// vector loops are sample/sampler_math.h) and the device sampler
// (kernels/cuda/sampler/sampler_kernels.h): order keys, the exact-float comparisons, the
// sampler's own exp and the lane walk of a draw. Each floating-point operation is an explicitly
// rounded IEEE operation: fadd/fmul/... are the plain operators on the host (the build uses
// -ffp-contract=off and never -ffast-math) and the _rn intrinsics on the device, so both
// compute the same bits. The selects are integer masks on the bits: GCC, with the default
// -ftrapping-math, turns a float comparison next to float arithmetic into a branch and then
// will not vectorise the host's loops over these functions.
//
// exp_nonpositive(d), for d <= 0 (larger d is clamped to 0):
//   d < -87 (or -inf) -> 0 (exp(-87) ~ 1.6e-38 is the smallest value kept; no subnormals)
//   kn = round-to-nearest-even(d * log2(e))   via the 1.5 * 2^23 trick
//   r  = (d - kn * ln2_hi) - kn * ln2_lo      |r| <= ln2 / 2 (Cody-Waite)
//   p  = Horner of the degree-7 Taylor polynomial of e^r, in float
//   result = p * 2^kn
// Accuracy: within a few ulp of exp (tests/sample/sampler_math_test.cc); exp_nonpositive(0) == 1.
// Thread safety: pure functions.
#pragma once

#include <cstdint>

#include "core/host_device.h"
#ifndef __CUDA_ARCH__
#include <bit>
#endif

namespace vosti {

// Temperatures below this sample greedily (vLLM's epsilon): dividing by a smaller one
// would overflow ordinary logits to infinity.
inline constexpr float kGreedyTemperature = 1e-5f;

VOSTI_HD uint32_t float_bits(float f) {
#ifdef __CUDA_ARCH__
  return __float_as_uint(f);
#else
  return std::bit_cast<uint32_t>(f);
#endif
}
VOSTI_HD float bits_float(uint32_t u) {
#ifdef __CUDA_ARCH__
  return __uint_as_float(u);
#else
  return std::bit_cast<float>(u);
#endif
}

// IEEE single and double operations, rounded to nearest even, never fused.
VOSTI_HD float fadd(float a, float b) {
#ifdef __CUDA_ARCH__
  return __fadd_rn(a, b);
#else
  return a + b;
#endif
}
VOSTI_HD float fsub(float a, float b) {
#ifdef __CUDA_ARCH__
  return __fsub_rn(a, b);
#else
  return a - b;
#endif
}
VOSTI_HD float fmul(float a, float b) {
#ifdef __CUDA_ARCH__
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}
VOSTI_HD float fdiv(float a, float b) {
#ifdef __CUDA_ARCH__
  return __fdiv_rn(a, b);
#else
  return a / b;
#endif
}
VOSTI_HD double dadd(double a, double b) {
#ifdef __CUDA_ARCH__
  return __dadd_rn(a, b);
#else
  return a + b;
#endif
}
VOSTI_HD double dmul(double a, double b) {
#ifdef __CUDA_ARCH__
  return __dmul_rn(a, b);
#else
  return a * b;
#endif
}
VOSTI_HD double dsub(double a, double b) {
#ifdef __CUDA_ARCH__
  return __dsub_rn(a, b);
#else
  return a - b;
#endif
}

// A logit as the sampler and logprobs read it: NaN -> -inf.
VOSTI_HD float sanitize_logit(float x) { return x != x ? bits_float(0xff800000u) : x; }

// An integer that orders like the float (for non-NaN; -0 < +0), so that comparisons in
// loops vectorise.
VOSTI_HD int32_t order_key(float f) {
  const auto b = static_cast<int32_t>(float_bits(f));
  return b ^ ((b >> 31) & 0x7fffffff);
}
VOSTI_HD float from_order_key(int32_t k) { return bits_float(static_cast<uint32_t>(k ^ ((k >> 31) & 0x7fffffff))); }

// x == v as floats (+0 == -0), on the bits. REQUIRES: neither NaN.
VOSTI_HD bool same_float(float x, float v) {
  const uint32_t bx = float_bits(x), bv = float_bits(v);
  return static_cast<bool>(static_cast<uint32_t>(bx == bv) | static_cast<uint32_t>(((bx | bv) << 1) == 0));
}

// x > v as floats, on the bits. REQUIRES: v not NaN; for a NaN x the answer is
// unspecified (callers that may see NaN re-check what they find).
VOSTI_HD bool greater_float(float x, float v) {
  const uint32_t bx = float_bits(x), bv = float_bits(v);
  return static_cast<bool>(static_cast<uint32_t>(order_key(x) > order_key(v)) &
                           static_cast<uint32_t>(((bx | bv) << 1) != 0));
}

// An unsigned key that orders like the float compares (+0 == -0 give one key; larger float,
// larger key): the selection order (value desc, id asc) of top-k, top-p and top logprobs.
// REQUIRES: not NaN.
VOSTI_HD uint32_t select_key(float x) {
  uint32_t b = float_bits(x);
  if ((b << 1) == 0) b = 0;  // -0 -> +0
  return (b & 0x80000000u) ? ~b : (b | 0x80000000u);
}

// See the header comment.
VOSTI_HD float exp_nonpositive(float d) {
  constexpr float kLog2e = 1.44269504088896341f;
  constexpr float kRound = 12582912.0f;   // 1.5 * 2^23
  constexpr float kLn2Hi = 0.693359375f;  // 9 significant bits: kn * kLn2Hi is exact
  constexpr float kLn2Lo = -2.12194440e-4f;
  constexpr uint32_t kMinus87 = 0xc2ae0000u;  // bits of -87.0f
  const uint32_t bits = float_bits(d);
  const uint32_t negative = bits >> 31;                                          // d < 0, -0, -NaN
  const uint32_t in_range = negative & static_cast<uint32_t>(bits <= kMinus87);  // -87 <= d <= -0
  const uint32_t underflow = (0u - (negative & (in_range ^ 1u)));                // d < -87, -inf, -NaN
  const float xs = bits_float(bits & (0u - in_range));                           // out of range -> +0 (d >= 0: exp 1)
  const float kn = fsub(fadd(fmul(xs, kLog2e), kRound), kRound);
  const float r = fsub(fsub(xs, fmul(kn, kLn2Hi)), fmul(kn, kLn2Lo));
  float p = 1.0f / 5040.0f;
  p = fadd(fmul(p, r), 1.0f / 720.0f);
  p = fadd(fmul(p, r), 1.0f / 120.0f);
  p = fadd(fmul(p, r), 1.0f / 24.0f);
  p = fadd(fmul(p, r), 1.0f / 6.0f);
  p = fadd(fmul(p, r), 0.5f);
  p = fadd(fmul(p, r), 1.0f);
  p = fadd(fmul(p, r), 1.0f);
  const float scale = bits_float(static_cast<uint32_t>(static_cast<int32_t>(kn) + 127) << 23);
  return bits_float(float_bits(fmul(p, scale)) & ~underflow);
}

// exp(x - m) as the sampler and logprobs define it: exactly 1 when x == m (+0 == -0; so
// infinite rows stay defined: inf - inf is never used), else exp_nonpositive(x - m).
// REQUIRES: x <= m, neither NaN.
VOSTI_HD float exp_from_max(float x, float m) {
  const uint32_t same = 0u - static_cast<uint32_t>(same_float(x, m));
  const uint32_t e = float_bits(exp_nonpositive(fsub(x, m)));
  return bits_float((float_bits(1.0f) & same) | (e & ~same));
}

// Sums of weights use one fixed order that is not a single chain ("lane sums"):
//   lane j (0 <= j < kSumLanes) = double sum, in ascending id order, of the weights of the
//   ids i with i % kSumLanes == j;  total = ((lane 0 + lane 1) + lane 2) + ... (from 0.0).
// 128 lanes: the device sampler runs one chain a thread, V / 128 dependent adds (2,048 at
// Gemma's 262,144 tokens; with 8 lanes a row cost ~0.22 ms at 128k, docs/BENCHMARKS.md), and
// a draw walks V / 128 ids; the host's loops still vectorise.
inline constexpr int kSumLanes = 128;

// The total of the lanes, in that order.
VOSTI_HD double lanes_total(const double* lane) {
  double t = 0.0;
  for (int j = 0; j < kSumLanes; ++j) t = dadd(t, lane[j]);
  return t;
}

// The first step of sampler.h's draw: the lane whose running sum first exceeds u * W (the
// last lane if none), and what is left of the target inside it. The running sum repeats the
// additions of lanes_total() and ends at W > u * W (u < 1), so a chosen lane has a positive sum.
struct LanePick {
  int lane;
  double lane_target;
};
VOSTI_HD LanePick pick_lane(const double* lane, double u) {
  const double target = dmul(u, lanes_total(lane));
  int j = 0;
  double before = 0.0;
  for (; j + 1 < kSumLanes; ++j) {
    const double next = dadd(before, lane[j]);
    if (next > target) break;
    before = next;
  }
  return {j, dsub(target, before)};
}

}  // namespace vosti
