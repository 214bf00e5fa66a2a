// AVX2/FMA building blocks of the CPU backend with one fixed arithmetic order each.
//
// The f32 dot product of the CPU backend ("lane-8 dot"), used by matmul, attention
// scores and the rms_norm sum of squares, is always:
//   1. eight lane accumulators a[l], l = 0..7, start at +0; for each full block of
//      8 elements b = 0, 1, ...: a[l] = fma(x[8b+l], y[8b+l], a[l]);
//   2. the fixed pairwise tree of hsum8():
//      ((a0 + a4) + (a2 + a6)) + ((a1 + a5) + (a3 + a7));
//   3. the tail elements i = 8*floor(n/8) .. n-1 in increasing i: s = fma(x[i], y[i], s).
// Every caller that claims "lane-8 dot" order follows exactly these steps, so an
// element's value never depends on how many other elements are computed beside it.
// Thread safety: pure functions.
#pragma once

#include <immintrin.h>

#include <cmath>
#include <cstdint>

#include "kernels/ref/scalar_math.h"

namespace vosti::avx2 {
// Internal linkage: each translation unit keeps its own copy, compiled for its own ISA
// (matmul_rows_avx512.cc builds these with AVX-512VL), so no copy can leak into another.
namespace {

// The fixed tree: ((a0 + a4) + (a2 + a6)) + ((a1 + a5) + (a3 + a7)).
inline float hsum8(__m256 v) {
  const __m128 lo = _mm256_castps256_ps128(v);
  const __m128 hi = _mm256_extractf128_ps(v, 1);
  const __m128 s4 = _mm_add_ps(lo, hi);                     // [a0+a4, a1+a5, a2+a6, a3+a7]
  const __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));  // [(a0+a4)+(a2+a6), (a1+a5)+(a3+a7), ..]
  const __m128 s1 = _mm_add_ss(s2, _mm_shuffle_ps(s2, s2, 1));
  return _mm_cvtss_f32(s1);
}

// hsum8 of eight accumulators at once: lane j of the result is bitwise hsum8(a[j]).
// Same tree per accumulator, with the data transposed by shuffles on the way:
//   T = lo128 + hi128 gives u0 = a0+a4, u1 = a1+a5, u2 = a2+a6, u3 = a3+a7;
//   then v0 = u0 + u2, v1 = u1 + u3; then v0 + v1.
inline __m256 hsum8x8(const __m256* a) {
  __m256 t[4];  // t[j] = [u(a[j]) | u(a[j + 4])]
  for (int j = 0; j < 4; ++j) {
    t[j] = _mm256_add_ps(_mm256_permute2f128_ps(a[j], a[j + 4], 0x20), _mm256_permute2f128_ps(a[j], a[j + 4], 0x31));
  }
  // [v0, v1] of a[0], a[1] | a[4], a[5]  and  a[2], a[3] | a[6], a[7].
  const __m256 v01 = _mm256_add_ps(_mm256_shuffle_ps(t[0], t[1], _MM_SHUFFLE(1, 0, 1, 0)),
                                   _mm256_shuffle_ps(t[0], t[1], _MM_SHUFFLE(3, 2, 3, 2)));
  const __m256 v23 = _mm256_add_ps(_mm256_shuffle_ps(t[2], t[3], _MM_SHUFFLE(1, 0, 1, 0)),
                                   _mm256_shuffle_ps(t[2], t[3], _MM_SHUFFLE(3, 2, 3, 2)));
  // v0 of a[0..3] | a[4..7] plus v1 of the same.
  return _mm256_add_ps(_mm256_shuffle_ps(v01, v23, _MM_SHUFFLE(2, 0, 2, 0)),
                       _mm256_shuffle_ps(v01, v23, _MM_SHUFFLE(3, 1, 3, 1)));
}

// Lane-8 dot of x[n] and y[n] (see the header comment for the order).
inline float dot_lane8(const float* x, const float* y, int64_t n) {
  __m256 acc = _mm256_setzero_ps();
  const int64_t n8 = n & ~int64_t{7};
  for (int64_t i = 0; i < n8; i += 8) acc = _mm256_fmadd_ps(_mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i), acc);
  float s = hsum8(acc);
  for (int64_t i = n8; i < n; ++i) s = std::fma(x[i], y[i], s);
  return s;
}

// exp_f32 (scalar_math.h) on 8 lanes: the same operations per lane, so the same bits.
inline __m256 exp_lane8(__m256 x) {
  const __m256 hi = _mm256_set1_ps(kExpOverflow);
  const __m256 lo = _mm256_set1_ps(kExpUnderflow);
  const __m256 xc = _mm256_max_ps(_mm256_min_ps(x, hi), lo);  // in range (NaN lanes fixed below)
  const __m256 n =
      _mm256_round_ps(_mm256_mul_ps(xc, _mm256_set1_ps(kExpLog2e)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fmadd_ps(n, _mm256_set1_ps(-kExpLn2Hi), xc);
  r = _mm256_fmadd_ps(n, _mm256_set1_ps(-kExpLn2Lo), r);
  __m256 p = _mm256_set1_ps(kExpP[0]);
  for (int i = 1; i < 6; ++i) p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(kExpP[i]));
  const __m256 y = _mm256_add_ps(_mm256_fmadd_ps(p, _mm256_mul_ps(r, r), r), _mm256_set1_ps(1.0f));
  const __m256i ni = _mm256_cvtps_epi32(n);
  const __m256i e1 = _mm256_srai_epi32(ni, 1);
  const __m256i e2 = _mm256_sub_epi32(ni, e1);
  const __m256i bias = _mm256_set1_epi32(127);
  const __m256 s1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(e1, bias), 23));
  const __m256 s2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(e2, bias), 23));
  __m256 res = _mm256_mul_ps(_mm256_mul_ps(y, s1), s2);
  res = _mm256_blendv_ps(res, _mm256_set1_ps(INFINITY), _mm256_cmp_ps(x, hi, _CMP_GT_OQ));
  res = _mm256_blendv_ps(res, _mm256_setzero_ps(), _mm256_cmp_ps(x, lo, _CMP_LT_OQ));
  return _mm256_blendv_ps(res, x, _mm256_cmp_ps(x, x, _CMP_UNORD_Q));
}

}  // namespace
}  // namespace vosti::avx2
