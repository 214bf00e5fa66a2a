#include "io/dequant.h"

#include <cstring>
#include <string>

#include "core/quant_blocks.h"

// The block decoders live in core/quant_blocks.h, shared with the kernels that compute
// straight from the stored blocks; this file checks the sizes and runs them.
namespace vosti {

Status dequantize(WeightType type, const uint8_t* src, size_t src_bytes, float* dst, int64_t num_elements) {
  const WeightTypeTraits* traits = weight_type_traits(static_cast<uint32_t>(type));
  if (traits == nullptr) {
    return invalid_argument("dequantize: unknown weight type " + std::to_string(static_cast<uint32_t>(type)));
  }
  if (!traits->dequant_supported) {
    return unimplemented("dequantize: type " + std::string(traits->name) +
                         " is not supported (F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K, Q6_K are)");
  }
  if (num_elements < 0 || num_elements % traits->block_elems != 0) {
    return invalid_argument("dequantize: " + std::to_string(num_elements) + " elements is not a multiple of the " +
                            std::string(traits->name) + " block size " + std::to_string(traits->block_elems));
  }
  const auto num_blocks = static_cast<size_t>(num_elements / traits->block_elems);
  if (src_bytes / traits->block_bytes != num_blocks || src_bytes % traits->block_bytes != 0) {
    return invalid_argument("dequantize: " + std::to_string(src_bytes) + " bytes do not hold " +
                            std::to_string(num_elements) + " " + std::string(traits->name) + " elements");
  }
  decode_values(type, src, num_elements, dst);
  return Status::ok_status();
}

}  // namespace vosti
