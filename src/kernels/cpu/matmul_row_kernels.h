// The one-row (m = 1) matmul kernel of matmul_avx2.h as a template over the weight codec,
// shared by the AVX2 build (matmul_avx2.cc) and the AVX-512VL build of the same code
// (matmul_rows_avx512.cc, which only adds registers and table codecs with the same bits).
// Each element: lane-8 dot (simd_avx2.h) of x and the decoded row, then + bias.
// Thread safety: pure functions.
#pragma once

#include <immintrin.h>

#include <cmath>
#include <cstdint>

#include "core/quant_blocks.h"
#include "kernels/cpu/matmul_avx2.h"
#include "kernels/cpu/simd_avx2.h"

namespace vosti::cpu_rows {
// Internal linkage: each translation unit keeps its own copy, compiled for its own ISA
// (matmul_rows_avx512.cc builds these with AVX-512VL), so no copy can leak into another.
namespace {

// y[0..C) of one row: C columns of the part (rows[0..C)) decoded group by group in
// registers; each element's accumulator sees exactly the lane-8 dot's sequence of FMAs.
// Not inlined: verify/analyzer compares dot_row<Codec, kMatmulRowCols> and dot_row<Codec, 1>
// column by column (rowkernels.py), which row_columns picks between by the thread's columns.
template <typename Codec, int C>
[[gnu::noinline]] void dot_row(const float* x, const uint8_t* const* rows, int64_t k, const float* bias, float* y,
                               const uint8_t* const* ahead) {
  __m256 acc[C];
#pragma GCC unroll 8
  for (int c = 0; c < C; ++c) acc[c] = _mm256_setzero_ps();
  const int64_t nb = k / Codec::kElems;
  for (int64_t b = 0; b < nb; ++b) {
    const float* xb = x + b * Codec::kElems;
    typename Codec::State st[C];
#pragma GCC unroll 8
    for (int c = 0; c < C; ++c) st[c] = Codec::prepare(rows[c] + b * Codec::kBytes);
    // The block that starts a new cache line: its line in each row `ahead` (see row_columns).
    if (ahead != nullptr && (b == 0 || (b * Codec::kBytes) / 64 != ((b - 1) * Codec::kBytes) / 64)) {
#pragma GCC unroll 8
      for (int c = 0; c < C; ++c)
        _mm_prefetch(reinterpret_cast<const char*>(ahead[c]) + b * Codec::kBytes, _MM_HINT_T1);
    }
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

// Software prefetch of the rows ahead. A row of a decoder-sized matrix is a few hundred bytes to
// a few KB, read as one of kMatmulRowCols interleaved streams: too short for the hardware
// prefetcher, so a matrix that is not in cache (every matrix of a decode step) streamed at a
// third to a fifth of the memory bandwidth (dev/cpu/NOTES.md). Short rows (at most 10 lines) are
// fetched in one burst kPrefetchBurstGroups groups ahead; longer ones a line per block,
// kPrefetchLineGroups groups ahead, since a burst of more lines than the core can have in flight
// is partly dropped. Prefetches do no arithmetic: the bits do not depend on any of this.
inline constexpr int64_t kPrefetchBurstBytes = 640;
inline constexpr int kPrefetchBurstGroups = 2;
inline constexpr int kPrefetchLineGroups = 4;

// Prefetches the bytes of rows[0..kMatmulRowCols) into L2 (_MM_HINT_T1: measured faster end to
// end than into L1, dev/cpu/NOTES.md).
inline void prefetch_rows(const uint8_t* const* rows, int64_t bytes) {
  for (int j = 0; j < kMatmulRowCols; ++j) {
    const char* r = reinterpret_cast<const char*>(rows[j]);
    for (int64_t off = 0; off < bytes; off += 64) _mm_prefetch(r + off, _MM_HINT_T1);
  }
}

template <typename Codec>
void row_columns(const float* x, int64_t k, const uint8_t* const* rows, const float* bias, float* y, int64_t c0,
                 int64_t c1) {
  const int64_t bytes = row_bytes(Codec::kType, k);
  const bool burst = bytes <= kPrefetchBurstBytes;
  const int64_t distance = (burst ? kPrefetchBurstGroups : kPrefetchLineGroups) * kMatmulRowCols;
  // The groups before the first prefetch distance: all at once, at the start of the range.
  for (int64_t g = c0; g < c0 + distance && g + kMatmulRowCols <= c1; g += kMatmulRowCols)
    prefetch_rows(rows + g, bytes);
  int64_t c = c0;
  for (; c + kMatmulRowCols <= c1; c += kMatmulRowCols) {
    const bool prefetch = c + distance + kMatmulRowCols <= c1;
    if (prefetch && burst) prefetch_rows(rows + c + distance, bytes);
    dot_row<Codec, kMatmulRowCols>(x, rows + c, k, bias != nullptr ? bias + c : nullptr, y + c,
                                   prefetch && !burst ? rows + c + distance : nullptr);
  }
  for (; c < c1; ++c) dot_row<Codec, 1>(x, rows + c, k, bias != nullptr ? bias + c : nullptr, y + c, nullptr);
}

}  // namespace
}  // namespace vosti::cpu_rows
