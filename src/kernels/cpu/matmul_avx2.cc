// Micro-kernels of matmul_avx2.h. Reduction order per element: lane-8 dot
// (simd_avx2.h) of x[r, :] and the decoded w[c, :], then + bias[c]; nothing else.
#include "kernels/cpu/matmul_avx2.h"

#include <immintrin.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <utility>

#include "core/check.h"
#include "core/quant_blocks.h"
#include "kernels/cpu/matmul_row_kernels.h"
#include "kernels/cpu/quant_avx2.h"
#include "kernels/cpu/simd_avx2.h"

namespace vosti {
namespace {

// y[R, C] block: rows x[0..R) (stride ldx), columns w[0..C) (stride k), out y (stride ldy).
// The k loop keeps one 8-lane accumulator per element: R*C independent FMA chains.
template <int R, int C>
void dot_block(const float* x, int64_t ldx, const float* w, int64_t k, const float* bias, float* y, int64_t ldy) {
  __m256 acc[R][C];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 8
    for (int c = 0; c < C; ++c) acc[r][c] = _mm256_setzero_ps();
  }
  const int64_t k8 = k & ~int64_t{7};
  for (int64_t i = 0; i < k8; i += 8) {
    __m256 wv[C];
#pragma GCC unroll 8
    for (int c = 0; c < C; ++c) wv[c] = _mm256_loadu_ps(w + c * k + i);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const __m256 xv = _mm256_loadu_ps(x + r * ldx + i);
#pragma GCC unroll 8
      for (int c = 0; c < C; ++c) acc[r][c] = _mm256_fmadd_ps(xv, wv[c], acc[r][c]);
    }
  }
  for (int r = 0; r < R; ++r) {
    for (int c = 0; c < C; ++c) {
      float s = avx2::hsum8(acc[r][c]);
      for (int64_t i = k8; i < k; ++i) s = std::fma(x[r * ldx + i], w[c * k + i], s);
      if (bias != nullptr) s += bias[c];
      y[r * ldy + c] = s;
    }
  }
}

using DotBlockFn = void (*)(const float*, int64_t, const float*, int64_t, const float*, float*, int64_t);

template <int... Cs>
struct ColTable {
  template <int R>
  static constexpr std::array<DotBlockFn, sizeof...(Cs)> row() {
    return {&dot_block<R, Cs + 1>...};
  }
};

template <int... Rs, int... Cs>
constexpr auto make_block_table(std::integer_sequence<int, Rs...>, std::integer_sequence<int, Cs...>) {
  return std::array<std::array<DotBlockFn, sizeof...(Cs)>, sizeof...(Rs)>{ColTable<Cs...>::template row<Rs + 1>()...};
}

// kBlockTable[rows - 1][cols - 1]: the micro-kernel for a rows x cols block.
constexpr auto kBlockTable = make_block_table(std::make_integer_sequence<int, kMatmulRowBlock>(),
                                              std::make_integer_sequence<int, kMatmulColBlock>());

DotBlockFn pick_block(int64_t rows, int64_t cols) { return kBlockTable[rows - 1][cols - 1]; }

// Columns of a tile decoded together: as many as fit the tile, at most one chunk.
int64_t tile_columns(int64_t k) { return std::max<int64_t>(1, std::min(kMatmulColChunk, kMatmulTileFloats / k)); }

// Not inlined: verify/analyzer analyses this function (the m >= 2 path) on its own.
template <typename Codec>
[[gnu::noinline]] void tiled_columns(const float* x, int64_t m, int64_t k, const uint8_t* const* rows,
                                     const float* bias, float* y, int64_t ldy, int64_t c0, int64_t c1, float* tile) {
  const int64_t width = tile_columns(k);
  for (int64_t t0 = c0; t0 < c1; t0 += width) {
    const int64_t t1 = std::min(c1, t0 + width);
    for (int64_t c = t0; c < t1; ++c) avx2::decode_row<Codec>(rows[c], k, tile + (c - t0) * k);  // tile [t1 - t0, k]
    for (int64_t r0 = 0; r0 < m; r0 += kMatmulRowBlock) {
      const int64_t nr = std::min<int64_t>(kMatmulRowBlock, m - r0);
      for (int64_t c = t0; c < t1; c += kMatmulColBlock) {
        const int64_t nc = std::min<int64_t>(kMatmulColBlock, t1 - c);
        pick_block(nr, nc)(x + r0 * k, k, tile + (c - t0) * k, k, bias != nullptr ? bias + c : nullptr,
                           y + r0 * ldy + c, ldy);
      }
    }
  }
}

}  // namespace

void matmul_row_columns_avx2(const float* x, int64_t k, const WeightRows& part, const float* bias, float* y,
                             int64_t col_begin, int64_t col_end) {
  const bool known = avx2::with_codec(
      part.type, [&]<typename Codec>() { cpu_rows::row_columns<Codec>(x, k, part.rows, bias, y, col_begin, col_end); });
  VOSTI_CHECK(known, "matmul: weight type without a CPU decoder");
}

bool cpu_has_avx512_rows() {
  static const bool has = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
                          __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq");
  return has;
}

void matmul_part_columns_avx2(const float* x, int64_t m, int64_t k, const WeightRows& part, const float* bias, float* y,
                              int64_t ldy, int64_t col_begin, int64_t col_end, float* tile) {
  VOSTI_CHECK(k <= kMatmulTileFloats, "matmul: k exceeds the decode tile");
  if (m == 1 && cpu_has_avx512_rows()) {
    matmul_row_columns_avx512(x, k, part, bias, y, col_begin, col_end);
    return;
  }
  const bool known = avx2::with_codec(part.type, [&]<typename Codec>() {
    if (m == 1) {
      cpu_rows::row_columns<Codec>(x, k, part.rows, bias, y, col_begin, col_end);
    } else {
      tiled_columns<Codec>(x, m, k, part.rows, bias, y, ldy, col_begin, col_end, tile);
    }
  });
  VOSTI_CHECK(known, "matmul: weight type without a CPU decoder");
}

}  // namespace vosti
