#include "model/model_file.h"

#include <cstring>
#include <filesystem>
#include <map>

#include "core/dtype.h"
#include "io/dequant.h"
#include "io/gguf.h"
#include "io/safetensors.h"

namespace vosti {

struct ModelFile::Gguf {
  GgufFile file;
};
struct ModelFile::Safetensors {
  SafetensorsModel model;
};

ModelFile::~ModelFile() = default;

namespace {

const char* gguf_role_name(WeightRole role) {
  switch (role) {
    case WeightRole::kEmbed:
      return "token_embd.weight";
    case WeightRole::kFinalNorm:
      return "output_norm.weight";
    case WeightRole::kLmHead:
      return "output.weight";
    case WeightRole::kAttnNorm:
      return "attn_norm.weight";
    case WeightRole::kQ:
      return "attn_q.weight";
    case WeightRole::kK:
      return "attn_k.weight";
    case WeightRole::kV:
      return "attn_v.weight";
    case WeightRole::kQBias:
      return "attn_q.bias";
    case WeightRole::kKBias:
      return "attn_k.bias";
    case WeightRole::kVBias:
      return "attn_v.bias";
    case WeightRole::kQNorm:
      return "attn_q_norm.weight";
    case WeightRole::kKNorm:
      return "attn_k_norm.weight";
    case WeightRole::kO:
      return "attn_output.weight";
    case WeightRole::kFfnNorm:
      return "ffn_norm.weight";
    case WeightRole::kGate:
      return "ffn_gate.weight";
    case WeightRole::kUp:
      return "ffn_up.weight";
    case WeightRole::kDown:
      return "ffn_down.weight";
    case WeightRole::kPostAttnNorm:
      return "post_attention_norm.weight";
    case WeightRole::kPostFfnNorm:
      return "post_ffw_norm.weight";
    case WeightRole::kRouter:
      return "ffn_gate_inp.weight";
    case WeightRole::kExpertGate:
      return "ffn_gate_exps.weight";
    case WeightRole::kExpertUp:
      return "ffn_up_exps.weight";
    case WeightRole::kExpertDown:
      return "ffn_down_exps.weight";
  }
  return "?";
}

const char* hf_role_name(Architecture arch, WeightRole role) {
  // Gemma: post_attention_layernorm is the attention output's norm, the MLP's input norm is
  // pre_feedforward_layernorm (Llama calls that one post_attention_layernorm).
  if (arch == Architecture::kGemma3) {
    if (role == WeightRole::kFfnNorm) return "pre_feedforward_layernorm.weight";
    if (role == WeightRole::kPostAttnNorm) return "post_attention_layernorm.weight";
    if (role == WeightRole::kPostFfnNorm) return "post_feedforward_layernorm.weight";
  }
  switch (role) {
    case WeightRole::kEmbed:
      return "model.embed_tokens.weight";
    case WeightRole::kFinalNorm:
      return "model.norm.weight";
    case WeightRole::kLmHead:
      return "lm_head.weight";
    case WeightRole::kAttnNorm:
      return "input_layernorm.weight";
    case WeightRole::kQ:
      return "self_attn.q_proj.weight";
    case WeightRole::kK:
      return "self_attn.k_proj.weight";
    case WeightRole::kV:
      return "self_attn.v_proj.weight";
    case WeightRole::kQBias:
      return "self_attn.q_proj.bias";
    case WeightRole::kKBias:
      return "self_attn.k_proj.bias";
    case WeightRole::kVBias:
      return "self_attn.v_proj.bias";
    case WeightRole::kQNorm:
      return "self_attn.q_norm.weight";
    case WeightRole::kKNorm:
      return "self_attn.k_norm.weight";
    case WeightRole::kO:
      return "self_attn.o_proj.weight";
    case WeightRole::kFfnNorm:
      return "post_attention_layernorm.weight";
    case WeightRole::kGate:
      return "mlp.gate_proj.weight";
    case WeightRole::kUp:
      return "mlp.up_proj.weight";
    case WeightRole::kDown:
      return "mlp.down_proj.weight";
    case WeightRole::kPostAttnNorm:
      return "post_attention_layernorm.weight";
    case WeightRole::kPostFfnNorm:
      return "post_feedforward_layernorm.weight";
    case WeightRole::kRouter:
      return arch == Architecture::kMixtral ? "block_sparse_moe.gate.weight" : "mlp.gate.weight";
    case WeightRole::kExpertGate:
    case WeightRole::kExpertUp:
    case WeightRole::kExpertDown:
      return "?";  // named with their expert index: hf_tensor_name
  }
  return "?";
}

// An expert's tensor under a layer: Mixtral's w1 (gate), w3 (up), w2 (down); Qwen3-MoE's.
std::string hf_expert_name(Architecture arch, WeightRole role, int64_t expert) {
  const std::string e = std::to_string(expert);
  if (arch == Architecture::kMixtral) {
    const char* w = role == WeightRole::kExpertGate ? "w1" : role == WeightRole::kExpertUp ? "w3" : "w2";
    return "block_sparse_moe.experts." + e + "." + w + ".weight";
  }
  const char* w = role == WeightRole::kExpertGate ? "gate_proj"
                  : role == WeightRole::kExpertUp ? "up_proj"
                                                  : "down_proj";
  return "mlp.experts." + e + "." + w + ".weight";
}

// The model's tensors as a Gemma3ForConditionalGeneration checkpoint names them, if it is one.
void find_language_model(const SafetensorsModel& st, std::string& prefix, std::string& lm_head) {
  for (const char* p : {"language_model.model.", "model.language_model."}) {
    if (st.tensors().count(std::string(p) + "embed_tokens.weight") != 0) {
      prefix = p;
      lm_head = prefix == "language_model.model." ? "language_model.lm_head.weight" : "lm_head.weight";
      return;
    }
  }
}

bool is_global(WeightRole role) {
  return role == WeightRole::kEmbed || role == WeightRole::kFinalNorm || role == WeightRole::kLmHead;
}

std::string shape_str(const std::vector<int64_t>& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

}  // namespace

template <typename T>
void unpermute_qk_rows(const T* src, int64_t rows, int64_t cols, int64_t heads, T* dst) {
  const int64_t hd = rows / heads, half = hd / 2;
  for (int64_t h = 0; h < heads; ++h)
    for (int64_t i = 0; i < half; ++i)
      for (int64_t j = 0; j < 2; ++j)
        std::memcpy(dst + (h * hd + j * half + i) * cols, src + (h * hd + 2 * i + j) * cols,
                    static_cast<size_t>(cols) * sizeof(T));
}
template void unpermute_qk_rows<float>(const float*, int64_t, int64_t, int64_t, float*);
template void unpermute_qk_rows<uint16_t>(const uint16_t*, int64_t, int64_t, int64_t, uint16_t*);

Result<std::shared_ptr<const ModelFile>> ModelFile::open(const std::string& path) {
  std::shared_ptr<ModelFile> f(new ModelFile());
  f->path_ = path;
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    VOSTI_ASSIGN_OR_RETURN(SafetensorsModel st, SafetensorsModel::open(path));
    VOSTI_ASSIGN_OR_RETURN(f->config_, ModelConfig::from_hf_config(st.config(), path + "/config.json"));
    if (f->config_.name.empty()) f->config_.name = std::filesystem::path(path).filename().string();
    find_language_model(st, f->hf_prefix_, f->hf_lm_head_);
    f->st_ = std::make_unique<Safetensors>(Safetensors{std::move(st)});
    return std::shared_ptr<const ModelFile>(std::move(f));
  }
  if (!std::filesystem::exists(path, ec))
    return not_found(path + ": no such model file or directory (give a .gguf file or a directory with config.json)");
  VOSTI_ASSIGN_OR_RETURN(GgufFile gguf, GgufFile::open(path));
  VOSTI_ASSIGN_OR_RETURN(f->config_, ModelConfig::from_gguf(gguf));
  if (f->config_.name.empty()) f->config_.name = std::filesystem::path(path).stem().string();
  f->gguf_ = std::make_unique<Gguf>(Gguf{std::move(gguf)});
  return std::shared_ptr<const ModelFile>(std::move(f));
}

bool is_norm_role(WeightRole role) {
  switch (role) {
    case WeightRole::kFinalNorm:
    case WeightRole::kAttnNorm:
    case WeightRole::kQNorm:
    case WeightRole::kKNorm:
    case WeightRole::kFfnNorm:
    case WeightRole::kPostAttnNorm:
    case WeightRole::kPostFfnNorm:
      return true;
    default:
      return false;
  }
}

bool is_expert_role(WeightRole role) {
  return role == WeightRole::kExpertGate || role == WeightRole::kExpertUp || role == WeightRole::kExpertDown;
}

std::string hf_tensor_name(Architecture arch, WeightRole role, int64_t layer, int64_t expert) {
  if (is_global(role)) return hf_role_name(arch, role);
  const std::string prefix = "model.layers." + std::to_string(layer) + ".";
  if (is_expert_role(role)) return prefix + hf_expert_name(arch, role, expert);
  return prefix + hf_role_name(arch, role);
}

std::string ModelFile::tensor_name(WeightRole role, int64_t layer, int64_t expert) const {
  if (gguf_) {
    if (is_global(role)) return gguf_role_name(role);
    std::string name = "blk." + std::to_string(layer) + "." + gguf_role_name(role);
    if (is_expert_role(role) && expert >= 0) name += "[" + std::to_string(expert) + "]";
    return name;
  }
  const std::string hf = hf_tensor_name(config_.arch, role, layer, expert);
  if (role == WeightRole::kLmHead) return hf_lm_head_;
  return hf_prefix_ + hf.substr(std::string_view("model.").size());
}

std::vector<int64_t> ModelFile::expected_shape(WeightRole role) const {
  const ModelConfig& c = config_;
  const int64_t H = c.hidden_size, hd = c.head_dim, q = c.num_heads * hd, kv = c.num_kv_heads * hd;
  switch (role) {
    case WeightRole::kEmbed:
    case WeightRole::kLmHead:
      return {c.vocab_size, H};
    case WeightRole::kFinalNorm:
    case WeightRole::kAttnNorm:
    case WeightRole::kFfnNorm:
    case WeightRole::kPostAttnNorm:
    case WeightRole::kPostFfnNorm:
      return {H};
    case WeightRole::kQ:
      return {q, H};
    case WeightRole::kK:
    case WeightRole::kV:
      return {kv, H};
    case WeightRole::kQBias:
      return {q};
    case WeightRole::kKBias:
    case WeightRole::kVBias:
      return {kv};
    case WeightRole::kQNorm:
    case WeightRole::kKNorm:
      return {hd};
    case WeightRole::kO:
      return {H, q};
    case WeightRole::kGate:
    case WeightRole::kUp:
      return {c.intermediate_size, H};
    case WeightRole::kDown:
      return {H, c.intermediate_size};
    case WeightRole::kRouter:
      return {c.moe().num_experts, H};
    case WeightRole::kExpertGate:
    case WeightRole::kExpertUp:
      return {c.moe().intermediate_size, H};
    case WeightRole::kExpertDown:
      return {H, c.moe().intermediate_size};
  }
  return {};
}

bool ModelFile::has(WeightRole role, int64_t layer, int64_t expert) const {
  const std::string name = tensor_name(role, layer, expert);
  if (replaced_.count(name) != 0) return true;
  if (gguf_) {
    if (is_expert_role(role)) return gguf_->file.tensor(tensor_name(role, layer)).ok();
    return gguf_->file.tensor(name).ok();
  }
  return st_->model.tensors().count(name) != 0;
}

// Expert `expert`'s [rows, cols] slice of a GGUF's stacked [num_experts, rows, cols] tensor.
static Result<WeightView> expert_slice(WeightView stacked, int64_t expert, int64_t num_experts,
                                       const std::string& name) {
  if (stacked.shape.size() != 3 || stacked.shape[0] != num_experts)
    return invalid_argument("tensor " + stacked.name + " has shape " + shape_str(stacked.shape) +
                            ", the config implies " + std::to_string(num_experts) + " experts stacked");
  if (expert < 0 || expert >= num_experts)
    return invalid_argument("expert " + std::to_string(expert) + " of " + stacked.name + " is outside 0.." +
                            std::to_string(num_experts - 1));
  const size_t each = stacked.num_bytes / static_cast<size_t>(num_experts);
  if (each * static_cast<size_t>(num_experts) != stacked.num_bytes)
    return invalid_argument("tensor " + stacked.name + ": its bytes do not split into " + std::to_string(num_experts) +
                            " experts");
  WeightView w = std::move(stacked);
  w.name = name;
  w.shape.erase(w.shape.begin());
  w.data += each * static_cast<size_t>(expert);
  w.num_bytes = each;
  return w;
}

Result<WeightView> ModelFile::view(WeightRole role, int64_t layer, int64_t expert) const {
  const std::string name = tensor_name(role, layer, expert);
  WeightView w;
  if (auto it = replaced_.find(name); it != replaced_.end()) {
    w = it->second;
  } else if (gguf_ && is_expert_role(role)) {
    VOSTI_ASSIGN_OR_RETURN(WeightView stacked, gguf_->file.tensor(tensor_name(role, layer)));
    VOSTI_ASSIGN_OR_RETURN(w, expert_slice(std::move(stacked), expert, config_.moe().num_experts, name));
  } else if (gguf_) {
    VOSTI_ASSIGN_OR_RETURN(w, gguf_->file.tensor(name));
  } else {
    VOSTI_ASSIGN_OR_RETURN(w, st_->model.tensor(name));
  }
  const std::vector<int64_t> shape = expected_shape(role);
  if (w.shape != shape)
    return invalid_argument("tensor " + name + " has shape " + shape_str(w.shape) + ", the config implies " +
                            shape_str(shape));
  return w;
}

bool ModelFile::needs_row_unpermute(WeightRole role) const {
  // Only Llama GGUFs carry llama.cpp's q/k row permutation.
  if (!gguf_ || (config_.arch != Architecture::kLlama && config_.arch != Architecture::kMixtral)) return false;
  return role == WeightRole::kQ || role == WeightRole::kK || role == WeightRole::kQBias || role == WeightRole::kKBias;
}

int64_t ModelFile::unpermute_heads(WeightRole role) const {
  return role == WeightRole::kQ || role == WeightRole::kQBias ? config_.num_heads : config_.num_kv_heads;
}

float ModelFile::norm_offset(WeightRole role) const { return is_norm_role(role) ? config_.norm_weight_offset : 0.0f; }

Result<std::vector<float>> ModelFile::read_f32(WeightRole role, int64_t layer, int64_t expert) const {
  VOSTI_ASSIGN_OR_RETURN(WeightView w, view(role, layer, expert));
  std::vector<float> out(static_cast<size_t>(w.num_elements()));
  VOSTI_RETURN_IF_ERROR(dequantize(w.type, w.data, w.num_bytes, out.data(), w.num_elements()).with_context(w.name));
  if (needs_row_unpermute(role)) {
    const int64_t rows = w.shape[0], cols = w.shape.size() == 2 ? w.shape[1] : 1;
    std::vector<float> hf(out.size());
    unpermute_qk_rows(out.data(), rows, cols, unpermute_heads(role), hf.data());
    out.swap(hf);
  }
  // transformers' Gemma3RMSNorm: 1.0 + weight.float(), one f32 addition.
  if (const float offset = norm_offset(role); offset != 0.0f)
    for (float& v : out) v = offset + v;
  return out;
}

Result<std::vector<float>> ModelFile::read_hf_f32(WeightRole role, int64_t layer, int64_t expert) const {
  if (config_.arch == Architecture::kGemma3 && is_norm_role(role) && norm_offset(role) != 0.0f) {
    VOSTI_ASSIGN_OR_RETURN(WeightView w, view(role, layer));  // w as stored (norms are never permuted)
    std::vector<float> out(static_cast<size_t>(w.num_elements()));
    VOSTI_RETURN_IF_ERROR(dequantize(w.type, w.data, w.num_bytes, out.data(), w.num_elements()).with_context(w.name));
    return out;
  }
  VOSTI_ASSIGN_OR_RETURN(std::vector<float> out, read_f32(role, layer, expert));
  if (config_.arch == Architecture::kGemma3 && is_norm_role(role))
    for (float& v : out) v = v - 1.0f;  // a GGUF's 1 + w
  return out;
}

Result<std::vector<uint16_t>> ModelFile::read_bf16(WeightRole role, int64_t layer, int64_t expert) const {
  VOSTI_ASSIGN_OR_RETURN(WeightView w, view(role, layer, expert));
  std::vector<uint16_t> out(static_cast<size_t>(w.num_elements()));
  if (w.type == WeightType::kBF16) {
    if (w.num_bytes != out.size() * sizeof(uint16_t))
      return invalid_argument("tensor " + w.name + ": " + std::to_string(w.num_bytes) + " bytes for " +
                              std::to_string(out.size()) + " bf16 values");
    std::memcpy(out.data(), w.data, w.num_bytes);
  } else {
    VOSTI_ASSIGN_OR_RETURN(std::vector<float> f, read_f32(role, layer, expert));
    for (size_t i = 0; i < f.size(); ++i) out[i] = f32_to_bf16(f[i]);
    return out;  // read_f32 unpermuted already
  }
  if (needs_row_unpermute(role)) {
    const int64_t rows = w.shape[0], cols = w.shape.size() == 2 ? w.shape[1] : 1;
    std::vector<uint16_t> hf(out.size());
    unpermute_qk_rows(out.data(), rows, cols, unpermute_heads(role), hf.data());
    out.swap(hf);
  }
  return out;
}

}  // namespace vosti
