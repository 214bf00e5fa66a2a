// Dequantisation of ggml block formats to f32 (core/quant_blocks.h), bit-exact against the `gguf`
// Python package (gguf.quants.dequantize) on the same bytes.
//
// Supported: F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K.
// Thread safety: pure functions.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/status.h"
#include "io/weight_view.h"

namespace vosti {

// Dequantises `num_elements` values of `type` from `src` (which must hold
// exactly the bytes those elements take) into `dst` [num_elements].
// REQUIRES: num_elements is a multiple of the type's block size.
Status dequantize(WeightType type, const uint8_t* src, size_t src_bytes, float* dst, int64_t num_elements);

}  // namespace vosti
