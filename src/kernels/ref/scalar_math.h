// Scalar formulas shared by the reference and the CPU backends, so that the
// element-wise ops (rope, silu_mul, gelu_tanh_mul) are bit-identical between the two.
//
// Invariant: every function here is pure f32 arithmetic with one fixed sequence of
// IEEE operations (the build uses -ffp-contract=off, so a*b+c is never fused
// unless written as std::fma). Changing a formula here changes both backends.
// Thread safety: pure functions.
#pragma once

#include <cmath>
#include <cstdint>

namespace vosti {

// Rotary angles of one position, as HF transformers computes them:
// angle[i] = float(position) * inv_freq[i] in f32, then cos/sin of that f32 angle.
// cos_out/sin_out: [half] (half = head_dim / 2).
inline void rope_cos_sin(int32_t position, const float* inv_freq, int half, float* cos_out, float* sin_out) {
  const float pos = static_cast<float>(position);
  for (int i = 0; i < half; ++i) {
    const float angle = pos * inv_freq[i];
    cos_out[i] = std::cos(angle);
    sin_out[i] = std::sin(angle);
  }
}

// One rotated pair: (x0, x1) -> (x0*c - x1*s, x1*c + x0*s), each product rounded, then the sum.
// Matches HF's q*cos + rotate_half(q)*sin (negation is exact).
struct RotatedPair {
  float first;
  float second;
};
inline RotatedPair rope_rotate(float x0, float x1, float c, float s) {
  const float a = x0 * c;
  const float b = x1 * s;
  const float d = x1 * c;
  const float e = x0 * s;
  return {a - b, d + e};
}

// Constants of exp_f32 (Cephes expf: Cody-Waite reduction, degree-5 minimax polynomial).
inline constexpr float kExpOverflow = 88.72283935546875f;   // above: +inf
inline constexpr float kExpUnderflow = -87.3365478515625f;  // below: 0 (ln of FLT_MIN)
inline constexpr float kExpLog2e = 1.44269504088896341f;
inline constexpr float kExpLn2Hi = 0.693359375f;
inline constexpr float kExpLn2Lo = -2.12194440e-4f;
inline constexpr float kExpP[6] = {1.9875691500e-4f, 1.3981999507e-3f, 8.3334519073e-3f,
                                   4.1665795894e-2f, 1.6666665459e-1f, 5.0000001201e-1f};

// 2^e as a float for e in [-126, 127].
inline float exp2_int(int32_t e) {
  const uint32_t bits = static_cast<uint32_t>(e + 127) << 23;
  float f;
  static_assert(sizeof(f) == sizeof(bits));
  __builtin_memcpy(&f, &bits, sizeof(f));
  return f;
}

// exp(x) in f32 with one fixed operation sequence (max error about 1 ulp on
// [kExpUnderflow, kExpOverflow]); simd_avx2.h's exp_lane8 performs the same operations
// per lane, so scalar and vector code give identical bits:
//   n = round_half_even(x * log2e); r = fma(n, -ln2_hi, x); r = fma(n, -ln2_lo, r);
//   p = Horner(kExpP, r) with fma; y = fma(p, r*r, r) + 1; result = (y * 2^(n>>1)) * 2^(n - (n>>1)).
// NaN -> the same NaN; x > kExpOverflow -> +inf; x < kExpUnderflow -> +0.
inline float exp_f32(float x) {
  if (std::isnan(x)) return x;
  if (x > kExpOverflow) return INFINITY;
  if (x < kExpUnderflow) return 0.0f;
  const float n = std::nearbyint(x * kExpLog2e);
  float r = std::fma(n, -kExpLn2Hi, x);
  r = std::fma(n, -kExpLn2Lo, r);
  float p = kExpP[0];
  for (int i = 1; i < 6; ++i) p = std::fma(p, r, kExpP[i]);
  const float y = std::fma(p, r * r, r) + 1.0f;
  const int32_t ni = static_cast<int32_t>(n);
  const int32_t e1 = ni >> 1;
  return (y * exp2_int(e1)) * exp2_int(ni - e1);
}

// silu(g) * u with silu(g) = g / (1 + exp(-g)) (the formula of PyTorch's CPU silu),
// exp by exp_f32 so the vector path of the CPU backend matches bit for bit.
inline float silu_times(float g, float u) {
  const float silu = g / (1.0f + exp_f32(-g));
  return silu * u;
}

// Constants of gelu_tanh_times: 2 * sqrt(2 / pi) and the cubic coefficient of the tanh GELU.
inline constexpr float kGeluTwoBeta = 1.5957691216057308f;
inline constexpr float kGeluKappa = 0.044715f;

// gelu_tanh(g) * u, the tanh-approximated GELU (PyTorch's gelu(approximate="tanh"),
// Gemma's "gelu_pytorch_tanh") times the up value. gelu_tanh(g) = 0.5 g (1 + tanh(z)) with
// z = sqrt(2/pi) (g + 0.044715 g^3); since 1 + tanh(z) = 2 / (1 + exp(-2z)), it is evaluated as
// g / (1 + exp(-2z)) (no cancellation near g = 0, the exp is exp_f32, not libm's), in this order:
//   c = (g * g) * g; s = g + kGeluKappa * c; e = exp_f32(-(kGeluTwoBeta * s)); gelu = g / (1 + e);
//   result = gelu * u.
// Far left tail: e overflows to +inf and gelu = -0; far right: e = 0 and gelu = g. It differs from
// PyTorch's formula by rounding only (a few ulp). simd_avx2.h's 8-lane version performs the same
// operations per lane.
inline float gelu_tanh_times(float g, float u) {
  const float c = (g * g) * g;
  const float s = g + kGeluKappa * c;
  const float e = exp_f32(-(kGeluTwoBeta * s));
  const float gelu = g / (1.0f + e);
  return gelu * u;
}

// tanh(x) from exp_f32: sign(x) * (1 - 2 / (exp(2|x|) + 1)), +-1 for large |x|. Absolute error
// a few 1e-8 (relative error grows for |x| < 1e-3, where the result is tiny). Used by the final
// logit soft-cap, cap * tanh(logit / cap).
inline float tanh_f32(float x) {
  if (std::isnan(x)) return x;
  const float a = std::fabs(x);
  const float t = 1.0f - 2.0f / (exp_f32(2.0f * a) + 1.0f);
  return std::copysign(t, x);
}

// 1 / sqrt(sum_sq / n + eps): the RMSNorm scale of one row from its sum of squares.
inline float rms_inv_scale(float sum_sq, int64_t n, float eps) {
  const float mean = sum_sq / static_cast<float>(n);
  return 1.0f / std::sqrt(mean + eps);
}

}  // namespace vosti
