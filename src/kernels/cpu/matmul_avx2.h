// The CPU backend's f32 matmul y[m, n] = x[m, k] * w[n, k]^T (+ bias), AVX2/FMA.
//
// Invariant (batch invariance): every output element y[r, c] is the lane-8 dot of
// x[r, :] and w[c, :] (simd_avx2.h), then + bias[c]; register blocking (up to 4
// rows x 3 columns per micro-kernel), column chunking and the caller's column
// split only choose WHICH elements are computed together, never how one is computed.
// So y[r, :] is identical whatever m, r, the other rows, or the column range split.
// Thread safety: pure functions over disjoint output columns.
#pragma once

#include <cstdint>

namespace vosti {

// Rows x columns of one matmul micro-kernel call and the column chunk kept in L2.
inline constexpr int kMatmulRowBlock = 4;
inline constexpr int kMatmulColBlock = 3;
inline constexpr int64_t kMatmulColChunk = 48;

// Computes y[:, col_begin:col_end] of y[m, n] = x[m, k] w[n, k]^T (+ bias[n] if non-null).
void matmul_columns_avx2(const float* x, int64_t m, int64_t k, const float* w, int64_t n, const float* bias, float* y,
                         int64_t col_begin, int64_t col_end);

// TEST ONLY, deliberately NOT batch invariant (PlantedBug::kSplitKByRowCount): when
// m > 1 each element is the sum of two lane-8 dots over k halves, so a row's bits
// depend on how many rows share the call. Used to show the invariance checks catch it.
void matmul_columns_split_k_by_row_count(const float* x, int64_t m, int64_t k, const float* w, int64_t n,
                                         const float* bias, float* y, int64_t col_begin, int64_t col_end);

}  // namespace vosti
