// Scalar formulas shared by the reference and the CPU backends, so that the
// element-wise ops (rope, silu_mul) are bit-identical between the two.
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

// silu(g) * u with silu(g) = g / (1 + exp(-g)) (the formula of PyTorch's CPU silu).
inline float silu_times(float g, float u) {
  const float silu = g / (1.0f + std::exp(-g));
  return silu * u;
}

// 1 / sqrt(sum_sq / n + eps): the RMSNorm scale of one row from its sum of squares.
inline float rms_inv_scale(float sum_sq, int64_t n, float eps) {
  const float mean = sum_sq / static_cast<float>(n);
  return 1.0f / std::sqrt(mean + eps);
}

}  // namespace vosti
