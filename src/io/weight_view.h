// WeightView: one named tensor as it sits in a model file (no copy).
//
// Types use ggml's numbering so GGUF files map directly; safetensors F32/F16/BF16
// map onto the same values. shape is PyTorch order (outermost first): a linear
// layer's weight is [out_features, in_features]. For block-quantised types the
// innermost dimension is a multiple of the block size.
// Thread safety: a view into immutable memory (kept alive by `owner`).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

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

struct WeightTypeTraits {
  std::string_view name;   // "Q4_K", as gguf-dump prints it
  int64_t block_elems;     // elements per block (1 for plain types)
  size_t block_bytes;      // bytes per block
  bool dequant_supported;  // Vosti can turn it into f32
};

// Traits of `type`, or nullptr for a value Vosti does not know.
const WeightTypeTraits* weight_type_traits(uint32_t type);

struct WeightView {
  std::string name;
  WeightType type = WeightType::kF32;
  std::vector<int64_t> shape;  // PyTorch order, outermost first
  const uint8_t* data = nullptr;
  size_t num_bytes = 0;
  std::shared_ptr<const void> owner;  // keeps the mapping alive

  int64_t num_elements() const;
};

}  // namespace vosti
