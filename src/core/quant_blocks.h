// The f32 value of every element of the weight encodings Vosti computes from: f32, f16,
// bf16 and ggml's block formats Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K, Q6_K.
//
// This is the one definition of those values: the loader (io/dequant.h), the scalar
// kernels (kernels/ref) and the CPU kernels' in-register decoders (kernels/cpu/
// quant_avx2.h) all produce exactly these bits. Each block decoder mirrors gguf-py's
// gguf.quants.dequantize operation for operation: scales are f16 widened to f32, every
// product and sum is one f32 operation in the order written (the build uses
// -ffp-contract=off, so no FMA fusion). tests/io/dequant_test.cc checks them bit for bit
// against gguf-py's output.
// Thread safety: pure functions.
#pragma once

#include <cstdint>

#include "core/weight_type.h"

namespace vosti {

// Elements and bytes of one block (1 element for the plain types f32, f16, bf16).
struct BlockLayout {
  int64_t elems = 0;
  int64_t bytes = 0;
};

// The layout of a type Vosti decodes, or {0, 0} for any other type.
BlockLayout block_layout(WeightType type);
inline bool is_decodable(WeightType type) { return block_layout(type).elems > 0; }

// Bytes of one row of k elements. REQUIRES: is_decodable(type); k a multiple of the block.
inline int64_t row_bytes(WeightType type, int64_t k) {
  const BlockLayout b = block_layout(type);
  return k / b.elems * b.bytes;
}

// dst[num_elements] = the values of the blocks at src.
// REQUIRES: is_decodable(type); num_elements a multiple of the block's elements.
void decode_values(WeightType type, const uint8_t* src, int64_t num_elements, float* dst);

// The value of element i of a row of a plain type (f32, f16, bf16).
float decode_plain(WeightType type, const uint8_t* row, int64_t i);

}  // namespace vosti
