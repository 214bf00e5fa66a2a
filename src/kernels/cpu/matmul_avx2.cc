// Micro-kernels of matmul_avx2.h. Reduction order per element: lane-8 dot
// (simd_avx2.h) of x[r, :] and w[c, :], then + bias[c]; nothing else.
#include "kernels/cpu/matmul_avx2.h"

#include <immintrin.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <utility>

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

}  // namespace

void matmul_columns_avx2(const float* x, int64_t m, int64_t k, const float* w, int64_t n, const float* bias, float* y,
                         int64_t col_begin, int64_t col_end) {
  // Loop order: a chunk of columns (w[chunk, k] stays in L2), then 4-row blocks of x
  // (stay in L1), then 3-column micro-kernels streaming the chunk's weights.
  // While a chunk is computed, the next chunk's weights (rows contiguous in w) are
  // prefetched into L2, spread evenly over the chunk's micro-kernel calls, so only the
  // first chunk waits on memory. Prefetches touch no arithmetic.
  const int64_t calls_per_chunk =
      (m + kMatmulRowBlock - 1) / kMatmulRowBlock * ((kMatmulColChunk + kMatmulColBlock - 1) / kMatmulColBlock);
  for (int64_t c0 = col_begin; c0 < col_end; c0 += kMatmulColChunk) {
    const int64_t c1 = std::min(col_end, c0 + kMatmulColChunk);
    const char* pf = reinterpret_cast<const char*>(w + c1 * k);
    const char* pf_end = reinterpret_cast<const char*>(w + std::min(col_end, c1 + kMatmulColChunk) * k);
    const int64_t pf_lines_per_call = ((pf_end - pf) / 64 + calls_per_chunk) / calls_per_chunk;
    for (int64_t r0 = 0; r0 < m; r0 += kMatmulRowBlock) {
      const int64_t rows = std::min<int64_t>(kMatmulRowBlock, m - r0);
      for (int64_t c = c0; c < c1; c += kMatmulColBlock) {
        const int64_t cols = std::min<int64_t>(kMatmulColBlock, c1 - c);
        pick_block(rows, cols)(x + r0 * k, k, w + c * k, k, bias != nullptr ? bias + c : nullptr, y + r0 * n + c, n);
        for (int64_t l = 0; l < pf_lines_per_call && pf < pf_end; ++l, pf += 64) _mm_prefetch(pf, _MM_HINT_T1);
      }
    }
  }
}

void matmul_columns_split_k_by_row_count(const float* x, int64_t m, int64_t k, const float* w, int64_t n,
                                         const float* bias, float* y, int64_t col_begin, int64_t col_end) {
  const int64_t split = m > 1 ? k / 2 : k;  // the planted bug: the split point reads the row count
  for (int64_t r = 0; r < m; ++r) {
    for (int64_t c = col_begin; c < col_end; ++c) {
      float s = avx2::dot_lane8(x + r * k, w + c * k, split);
      if (split < k) s += avx2::dot_lane8(x + r * k + split, w + c * k + split, k - split);
      if (bias != nullptr) s += bias[c];
      y[r * n + c] = s;
    }
  }
}

}  // namespace vosti
