// The planted CPU kernel violation for the kill table (kill_table.py compiles this file with clang
// to build/llvm/mutants/planted_matmul.ll): the test-only split-K matmul of
// tests/support/planted_matmul.h, whose k split reads the row count (DESIGN.md rule 2). The product
// never links it, so the analyzer reads it from this translation unit: the pointer below makes
// clang emit the inline function's body under its own name, the entry mutants.toml names.
#include "tests/support/planted_matmul.h"

extern void (*const planted_cpu_kernel)(const float*, int64_t, int64_t, const vosti::WeightRows&, const float*, float*,
                                        int64_t, int64_t, int64_t, float*);
void (*const planted_cpu_kernel)(const float*, int64_t, int64_t, const vosti::WeightRows&, const float*, float*,
                                 int64_t, int64_t, int64_t,
                                 float*) = &vosti::planted::matmul_part_columns_split_k_by_row_count;
