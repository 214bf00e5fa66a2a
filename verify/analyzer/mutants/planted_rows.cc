// Planted violations of the CPU one-row matmul comparisons (rowkernels.py): a reduced copy of
// matmul_row_kernels.h (dot_row, row_columns) and of matmul_avx2.cc's tiled path
// (tiled_columns, dot_block), for the F32 and Q4_0 codecs. mutants.py compiles it to LLVM IR three
// times (clang, the analyzer's flags):
//   PLANTED_ROWS=0  the clean control: every path computes each element alike (proven);
//   PLANTED_ROWS=1  a group of four columns accumulates its odd blocks apart and adds the two
//                   halves at the end: the column groups differ (rejected along threads);
//   PLANTED_ROWS=2  the one-row path sums its eight lanes in order instead of hsum8's tree, in
//                   groups and alone alike: the one-row path differs from the tiled one (rejected
//                   along rows).
// and twice more with AVX-512 flags and PLANTED_AVX512, as another build of the one-row path
// (planted_row_columns_avx512, like matmul_rows_avx512.cc) with a Q4_0 table decoder:
//   PLANTED_AVX512=1  the table holds d * (q - 8), as the AVX2 decoder computes it (proven);
//   PLANTED_AVX512=2  the table holds d * q - 8 * d, another rounding (rejected along rows).
// Not part of any build.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "core/quant_blocks.h"
#include "kernels/cpu/quant_avx2.h"
#include "kernels/kernel_backend.h"
#include "kernels/cpu/simd_avx2.h"

#ifndef PLANTED_ROWS
#define PLANTED_ROWS 0
#endif

namespace vosti::cpu_rows {
namespace {

inline float lane_sum(__m256 v) {
#if PLANTED_ROWS == 2
  alignas(32) float lane[8];
  _mm256_store_ps(lane, v);
  float s = lane[0];
  for (int i = 1; i < 8; ++i) s += lane[i];
  return s;
#else
  return avx2::hsum8(v);
#endif
}

template <typename Codec, int C>
[[gnu::noinline]] void dot_row(const float* x, const uint8_t* const* rows, int64_t k, const float* bias, float* y,
                               const uint8_t* const* ahead) {
  __m256 acc[C], odd[C];
  for (int c = 0; c < C; ++c) acc[c] = odd[c] = _mm256_setzero_ps();
  const int64_t nb = k / Codec::kElems;
  for (int64_t b = 0; b < nb; ++b) {
    const float* xb = x + b * Codec::kElems;
    typename Codec::State st[C];
    for (int c = 0; c < C; ++c) st[c] = Codec::prepare(rows[c] + b * Codec::kBytes);
    if (ahead != nullptr && b == 0) {
      for (int c = 0; c < C; ++c) _mm_prefetch(reinterpret_cast<const char*>(ahead[c]), _MM_HINT_T1);
    }
    for (int g = 0; g < Codec::kElems / 8; ++g) {
      const __m256 xv = _mm256_loadu_ps(xb + 8 * g);
      for (int c = 0; c < C; ++c) {
        const __m256 w = Codec::group(rows[c] + b * Codec::kBytes, st[c], g);
        if (PLANTED_ROWS == 1 && C > 1 && b % 2 == 1) {
          odd[c] = _mm256_fmadd_ps(xv, w, odd[c]);
        } else {
          acc[c] = _mm256_fmadd_ps(xv, w, acc[c]);
        }
      }
    }
  }
  for (int c = 0; c < C; ++c) {
    float s = lane_sum(PLANTED_ROWS == 1 && C > 1 ? _mm256_add_ps(acc[c], odd[c]) : acc[c]);
    for (int64_t i = nb * Codec::kElems; i < k; ++i) s = std::fma(x[i], Codec::scalar(rows[c], i), s);
    if (bias != nullptr) s += bias[c];
    y[c] = s;
  }
}

template <typename Codec>
[[gnu::noinline]] void row_columns(const float* x, int64_t k, const uint8_t* const* rows, const float* bias, float* y,
                                   int64_t c0, int64_t c1) {
  const int64_t distance = row_bytes(Codec::kType, k) <= 640 ? 8 : 16;
  int64_t c = c0;
  for (; c + 4 <= c1; c += 4) {
    dot_row<Codec, 4>(x, rows + c, k, bias != nullptr ? bias + c : nullptr, y + c,
                      c + distance + 4 <= c1 ? rows + c + distance : nullptr);
  }
  for (; c < c1; ++c) dot_row<Codec, 1>(x, rows + c, k, bias != nullptr ? bias + c : nullptr, y + c, nullptr);
}

}  // namespace
}  // namespace vosti::cpu_rows

namespace vosti {
namespace {

template <int R>
void dot_block(const float* x, int64_t ldx, const float* w, int64_t k, const float* bias, float* y, int64_t ldy) {
  __m256 acc[R];
  for (int r = 0; r < R; ++r) acc[r] = _mm256_setzero_ps();
  const int64_t k8 = k & ~int64_t{7};
  for (int64_t i = 0; i < k8; i += 8) {
    const __m256 wv = _mm256_loadu_ps(w + i);
    for (int r = 0; r < R; ++r) acc[r] = _mm256_fmadd_ps(_mm256_loadu_ps(x + r * ldx + i), wv, acc[r]);
  }
  for (int r = 0; r < R; ++r) {
    float s = avx2::hsum8(acc[r]);
    for (int64_t i = k8; i < k; ++i) s = std::fma(x[r * ldx + i], w[i], s);
    if (bias != nullptr) s += bias[0];
    y[r * ldy] = s;
  }
}

template <typename Codec>
[[gnu::noinline]] void tiled_columns(const float* x, int64_t m, int64_t k, const uint8_t* const* rows,
                                     const float* bias, float* y, int64_t ldy, int64_t c0, int64_t c1, float* tile) {
  for (int64_t c = c0; c < c1; ++c) avx2::decode_row<Codec>(rows[c], k, tile + (c - c0) * k);
  for (int64_t r0 = 0; r0 < m; r0 += 4) {
    for (int64_t c = c0; c < c1; ++c) {
      const float* w = tile + (c - c0) * k;
      const float* b = bias != nullptr ? bias + c : nullptr;
      float* out = y + r0 * ldy + c;
      switch (std::min<int64_t>(4, m - r0)) {
        case 1:
          dot_block<1>(x + r0 * k, k, w, k, b, out, ldy);
          break;
        case 2:
          dot_block<2>(x + r0 * k, k, w, k, b, out, ldy);
          break;
        case 3:
          dot_block<3>(x + r0 * k, k, w, k, b, out, ldy);
          break;
        default:
          dot_block<4>(x + r0 * k, k, w, k, b, out, ldy);
      }
    }
  }
}

}  // namespace

// The instantiations the analyzer compares.
void planted_rows(bool q4, const float* x, int64_t m, int64_t k, const uint8_t* const* rows, const float* bias,
                  float* y, int64_t ldy, int64_t c0, int64_t c1, float* tile) {
  if (q4) {
    cpu_rows::row_columns<avx2::Q4_0Codec>(x, k, rows, bias, y, c0, c1);
    tiled_columns<avx2::Q4_0Codec>(x, m, k, rows, bias, y, ldy, c0, c1, tile);
  } else {
    cpu_rows::row_columns<avx2::F32Codec>(x, k, rows, bias, y, c0, c1);
    tiled_columns<avx2::F32Codec>(x, m, k, rows, bias, y, ldy, c0, c1, tile);
  }
}

}  // namespace vosti

#ifdef PLANTED_AVX512
namespace vosti {
namespace {

struct Q4_0TableCodec {
  static constexpr WeightType kType = WeightType::kQ4_0;
  static constexpr int64_t kElems = 32, kBytes = 18;
  struct State {
    __m256 lo, hi;  // values of codes 0..7 and 8..15
  };
  static State prepare(const uint8_t* b) {
    const __m256 d = _mm256_set1_ps(avx2::load_f16_scale(b));
    const __m256 lo = _mm256_setr_ps(0, 1, 2, 3, 4, 5, 6, 7), hi = _mm256_setr_ps(8, 9, 10, 11, 12, 13, 14, 15);
#if PLANTED_AVX512 == 2
    const __m256 d8 = _mm256_mul_ps(d, _mm256_set1_ps(8.0f));
    return {_mm256_sub_ps(_mm256_mul_ps(d, lo), d8), _mm256_sub_ps(_mm256_mul_ps(d, hi), d8)};
#else
    const __m256 eight = _mm256_set1_ps(8.0f);
    return {_mm256_mul_ps(d, _mm256_sub_ps(lo, eight)), _mm256_mul_ps(d, _mm256_sub_ps(hi, eight))};
#endif
  }
  static __m256 group(const uint8_t* b, const State& s, int g) {
    const __m256i q = avx2::load_u8x8(b + 2 + 8 * (g % 2));
    return _mm256_permutex2var_ps(s.lo, g < 2 ? q : _mm256_srli_epi32(q, 4), s.hi);
  }
  static float scalar(const uint8_t*, int64_t) { return 0.0f; }
};

}  // namespace

void planted_row_columns_avx512(const float* x, int64_t k, const WeightRows& part, const float* bias, float* y,
                                int64_t c0, int64_t c1) {
  if (part.type == WeightType::kQ4_0) {
    cpu_rows::row_columns<Q4_0TableCodec>(x, k, part.rows, bias, y, c0, c1);
    return;
  }
  cpu_rows::row_columns<avx2::F32Codec>(x, k, part.rows, bias, y, c0, c1);
}

}  // namespace vosti
#endif
