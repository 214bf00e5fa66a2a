// WeightType: how a stored tensor encodes its values, in ggml's numbering (so GGUF files
// map directly; safetensors F32/F16/BF16 map onto the same values). Shared by the file
// readers (io/) and the kernels that compute from the stored bytes (kernels/).
// Thread safety: plain values.
#pragma once

#include <cstdint>

namespace vosti {

enum class WeightType : uint32_t {
  kF32 = 0,
  kF16 = 1,
  kQ4_0 = 2,
  kQ4_1 = 3,
  kQ5_0 = 6,
  kQ5_1 = 7,
  kQ8_0 = 8,
  kQ8_1 = 9,
  kQ2_K = 10,
  kQ3_K = 11,
  kQ4_K = 12,
  kQ5_K = 13,
  kQ6_K = 14,
  kQ8_K = 15,
  kI8 = 24,
  kI16 = 25,
  kI32 = 26,
  kI64 = 27,
  kF64 = 28,
  kBF16 = 30,
};

}  // namespace vosti
