// The CPU backend's matmul y[m, n] = x[m, k] * w[n, k]^T (+ bias), AVX2/FMA, computed
// straight from w's stored encoding (f32, f16, bf16 or a ggml block format).
//
// Invariant (batch invariance and bit-exactness): every output element y[r, c] is the
// lane-8 dot (simd_avx2.h) of x[r, :] and the f32 values of w[c, :] -- core/quant_blocks.h's
// decoding, produced in registers by quant_avx2.h with the same bits -- then + bias[c].
// That is exactly the value the engine computed when it kept f32 copies of the weights.
// Two schedules produce it, and only choose WHICH elements are computed together and where
// the decoded weights sit, never how one element is computed:
//   - one row (m = 1, a decode step): each weight group is decoded into a register and
//     consumed by the FMA at once; kMatmulRowCols columns advance together (built twice:
//     AVX2, and AVX-512VL where the CPU has it -- the same operations per element, so the
//     same bits; the ISA is not part of the deployment);
//   - more rows: the columns of one tile are decoded once into an f32 tile (a per-thread
//     scratch of kMatmulTileFloats, never a copy of the matrix), then register blocks of
//     up to 4 rows x 3 columns stream it.
// The caller's column split (threads) is another such choice. So y[r, :] is identical
// whatever m, r, the other rows, the thread count or the column split.
// Thread safety: pure functions over disjoint output columns (each thread its own tile).
#pragma once

#include <cstdint>

#include "kernels/kernel_backend.h"

namespace vosti {

// Rows x columns of one register block, the columns decoded together at m = 1, the column
// chunk a thread takes at a time, and the per-thread decode tile.
inline constexpr int kMatmulRowBlock = 4;
inline constexpr int kMatmulColBlock = 3;
inline constexpr int kMatmulRowCols = 4;
inline constexpr int64_t kMatmulColChunk = 48;
inline constexpr int64_t kMatmulTileFloats = int64_t{1} << 16;

// Computes columns [col_begin, col_end) of one part: y[r, c] for rows r < m, where y and
// bias point at the part's first output column and y has row stride ldy.
// REQUIRES: k <= kMatmulTileFloats; tile holds kMatmulTileFloats floats; k a multiple of
// the part's block elements.
void matmul_part_columns_avx2(const float* x, int64_t m, int64_t k, const WeightRows& part, const float* bias, float* y,
                              int64_t ldy, int64_t col_begin, int64_t col_end, float* tile);

// The m = 1 schedule of matmul_part_columns_avx2 (y[c] for c in [col_begin, col_end)), AVX2.
void matmul_row_columns_avx2(const float* x, int64_t k, const WeightRows& part, const float* bias, float* y,
                             int64_t col_begin, int64_t col_end);
// The same built with AVX-512VL (matmul_rows_avx512.cc):
// the same bits, more registers and table decoders for Q4_0/Q4_1.
// REQUIRES: the CPU has AVX-512F/VL/BW/DQ (cpu_has_avx512_rows()).
void matmul_row_columns_avx512(const float* x, int64_t k, const WeightRows& part, const float* bias, float* y,
                               int64_t col_begin, int64_t col_end);
// Whether this CPU runs matmul_row_columns_avx512 (read once per process).
bool cpu_has_avx512_rows();

}  // namespace vosti
