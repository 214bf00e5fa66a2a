// SafetensorsModel: a Hugging Face model directory: config.json plus one
// model.safetensors file or shards listed in model.safetensors.index.json.
//
// Invariants after open(): every tensor's byte range lies inside its file and
// matches dtype x shape exactly; names are unique across shards; F32, F16 and
// BF16 only (other dtypes are an UNIMPLEMENTED error naming the tensor).
// A header that lies (offsets out of order, overlapping, past the end, wrong
// length) is a DATA_LOSS error naming the file and the tensor.
// Thread safety: immutable after open().
#pragma once

#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/status.h"
#include "io/mapped_file.h"
#include "io/weight_view.h"

namespace vosti {

class SafetensorsFile {
 public:
  static Result<SafetensorsFile> open(const std::string& path);
  static Result<SafetensorsFile> parse(std::shared_ptr<const MappedFile> file);
  const std::vector<WeightView>& tensors() const { return tensors_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }

 private:
  std::vector<WeightView> tensors_;
  std::map<std::string, std::string> metadata_;
};

class SafetensorsModel {
 public:
  // `dir` holds config.json and model.safetensors or model.safetensors.index.json.
  static Result<SafetensorsModel> open(const std::string& dir);

  const std::string& dir() const { return dir_; }
  const nlohmann::json& config() const { return config_; }
  const std::map<std::string, WeightView, std::less<>>& tensors() const { return tensors_; }
  // NOT_FOUND naming the tensor and the directory when absent.
  Result<WeightView> tensor(std::string_view name) const;

 private:
  std::string dir_;
  nlohmann::json config_;
  std::map<std::string, WeightView, std::less<>> tensors_;
};

}  // namespace vosti
