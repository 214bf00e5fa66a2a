#include "offline/weight_sources.h"

#include <algorithm>
#include <filesystem>
#include <memory>

#include "io/safetensors.h"

namespace vosti {
namespace {

// The tensors of a .safetensors file or of every *.safetensors file in a directory, as views
// into the mapped files.
Result<std::vector<ReplacementTensor>> safetensors_tensors(const std::string& path) {
  std::vector<std::string> files;
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    for (const auto& entry : std::filesystem::directory_iterator(path, ec))
      if (entry.path().extension() == ".safetensors") files.push_back(entry.path().string());
    std::sort(files.begin(), files.end());
    if (files.empty()) return not_found(path + ": no .safetensors files in this directory");
  } else {
    files.push_back(path);
  }
  std::vector<ReplacementTensor> out;
  for (const std::string& f : files) {
    VOSTI_ASSIGN_OR_RETURN(SafetensorsFile file, SafetensorsFile::open(f));
    for (const WeightView& w : file.tensors())
      out.push_back({w.name, w.type, w.shape, w.data, w.num_bytes, w.owner});  // the mapping: no copy
  }
  return out;
}

// Every tensor of a model file Vosti opens (GGUF, or a directory with config.json), as f32 in
// HF layout under HF names.
Result<std::vector<ReplacementTensor>> model_file_tensors(const std::string& path) {
  VOSTI_ASSIGN_OR_RETURN(std::shared_ptr<const ModelFile> file, ModelFile::open(path));
  std::vector<ReplacementTensor> out;
  for (const TensorSlot& s : file->tensor_slots()) {
    VOSTI_ASSIGN_OR_RETURN(std::vector<float> values, file->read_hf_f32(s.role, s.layer, s.expert));
    auto buf = std::make_shared<std::vector<float>>(std::move(values));
    out.push_back({hf_tensor_name(file->config().arch, s.role, s.layer, s.expert), WeightType::kF32,
                   file->expected_shape(s.role), reinterpret_cast<const uint8_t*>(buf->data()),
                   buf->size() * sizeof(float), buf});
  }
  return out;
}

}  // namespace

bool is_safetensors_path(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    for (const auto& entry : std::filesystem::directory_iterator(path, ec))
      if (entry.path().extension() == ".safetensors") return true;
    return false;
  }
  return std::filesystem::path(path).extension() == ".safetensors";
}

Result<std::vector<ReplacementTensor>> tensors_from_path(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return not_found(path + ": no such file or directory");
  return is_safetensors_path(path) ? safetensors_tensors(path) : model_file_tensors(path);
}

}  // namespace vosti
