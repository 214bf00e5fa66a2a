// ModelFile's tensor list, name lookup and weight updates (with_replaced): see model_file.h.
#include <cstring>

#include "io/dequant.h"
#include "model/model_file.h"

namespace vosti {

namespace {

constexpr WeightRole kLayerRoles[] = {
    WeightRole::kAttnNorm,
    WeightRole::kQ,
    WeightRole::kK,
    WeightRole::kV,
    WeightRole::kQBias,
    WeightRole::kKBias,
    WeightRole::kVBias,
    WeightRole::kQNorm,
    WeightRole::kKNorm,
    WeightRole::kO,
    WeightRole::kPostAttnNorm,
    WeightRole::kFfnNorm,
    WeightRole::kGate,
    WeightRole::kUp,
    WeightRole::kDown,
    WeightRole::kPostFfnNorm,
    WeightRole::kRouter,
    WeightRole::kExpertGate,
    WeightRole::kExpertUp,
    WeightRole::kExpertDown,
};

bool role_present(const ModelConfig& c, WeightRole role, int64_t layer) {
  const LayerSpec& spec = c.layers[static_cast<size_t>(layer)];
  switch (role) {
    case WeightRole::kPostAttnNorm:
      return spec.post_attn_norm;
    case WeightRole::kPostFfnNorm:
      return spec.post_ffn_norm;
    case WeightRole::kQBias:
    case WeightRole::kKBias:
    case WeightRole::kVBias:
      return c.qkv_bias;
    case WeightRole::kQNorm:
    case WeightRole::kKNorm:
      return c.qk_norm;
    case WeightRole::kGate:
    case WeightRole::kUp:
    case WeightRole::kDown:
      return !spec.moe.enabled();
    case WeightRole::kRouter:
    case WeightRole::kExpertGate:
    case WeightRole::kExpertUp:
    case WeightRole::kExpertDown:
      return spec.moe.enabled();
    default:
      return true;
  }
}

size_t element_bytes(WeightType type) {
  switch (type) {
    case WeightType::kF32:
      return 4;
    case WeightType::kF16:
    case WeightType::kBF16:
      return 2;
    default:
      return 0;
  }
}

std::string shape_text(const std::vector<int64_t>& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

// A replacement's values as f32 (f32, f16 or bf16, widened exactly).
Status decode_replacement(const ReplacementTensor& t, float* out, int64_t count) {
  return dequantize(t.type, t.data, t.num_bytes, out, count).with_context(t.name);
}

// Tensors that checkpoints carry but that are no weights of the model (vLLM skips them too).
bool is_skipped_buffer(std::string_view name) {
  return name.find("rotary_emb.inv_freq") != std::string_view::npos ||
         name.find("rotary_emb.cos_cached") != std::string_view::npos ||
         name.find("rotary_emb.sin_cached") != std::string_view::npos;
}

// HF row order -> llama.cpp's interleaved q/k order (the inverse of unpermute_qk_rows): within
// each head of hd rows, HF row j * hd/2 + i -> stored row 2i + j. Rows of row_bytes bytes.
void permute_qk_rows(const uint8_t* src, int64_t rows, size_t row_bytes, int64_t heads, uint8_t* dst) {
  const int64_t hd = rows / heads, half = hd / 2;
  for (int64_t h = 0; h < heads; ++h)
    for (int64_t i = 0; i < half; ++i)
      for (int64_t j = 0; j < 2; ++j)
        std::memcpy(dst + static_cast<size_t>(h * hd + 2 * i + j) * row_bytes,
                    src + static_cast<size_t>(h * hd + j * half + i) * row_bytes, row_bytes);
}

}  // namespace

std::vector<TensorSlot> ModelFile::tensor_slots() const {
  std::vector<TensorSlot> slots;
  slots.push_back({WeightRole::kEmbed, -1});
  for (int64_t layer = 0; layer < config_.num_layers; ++layer) {
    for (WeightRole role : kLayerRoles) {
      if (!role_present(config_, role, layer)) continue;
      if (!is_expert_role(role)) {
        slots.push_back({role, layer});
        continue;
      }
      const int64_t num_experts = config_.layers[static_cast<size_t>(layer)].moe.num_experts;
      for (int64_t e = 0; e < num_experts; ++e) slots.push_back({role, layer, e});
    }
  }
  slots.push_back({WeightRole::kFinalNorm, -1});
  if (has(WeightRole::kLmHead)) slots.push_back({WeightRole::kLmHead, -1});
  return slots;
}

Result<TensorSlot> ModelFile::find_tensor(std::string_view name) const {
  for (const TensorSlot& s : tensor_slots())
    if (name == tensor_name(s.role, s.layer, s.expert) ||
        name == hf_tensor_name(config_.arch, s.role, s.layer, s.expert))
      return s;
  return not_found("the model " + path_ + " has no tensor named '" + std::string(name) +
                   "' (names are Hugging Face's, e.g. model.layers.0.self_attn.q_proj.weight, or the file's own)");
}

bool ModelFile::is_replaced(WeightRole role, int64_t layer, int64_t expert) const {
  return replaced_.count(tensor_name(role, layer, expert)) != 0;
}

Result<std::shared_ptr<const ModelFile>> ModelFile::with_replaced(std::shared_ptr<const ModelFile> base,
                                                                  const std::vector<ReplacementTensor>& tensors) {
  if (!base) return invalid_argument("with_replaced needs a base model file");
  std::shared_ptr<ModelFile> f(new ModelFile());
  f->path_ = base->path_;
  f->config_ = base->config_;
  f->gguf_ = base->gguf_;
  f->st_ = base->st_;
  f->replaced_ = base->replaced_;
  std::map<std::string, bool, std::less<>> seen;
  const bool tied = base->config_.tie_word_embeddings && !base->has(WeightRole::kLmHead);
  for (const ReplacementTensor& t : tensors) {
    if (is_skipped_buffer(t.name)) continue;
    if (!seen.emplace(t.name, true).second)
      return invalid_argument("tensor '" + t.name + "' is given twice in one weight update");
    if (tied && (t.name == hf_tensor_name(base->config_.arch, WeightRole::kLmHead, -1) ||
                 t.name == base->tensor_name(WeightRole::kLmHead, -1)))
      continue;  // tied to the embedding: updating model.embed_tokens.weight updates it
    VOSTI_ASSIGN_OR_RETURN(TensorSlot slot, base->find_tensor(t.name));
    const std::vector<int64_t> expected = base->expected_shape(slot.role);
    if (t.shape != expected)
      return invalid_argument("tensor '" + t.name + "' has shape " + shape_text(t.shape) + ", the model's is " +
                              shape_text(expected));
    const size_t elem = element_bytes(t.type);
    if (elem == 0) return invalid_argument("tensor '" + t.name + "': weights must be float32, float16 or bfloat16");
    int64_t count = 1;
    for (int64_t d : t.shape) count *= d;
    if (t.num_bytes != static_cast<size_t>(count) * elem || (count > 0 && t.data == nullptr))
      return invalid_argument("tensor '" + t.name + "': " + std::to_string(t.num_bytes) + " bytes for " +
                              std::to_string(count) + " values of " + std::to_string(elem) + " bytes");
    const std::string stored_name = base->tensor_name(slot.role, slot.layer, slot.expert);
    WeightView w;
    w.name = stored_name;
    w.type = t.type;
    w.shape = t.shape;
    w.num_bytes = t.num_bytes;
    // Gemma's norms given as w (HF) into a GGUF, which stores 1 + w: f32 values 1 + w.
    if (base->gguf_ && base->config_.arch == Architecture::kGemma3 && is_norm_role(slot.role)) {
      std::vector<float> values(static_cast<size_t>(count));
      VOSTI_RETURN_IF_ERROR(decode_replacement(t, values.data(), count));
      auto buf = std::make_shared<std::vector<uint8_t>>(values.size() * sizeof(float));
      auto* out = reinterpret_cast<float*>(buf->data());
      for (size_t i = 0; i < values.size(); ++i) out[i] = 1.0f + values[i];
      w.type = WeightType::kF32;
      w.num_bytes = buf->size();
      w.data = buf->data();
      w.owner = buf;
      f->replaced_[stored_name] = std::move(w);
      continue;
    }
    const bool reorder = base->needs_row_unpermute(slot.role);
    if (t.owner && !reorder) {
      w.data = t.data;
      w.owner = t.owner;
    } else {
      auto buf = std::make_shared<std::vector<uint8_t>>(t.num_bytes);
      if (reorder) {
        const size_t row_bytes = t.num_bytes / static_cast<size_t>(t.shape[0]);
        permute_qk_rows(t.data, t.shape[0], row_bytes, base->unpermute_heads(slot.role), buf->data());
      } else if (t.num_bytes > 0) {
        std::memcpy(buf->data(), t.data, t.num_bytes);
      }
      w.data = buf->data();
      w.owner = buf;
    }
    f->replaced_[stored_name] = std::move(w);
  }
  return std::shared_ptr<const ModelFile>(std::move(f));
}

}  // namespace vosti
