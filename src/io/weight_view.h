// WeightView: one named tensor as it sits in a model file (no copy).
//
// Types are WeightType (core/weight_type.h), ggml's numbering. shape is PyTorch order (outermost first): a linear
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

#include "core/weight_type.h"

namespace vosti {

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
