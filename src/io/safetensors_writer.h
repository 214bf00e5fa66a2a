// write_safetensors: writes one safetensors file (8-byte little-endian header length, the
// JSON header padded with spaces to 8 bytes, then the tensors' bytes in order). Each tensor's
// bytes come from a callback asked for one chunk at a time; chunks are filled and written
// (pwrite) by several threads at once, so multi-gigabyte shards are written at memory speed.
// Used by `vosti make-model`.
// Thread safety: one call per file; `fill` is called concurrently for different chunks.
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
  // Fills bytes [offset, offset + num_bytes) of the tensor (row-major) into dst; offset is a
  // multiple of the writer's chunk (8 MiB), so chunks hold whole elements. Called once per
  // chunk, from any thread.
  std::function<void(uint8_t* dst, size_t offset, size_t num_bytes)> fill;
};

// Bytes of one element of a safetensors dtype (0 for an unknown one).
size_t safetensors_dtype_bytes(const std::string& dtype);

// Writes `entries` to `path` (replacing it). Errors: kInvalidArgument for an unknown dtype,
// kInternal naming the path when the file cannot be created, sized or mapped.
Status write_safetensors(const std::string& path, const std::vector<SafetensorsEntry>& entries, int num_threads = 1);

}  // namespace vosti
