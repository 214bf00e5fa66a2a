// The planted CPU kernel violation (test-only, never linked into the product): a matmul whose k
// reduction splits in two halves when a call has more than one row, so a row's bits depend on how
// many rows share the call (DESIGN.md rule 2). Written once, with the CPU backend's own lane-8
// dot: tests/support/planted.h wraps the CPU backend with it, and the kernel analyzer's mutant
// (verify/analyzer/mutants/planted_matmul.cc) compiles it to show the analyzer rejects it.
// Thread safety: pure.
#pragma once

#include <cstdint>

#include "core/quant_blocks.h"
#include "kernels/cpu/simd_avx2.h"
#include "kernels/kernel_backend.h"

namespace vosti::planted {

// y[r, c] for rows r < m and columns c in [col_begin, col_end) of one weight part; tile [k].
inline void matmul_part_columns_split_k_by_row_count(const float* x, int64_t m, int64_t k, const WeightRows& part,
                                                     const float* bias, float* y, int64_t ldy, int64_t col_begin,
                                                     int64_t col_end, float* tile) {
  const int64_t split = m > 1 ? k / 2 : k;  // the planted bug: the split point reads the row count
  for (int64_t c = col_begin; c < col_end; ++c) {
    decode_values(part.type, part.rows[c], k, tile);  // tile [k]: row c
    for (int64_t r = 0; r < m; ++r) {
      float s = avx2::dot_lane8(x + r * k, tile, split);
      if (split < k) s += avx2::dot_lane8(x + r * k + split, tile + split, k - split);
      if (bias != nullptr) s += bias[c];
      y[r * ldy + c] = s;
    }
  }
}

}  // namespace vosti::planted
