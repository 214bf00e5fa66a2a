// The one-row (m = 1) matmul kernel of matmul_avx2.h as a template over the weight codec,
// shared by the AVX2 build (matmul_avx2.cc) and the AVX-512VL build of the same code
// (matmul_rows_avx512.cc, which only adds registers and table codecs with the same bits).
// Each element: lane-8 dot (simd_avx2.h) of x and the decoded row, then + bias.
// Thread safety: pure functions.
#pragma once

#include <immintrin.h>

#include <cmath>
#include <cstdint>

#include "kernels/cpu/matmul_avx2.h"
#include "kernels/cpu/simd_avx2.h"

namespace vosti::cpu_rows {
// Internal linkage: each translation unit keeps its own copy, compiled for its own ISA
// (matmul_rows_avx512.cc builds these with AVX-512VL), so no copy can leak into another.
namespace {

// y[0..C) of one row: C columns of the part (rows[0..C)) decoded group by group in
// registers; each element's accumulator sees exactly the lane-8 dot's sequence of FMAs.
template <typename Codec, int C>
void dot_row(const float* x, const uint8_t* const* rows, int64_t k, const float* bias, float* y) {
  __m256 acc[C];
#pragma GCC unroll 8
  for (int c = 0; c < C; ++c) acc[c] = _mm256_setzero_ps();
  const int64_t nb = k / Codec::kElems;
  for (int64_t b = 0; b < nb; ++b) {
    const float* xb = x + b * Codec::kElems;
    typename Codec::State st[C];
#pragma GCC unroll 8
    for (int c = 0; c < C; ++c) st[c] = Codec::prepare(rows[c] + b * Codec::kBytes);
#pragma GCC unroll 32
    for (int g = 0; g < Codec::kElems / 8; ++g) {
      const __m256 xv = _mm256_loadu_ps(xb + 8 * g);
#pragma GCC unroll 8
      for (int c = 0; c < C; ++c)
        acc[c] = _mm256_fmadd_ps(xv, Codec::group(rows[c] + b * Codec::kBytes, st[c], g), acc[c]);
    }
  }
  for (int c = 0; c < C; ++c) {
    float s = avx2::hsum8(acc[c]);
    for (int64_t i = nb * Codec::kElems; i < k; ++i) s = std::fma(x[i], Codec::scalar(rows[c], i), s);
    if (bias != nullptr) s += bias[c];
    y[c] = s;
  }
}

template <typename Codec>
void row_columns(const float* x, int64_t k, const uint8_t* const* rows, const float* bias, float* y, int64_t c0,
                 int64_t c1) {
  int64_t c = c0;
  for (; c + kMatmulRowCols <= c1; c += kMatmulRowCols)
    dot_row<Codec, kMatmulRowCols>(x, rows + c, k, bias != nullptr ? bias + c : nullptr, y + c);
  for (; c < c1; ++c) dot_row<Codec, 1>(x, rows + c, k, bias != nullptr ? bias + c : nullptr, y + c);
}

}  // namespace
}  // namespace vosti::cpu_rows
