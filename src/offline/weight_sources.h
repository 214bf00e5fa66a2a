// Weight sources: the tensors of a weight update read from disk, for ModelFile::with_replaced.
// A .safetensors file or a directory of them is mapped, not copied (the replacements keep the
// mapping alive); any other model file Vosti opens (a GGUF, a directory with config.json) is
// read as f32 in Hugging Face layout and names. The Python package's update_weights(path) and
// the server's /update_weights_from_disk read through here.
// Thread safety: pure functions.
#pragma once

#include <string>
#include <vector>

#include "core/status.h"
#include "model/model_file.h"

namespace vosti {

// Whether `path` is a .safetensors file or a directory holding at least one.
bool is_safetensors_path(const std::string& path);

// The tensors at `path` (see above). Errors: kNotFound for a missing path or a directory
// without .safetensors files and config.json; the readers' errors, naming the file.
Result<std::vector<ReplacementTensor>> tensors_from_path(const std::string& path);

}  // namespace vosti
