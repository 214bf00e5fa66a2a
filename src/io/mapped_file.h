// MappedFile: a read-only memory map of a whole file (weights are views into it).
//
// Invariants: data() stays valid and unchanged for the object's lifetime; an
// empty file maps to size() == 0 and a non-null dummy pointer.
// Thread safety: immutable after open(); share it freely (by shared_ptr).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "core/status.h"

namespace vosti {

class MappedFile {
 public:
  // Maps `path` read-only. Errors name the path and the OS reason.
  static Result<std::shared_ptr<const MappedFile>> open(const std::string& path);
  // A private copy of `size` bytes presented as a file named `path` (fuzz targets, tests).
  static std::shared_ptr<const MappedFile> from_bytes(const std::string& path, const void* bytes, size_t size);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }

 private:
  MappedFile() = default;
  std::string path_;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  bool mapped_ = false;
  std::unique_ptr<uint8_t[]> owned_;  // from_bytes() only: exactly size_ bytes
};

}  // namespace vosti
