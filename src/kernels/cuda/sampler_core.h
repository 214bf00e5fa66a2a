// The sampler's scalar arithmetic written once for host and device (__host__ __device__
// under nvcc, plain inline C++ under g++): order keys, the exact-float comparisons, the
// sampler's own exp (sample/sampler_math.h: exp_nonpositive, exp_from_max) and Philox4x32-10
// (sample/philox.h), each with explicitly rounded IEEE operations on the device (no FMA
// contraction), so the device sampler (sampler_kernels.h) computes the host sampler's bits.
// tests/kernels/sampler_core_test.cc checks every function against sample/ on the CPU;
// the device sampler is checked against sample_token() on the GPU.
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <cstring>

#include "kernels/cuda/host_device.h"

namespace vosti::sampler_core {

VOSTI_HD uint32_t float_bits(float f) {
#ifdef __CUDA_ARCH__
  return __float_as_uint(f);
#else
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
#endif
}
VOSTI_HD float bits_float(uint32_t u) {
#ifdef __CUDA_ARCH__
  return __uint_as_float(u);
#else
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
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

// sample/logprobs.h sanitize_logit: NaN -> -inf.
VOSTI_HD float sanitize(float x) { return x != x ? bits_float(0xff800000u) : x; }

// sample/sampler_math.h order_key: an int32 that orders like the float (-0 < +0).
VOSTI_HD int32_t order_key(float f) {
  const auto b = static_cast<int32_t>(float_bits(f));
  return b ^ ((b >> 31) & 0x7fffffff);
}
VOSTI_HD float from_order_key(int32_t k) { return bits_float(static_cast<uint32_t>(k ^ ((k >> 31) & 0x7fffffff))); }

// x == v as floats (+0 == -0). REQUIRES: neither NaN.
VOSTI_HD bool same_float(float x, float v) {
  const uint32_t bx = float_bits(x), bv = float_bits(v);
  return bx == bv || ((bx | bv) << 1) == 0;
}

// An unsigned key that orders like the float compares (+0 == -0 give one key; larger float,
// larger key): the selection order (value desc, id asc) of top-k, top-p and top logprobs.
// REQUIRES: not NaN.
VOSTI_HD uint32_t select_key(float x) {
  uint32_t b = float_bits(x);
  if ((b << 1) == 0) b = 0;  // -0 -> +0
  return (b & 0x80000000u) ? ~b : (b | 0x80000000u);
}

// sample/sampler_math.h exp_nonpositive, operation for operation.
VOSTI_HD float exp_nonpositive(float d) {
  constexpr float kLog2e = 1.44269504088896341f;
  constexpr float kRound = 12582912.0f;
  constexpr float kLn2Hi = 0.693359375f;
  constexpr float kLn2Lo = -2.12194440e-4f;
  constexpr uint32_t kMinus87 = 0xc2ae0000u;  // bits of -87.0f
  const uint32_t bits = float_bits(d);
  const uint32_t negative = bits >> 31;
  const uint32_t in_range = negative & static_cast<uint32_t>(bits <= kMinus87);
  const uint32_t underflow = (0u - (negative & (in_range ^ 1u)));
  const float xs = bits_float(bits & (0u - in_range));
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

// sample/sampler_math.h exp_from_max: exactly 1 when x == m, else exp_nonpositive(x - m).
VOSTI_HD float exp_from_max(float x, float m) {
  const uint32_t same = 0u - static_cast<uint32_t>(same_float(x, m));
  const uint32_t e = float_bits(exp_nonpositive(fsub(x, m)));
  return bits_float((float_bits(1.0f) & same) | (e & ~same));
}

// sample/philox.h: Philox4x32-10 and the sampling uniform keyed by (seed, output position).
struct Philox4 {
  uint32_t x[4];
};
VOSTI_HD uint32_t mul_hi32(uint32_t a, uint32_t b) {
  return static_cast<uint32_t>((static_cast<uint64_t>(a) * b) >> 32);
}
VOSTI_HD Philox4 philox4x32_10(Philox4 c, uint32_t k0, uint32_t k1) {
  for (int r = 0; r < 10; ++r) {
    if (r > 0) {
      k0 += 0x9E3779B9u;
      k1 += 0xBB67AE85u;
    }
    const uint32_t lo0 = 0xD2511F53u * c.x[0], hi0 = mul_hi32(0xD2511F53u, c.x[0]);
    const uint32_t lo1 = 0xCD9E8D57u * c.x[2], hi1 = mul_hi32(0xCD9E8D57u, c.x[2]);
    c = Philox4{{hi1 ^ c.x[1] ^ k0, lo1, hi0 ^ c.x[3] ^ k1, lo0}};
  }
  return c;
}
// sample/philox.h sampling_uniform (stream kSamplingStream = 0).
VOSTI_HD double sampling_uniform(uint64_t seed, uint64_t output_position) {
  const Philox4 counter{{static_cast<uint32_t>(output_position), static_cast<uint32_t>(output_position >> 32), 0u, 0u}};
  const Philox4 x = philox4x32_10(counter, static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32));
  const uint64_t bits = (static_cast<uint64_t>(x.x[0]) << 21) | (x.x[1] >> 11);
  return dmul(static_cast<double>(bits), 0x1p-53);
}

inline constexpr int kSumLanes = 8;  // sample/sampler_math.h kSumLanes

// LaneSums::total: ((lane 0 + lane 1) + ...) + lane 7, from +0.
VOSTI_HD double lanes_total(const double* lane) {
  double t = 0.0;
  for (int j = 0; j < kSumLanes; ++j) t = dadd(t, lane[j]);
  return t;
}

// The first step of sampler.h's draw: the lane whose running sum first exceeds u * W (the
// last lane if none), and what is left of the target inside it.
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

}  // namespace vosti::sampler_core
