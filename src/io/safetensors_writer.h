// SafetensorsWriter: writes one safetensors file (8-byte little-endian header length, the
// JSON header padded with spaces to 8 bytes, then the tensors' bytes in order), filling each
// tensor's bytes in place through a callback on the mapped file, so that multi-gigabyte
// shards are written at memory speed with no staging copy. Used by `vosti make-model`.
// Thread safety: one writer per file; the fill callback may use threads of its own.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/status.h"

namespace vosti {

struct SafetensorsEntry {
  std::string name;
  std::string dtype;  // "BF16", "F32", "F16"
  std::vector<int64_t> shape;
  // Fills the tensor's bytes [num_bytes] (row-major); called once.
  std::function<void(uint8_t* dst, size_t num_bytes)> fill;
};

// Bytes of one element of a safetensors dtype (0 for an unknown one).
size_t safetensors_dtype_bytes(const std::string& dtype);

// Writes `entries` to `path` (replacing it). Errors: kInvalidArgument for an unknown dtype,
// kInternal naming the path when the file cannot be created, sized or mapped.
Status write_safetensors(const std::string& path, const std::vector<SafetensorsEntry>& entries);

}  // namespace vosti
