// GgufFile: a parsed GGUF v2/v3 file (metadata of every type, tensor infos,
// alignment) over a read-only memory map.
//
// Invariants after open(): every tensor's data lies inside the file and is
// aligned to general.alignment; dimensions are positive and their product
// fits in int64; metadata keys are unique. Any violation is a DATA_LOSS or
// INVALID_ARGUMENT error naming the file and what is wrong, never a crash.
// Thread safety: immutable after open().
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "core/status.h"
#include "io/mapped_file.h"
#include "io/weight_view.h"

namespace vosti {

enum class GgufType : uint32_t {
  kUint8 = 0,
  kInt8 = 1,
  kUint16 = 2,
  kInt16 = 3,
  kUint32 = 4,
  kInt32 = 5,
  kFloat32 = 6,
  kBool = 7,
  kString = 8,
  kArray = 9,
  kUint64 = 10,
  kInt64 = 11,
  kFloat64 = 12,
};
std::string_view gguf_type_name(GgufType type);

struct GgufValue;
struct GgufArray {
  GgufType element_type = GgufType::kUint8;
  std::vector<GgufValue> items;
};

// One metadata value: integers widened to int64/uint64, floats to double.
struct GgufValue {
  GgufType type = GgufType::kUint8;
  std::variant<uint64_t, int64_t, double, bool, std::string, GgufArray> value;

  // Conversions that check the type and range; errors name the expected type.
  Result<int64_t> as_int() const;
  Result<double> as_double() const;
  Result<bool> as_bool() const;
  Result<std::string> as_string() const;
  // Short human form for `vosti inspect` ("[string x 49152]" for big arrays).
  std::string to_display_string(size_t max_items = 8) const;
};

struct GgufTensorInfo {
  std::string name;
  std::vector<int64_t> dims;  // ggml order: dims[0] is the innermost (contiguous) dimension
  WeightType type = WeightType::kF32;
  uint64_t offset = 0;  // relative to the data section
  size_t num_bytes = 0;
};

class GgufFile {
 public:
  static Result<GgufFile> open(const std::string& path);
  // Parses from memory already mapped (used by the fuzz target and tests).
  static Result<GgufFile> parse(std::shared_ptr<const MappedFile> file);

  const std::string& path() const { return path_; }
  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }
  // Byte offset in the file where the data section (tensor offsets are relative to it) starts.
  uint64_t data_offset() const { return data_offset_; }
  const std::vector<std::pair<std::string, GgufValue>>& metadata() const { return metadata_; }
  const std::vector<GgufTensorInfo>& tensors() const { return tensors_; }

  // nullptr when absent.
  const GgufValue* find(std::string_view key) const;
  // Typed getters: NOT_FOUND naming the key when absent, INVALID_ARGUMENT on a type mismatch.
  Result<int64_t> get_int(std::string_view key) const;
  Result<double> get_double(std::string_view key) const;
  Result<bool> get_bool(std::string_view key) const;
  Result<std::string> get_string(std::string_view key) const;
  Result<std::vector<std::string>> get_string_array(std::string_view key) const;
  Result<std::vector<double>> get_double_array(std::string_view key) const;
  Result<std::vector<int64_t>> get_int_array(std::string_view key) const;

  // The tensor as a view into the mapped file; shape converted to PyTorch order.
  Result<WeightView> tensor(std::string_view name) const;

 private:
  // Every tensor aligned, inside the file and disjoint from the others.
  Status validate_tensor_ranges(uint64_t file_size) const;
  Result<const GgufValue*> find_required(std::string_view key) const;

  std::string path_;
  uint32_t version_ = 0;
  uint64_t alignment_ = 32;
  std::vector<std::pair<std::string, GgufValue>> metadata_;
  std::map<std::string, size_t, std::less<>> metadata_index_;
  std::vector<GgufTensorInfo> tensors_;
  std::map<std::string, size_t, std::less<>> tensor_index_;
  uint64_t data_offset_ = 0;
  std::shared_ptr<const MappedFile> file_;
};

}  // namespace vosti
