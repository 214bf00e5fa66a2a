// ModelFile: an opened model (a GGUF file, or a Hugging Face directory with config.json and
// one or more safetensors shards) as its config plus its tensors by role, in the layout
// every consumer wants: PyTorch shapes, q/k rows in HF order. Model::load (the CPU's f32
// weights) and CudaModel::load (bf16 straight to the GPU, no f32 copy of the model) both
// read through it, one tensor at a time.
//
// Invariants: every view() is shape-checked against the config; a tensor converted by
// read_f32() / read_bf16() holds exactly the values Model::load has always produced (the
// dequantised f32, rounded to nearest even for bf16; bf16 tensors copied bit for bit).
// Thread safety: immutable after open(); concurrent reads are fine.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "io/weight_view.h"
#include "model/model_config.h"

namespace vosti {

enum class WeightRole : uint8_t {
  kEmbed,      // [vocab, hidden]
  kFinalNorm,  // [hidden]
  kLmHead,     // [vocab, hidden]; absent when tied (tie_word_embeddings)
  kAttnNorm,   // [hidden]
  kQ,          // [num_heads * head_dim, hidden]
  kK,          // [num_kv_heads * head_dim, hidden]
  kV,          // [num_kv_heads * head_dim, hidden]
  kQBias,      // [num_heads * head_dim] (Qwen2)
  kKBias,      // [num_kv_heads * head_dim]
  kVBias,      // [num_kv_heads * head_dim]
  kQNorm,      // [head_dim] (Qwen3)
  kKNorm,      // [head_dim]
  kO,          // [hidden, num_heads * head_dim]
  kFfnNorm,    // [hidden]
  kGate,       // [intermediate, hidden]
  kUp,         // [intermediate, hidden]
  kDown,       // [hidden, intermediate]
};

class ModelFile {
 public:
  // Opens a .gguf file or a directory with config.json + safetensors (sharded or not).
  // Errors: kNotFound for a missing path; the format readers' errors, naming the file.
  static Result<std::shared_ptr<const ModelFile>> open(const std::string& path);

  const ModelConfig& config() const { return config_; }
  const std::string& path() const { return path_; }
  bool is_gguf() const { return gguf_ != nullptr; }

  // The name of a role's tensor in the file (layer ignored for kEmbed, kFinalNorm, kLmHead).
  std::string tensor_name(WeightRole role, int64_t layer) const;
  // The shape the config implies for a role.
  std::vector<int64_t> expected_shape(WeightRole role) const;
  bool has(WeightRole role, int64_t layer = -1) const;
  // The stored tensor, shape-checked. Errors: kNotFound, kInvalidArgument (shape), named.
  Result<WeightView> view(WeightRole role, int64_t layer = -1) const;
  // True where rows of the stored tensor are not in HF order and must be unpermuted:
  // llama.cpp stores Llama q and k (and their biases) with each head's rows (i, j) -> 2i + j.
  bool needs_row_unpermute(WeightRole role) const;
  // Heads of a role whose rows needs_row_unpermute() (num_heads for q, num_kv_heads for k).
  int64_t unpermute_heads(WeightRole role) const;

  // The tensor as f32 in HF row order: dequantised or widened, unpermuted. Errors as view().
  Result<std::vector<float>> read_f32(WeightRole role, int64_t layer = -1) const;
  // The tensor as bf16 in HF row order: copied when stored as bf16, else read_f32() rounded
  // to nearest even. Errors as view().
  Result<std::vector<uint16_t>> read_bf16(WeightRole role, int64_t layer = -1) const;

  ModelFile(const ModelFile&) = delete;
  ModelFile& operator=(const ModelFile&) = delete;
  ~ModelFile();

 private:
  struct Gguf;
  struct Safetensors;
  ModelFile() = default;

  std::string path_;
  ModelConfig config_;
  std::unique_ptr<Gguf> gguf_;
  std::unique_ptr<Safetensors> st_;
};

// Reorders rows [rows, cols] of llama.cpp's interleaved q/k layout into HF order:
// within each of `heads` heads of hd = rows / heads rows, stored row 2i + j -> row j * hd/2 + i.
template <typename T>
void unpermute_qk_rows(const T* src, int64_t rows, int64_t cols, int64_t heads, T* dst);

}  // namespace vosti
