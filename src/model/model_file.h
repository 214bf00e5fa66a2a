// ModelFile: an opened model (a GGUF file, or a Hugging Face directory with config.json and
// one or more safetensors shards) as its config plus its tensors by role, in the layout
// every consumer wants: PyTorch shapes, q/k rows in HF order. Model::load (the CPU's f32
// weights) and CudaModel::load (bf16 straight to the GPU, no f32 copy of the model) both
// read through it, one tensor at a time.
//
// A weight update makes another ModelFile with some tensors replaced by in-memory ones
// (with_replaced): the same config and naming, the replacements stored as the file would store
// them, so every reader below sees one consistent model.
//
// Invariants: every view() is shape-checked against the config; a tensor converted by
// read_f32() / read_bf16() holds exactly the values Model::load has always produced (the
// dequantised f32, rounded to nearest even for bf16; bf16 tensors copied bit for bit).
// Thread safety: immutable after open(); concurrent reads are fine.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
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
  // Appended (the enum's values are part of the weights digest):
  kPostAttnNorm,  // [hidden] (Gemma: post_attention_layernorm, on the attention output)
  kPostFfnNorm,   // [hidden] (Gemma: post_feedforward_layernorm, on the MLP output)
  // A mixture-of-experts layer (LayerSpec::moe) has these instead of kGate, kUp, kDown; the
  // expert roles are one tensor per expert (`expert` 0..num_experts-1): the Hub's checkpoints
  // store them so, llama.cpp's GGUFs as slices of one [num_experts, ...] tensor.
  kRouter,      // [num_experts, hidden] (the router's linear layer: mlp.gate / block_sparse_moe.gate)
  kExpertGate,  // [expert intermediate, hidden] of one expert
  kExpertUp,    // [expert intermediate, hidden]
  kExpertDown,  // [hidden, expert intermediate]
};

// Whether a role is one expert's (kExpertGate, kExpertUp, kExpertDown: addressed by an expert index).
bool is_expert_role(WeightRole role);

// Whether a role is an RMSNorm weight (the roles norm_weight_offset applies to).
bool is_norm_role(WeightRole role);

// One tensor of a model: its role, layer (-1 for kEmbed, kFinalNorm, kLmHead) and expert (-1
// but for the expert roles).
struct TensorSlot {
  WeightRole role = WeightRole::kEmbed;
  int64_t layer = -1;
  int64_t expert = -1;
};

// A tensor given to ModelFile::with_replaced: values in HF row order (PyTorch's layout).
struct ReplacementTensor {
  std::string name;                    // an HF name ("model.layers.0.self_attn.q_proj.weight") or the file's own
  WeightType type = WeightType::kF32;  // kF32, kF16 or kBF16
  std::vector<int64_t> shape;          // PyTorch order
  const uint8_t* data = nullptr;       // row-major, num_bytes bytes
  size_t num_bytes = 0;
  // Null: the bytes are copied. Set: they are kept as they are (no copy, unless the file's
  // layout needs its rows reordered), `owner` keeps them alive and they must never change.
  std::shared_ptr<const void> owner;
};

class ModelFile {
 public:
  // Opens a .gguf file or a directory with config.json + safetensors (sharded or not).
  // Errors: kNotFound for a missing path; the format readers' errors, naming the file.
  static Result<std::shared_ptr<const ModelFile>> open(const std::string& path);

  // `base` with the given tensors replaced (a weight update): the same config, names and
  // tensors otherwise. Replacing a replaced tensor again keeps only the newest. An lm_head of a
  // model that ties it to the embedding is skipped (as vLLM does), as are rotary inv_freq buffers.
  // Errors: kInvalidArgument naming a tensor the model does not have, a name given twice, a
  // shape other than the config's, a dtype other than f32/f16/bf16, or a byte count that does
  // not match the shape.
  static Result<std::shared_ptr<const ModelFile>> with_replaced(std::shared_ptr<const ModelFile> base,
                                                                const std::vector<ReplacementTensor>& tensors);

  const ModelConfig& config() const { return config_; }
  const std::string& path() const { return path_; }
  bool is_gguf() const { return gguf_ != nullptr; }

  // The name of a role's tensor in the file (layer ignored for kEmbed, kFinalNorm, kLmHead); an
  // expert's slice of a GGUF's stacked tensor is named "blk.N.ffn_gate_exps.weight[e]" (expert -1:
  // the stacked tensor itself).
  std::string tensor_name(WeightRole role, int64_t layer, int64_t expert = -1) const;
  // Every tensor the model has (the lm_head only when stored), embedding first, then each
  // layer's in WeightRole order, then the final norm and the lm_head: a fixed order.
  std::vector<TensorSlot> tensor_slots() const;
  // The slot of a tensor named as in the file or as in Hugging Face transformers. kNotFound
  // naming it when the model has no such tensor.
  Result<TensorSlot> find_tensor(std::string_view name) const;
  // Whether the tensor comes from with_replaced() rather than the file.
  bool is_replaced(WeightRole role, int64_t layer = -1, int64_t expert = -1) const;
  // The shape the config implies for a role.
  std::vector<int64_t> expected_shape(WeightRole role) const;
  bool has(WeightRole role, int64_t layer = -1, int64_t expert = -1) const;
  // The stored tensor, shape-checked (an expert role: that expert's [rows, cols]). Errors:
  // kNotFound, kInvalidArgument (shape, an expert index out of range), named.
  Result<WeightView> view(WeightRole role, int64_t layer = -1, int64_t expert = -1) const;
  // True where rows of the stored tensor are not in HF order and must be unpermuted:
  // llama.cpp stores Llama q and k (and their biases) with each head's rows (i, j) -> 2i + j.
  bool needs_row_unpermute(WeightRole role) const;
  // Heads of a role whose rows needs_row_unpermute() (num_heads for q, num_kv_heads for k).
  int64_t unpermute_heads(WeightRole role) const;

  // Whether read_f32() changes a tensor beyond decoding it: q/k rows to unpermute, or a norm
  // whose stored w the model multiplies by (1 + w) (Gemma's HF checkpoints).
  bool needs_conversion(WeightRole role) const { return needs_row_unpermute(role) || norm_offset(role) != 0.0f; }
  // What read_f32() adds to every value of a role (config().norm_weight_offset for norms, else 0).
  float norm_offset(WeightRole role) const;

  // The tensor as f32 in HF row order as the forward uses it: dequantised or widened,
  // unpermuted, a norm's multiplier (norm_offset added in f32). Errors as view().
  Result<std::vector<float>> read_f32(WeightRole role, int64_t layer = -1, int64_t expert = -1) const;
  // The tensor as f32 the way Hugging Face transformers holds it under hf_tensor_name(): read_f32()
  // except that Gemma's norms are w, not 1 + w (a GGUF's stored 1 + w minus 1 in f32, as
  // transformers' GGUF loader does). Errors as view().
  Result<std::vector<float>> read_hf_f32(WeightRole role, int64_t layer = -1, int64_t expert = -1) const;
  // The tensor as bf16 in HF row order: copied when stored as bf16, else read_f32() rounded
  // to nearest even. Errors as view().
  Result<std::vector<uint16_t>> read_bf16(WeightRole role, int64_t layer = -1, int64_t expert = -1) const;

  ModelFile(const ModelFile&) = delete;
  ModelFile& operator=(const ModelFile&) = delete;
  ~ModelFile();

 private:
  struct Gguf;
  struct Safetensors;
  ModelFile() = default;

  std::string path_;
  ModelConfig config_;
  std::shared_ptr<const Gguf> gguf_;  // shared with the files with_replaced() makes from this one
  std::shared_ptr<const Safetensors> st_;
  std::map<std::string, WeightView, std::less<>> replaced_;  // by tensor_name(); stored as the file would
  // Where a safetensors checkpoint keeps the decoder: "model." (a *ForCausalLM), or the language
  // model of Gemma3ForConditionalGeneration ("language_model.model." as on the Hub,
  // "model.language_model." as transformers 5 saves it); and its lm_head's name.
  std::string hf_prefix_ = "model.";
  std::string hf_lm_head_ = "lm_head.weight";
};

// The Hugging Face transformers name of a role's tensor in a *ForCausalLM of the architecture
// (layer ignored for global roles, expert used by the expert roles only): Gemma names its norms
// differently from Llama, Mixtral its MoE block (block_sparse_moe, experts' w1/w3/w2) from
// Qwen3-MoE's (mlp.gate, mlp.experts.E.gate_proj/up_proj/down_proj).
std::string hf_tensor_name(Architecture arch, WeightRole role, int64_t layer, int64_t expert = -1);

// Reorders rows [rows, cols] of llama.cpp's interleaved q/k layout into HF order:
// within each of `heads` heads of hd = rows / heads rows, stored row 2i + j -> row j * hd/2 + i.
template <typename T>
void unpermute_qk_rows(const T* src, int64_t rows, int64_t cols, int64_t heads, T* dst);

}  // namespace vosti
