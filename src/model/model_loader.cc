// Model::load: GGUF files and HF safetensors directories -> ModelConfig + f32 weights.
#include <cstring>
#include <filesystem>
#include <functional>

#include "io/dequant.h"
#include "io/gguf.h"
#include "io/safetensors.h"
#include "model/model.h"

namespace vosti {

namespace {

// Finds a tensor by its name in the source format (GGUF or HF), or NOT_FOUND.
using TensorLookup = std::function<Result<WeightView>(const std::string&)>;

// Tensor names of one format: f(layer) -> name; layer < 0 for global tensors.
struct NameScheme {
  std::string embed, final_norm, lm_head;
  std::function<std::string(int64_t, const char*)> layer;  // (index, role) -> name
};

const char* const kRoles[] = {"attn_norm", "q",      "k", "v",        "q_bias", "k_bias", "v_bias",
                              "q_norm",    "k_norm", "o", "ffn_norm", "gate",   "up",     "down"};

NameScheme gguf_names() {
  NameScheme s{"token_embd.weight", "output_norm.weight", "output.weight", nullptr};
  s.layer = [](int64_t i, const char* role) {
    static const std::map<std::string, std::string> kMap = {{"attn_norm", "attn_norm.weight"},
                                                            {"q", "attn_q.weight"},
                                                            {"k", "attn_k.weight"},
                                                            {"v", "attn_v.weight"},
                                                            {"q_bias", "attn_q.bias"},
                                                            {"k_bias", "attn_k.bias"},
                                                            {"v_bias", "attn_v.bias"},
                                                            {"q_norm", "attn_q_norm.weight"},
                                                            {"k_norm", "attn_k_norm.weight"},
                                                            {"o", "attn_output.weight"},
                                                            {"ffn_norm", "ffn_norm.weight"},
                                                            {"gate", "ffn_gate.weight"},
                                                            {"up", "ffn_up.weight"},
                                                            {"down", "ffn_down.weight"}};
    return "blk." + std::to_string(i) + "." + kMap.at(role);
  };
  return s;
}

NameScheme hf_names() {
  NameScheme s{"model.embed_tokens.weight", "model.norm.weight", "lm_head.weight", nullptr};
  s.layer = [](int64_t i, const char* role) {
    static const std::map<std::string, std::string> kMap = {{"attn_norm", "input_layernorm.weight"},
                                                            {"q", "self_attn.q_proj.weight"},
                                                            {"k", "self_attn.k_proj.weight"},
                                                            {"v", "self_attn.v_proj.weight"},
                                                            {"q_bias", "self_attn.q_proj.bias"},
                                                            {"k_bias", "self_attn.k_proj.bias"},
                                                            {"v_bias", "self_attn.v_proj.bias"},
                                                            {"q_norm", "self_attn.q_norm.weight"},
                                                            {"k_norm", "self_attn.k_norm.weight"},
                                                            {"o", "self_attn.o_proj.weight"},
                                                            {"ffn_norm", "post_attention_layernorm.weight"},
                                                            {"gate", "mlp.gate_proj.weight"},
                                                            {"up", "mlp.up_proj.weight"},
                                                            {"down", "mlp.down_proj.weight"}};
    return "model.layers." + std::to_string(i) + "." + kMap.at(role);
  };
  return s;
}

class WeightBuilder {
 public:
  WeightBuilder(TensorLookup lookup, const ModelConfig& config, bool unpermute_qk)
      : lookup_(std::move(lookup)), config_(config), unpermute_qk_(unpermute_qk) {}

  int64_t num_copied_bytes() const { return copied_; }

  // The tensor as f32, checked against `shape`; mapped when stored as aligned f32.
  Result<FloatTensor> get(const std::string& name, const std::vector<int64_t>& shape) {
    VOSTI_ASSIGN_OR_RETURN(WeightView w, lookup_(name));
    if (w.shape != shape)
      return invalid_argument("tensor " + name + " has shape " + shape_str(w.shape) + ", the config implies " +
                              shape_str(shape));
    FloatTensor t;
    t.shape = shape;
    if (w.type == WeightType::kF32 && reinterpret_cast<uintptr_t>(w.data) % alignof(float) == 0) {
      t.data = reinterpret_cast<const float*>(w.data);
      t.owner = w.owner;
      return t;
    }
    auto buf = std::make_shared<std::vector<float>>(static_cast<size_t>(w.num_elements()));
    VOSTI_RETURN_IF_ERROR(dequantize(w.type, w.data, w.num_bytes, buf->data(), w.num_elements()).with_context(name));
    copied_ += static_cast<int64_t>(buf->size() * sizeof(float));
    t.data = buf->data();
    t.owner = buf;
    return t;
  }

  // Rows of several tensors stacked into one [sum rows, cols] tensor (e.g. q, k, v).
  Result<FloatTensor> stack(const std::vector<std::pair<std::string, std::vector<int64_t>>>& parts,
                            const std::vector<int64_t>& heads_to_unpermute) {
    int64_t total = 0;
    for (const auto& p : parts) {
      int64_t n = 1;
      for (int64_t d : p.second) n *= d;
      total += n;
    }
    auto buf = std::make_shared<std::vector<float>>(static_cast<size_t>(total));
    const int64_t copied_before = copied_;  // the parts are temporaries: count only the stacked copy
    int64_t offset = 0, rows = 0, cols = 1;
    for (size_t i = 0; i < parts.size(); ++i) {
      VOSTI_ASSIGN_OR_RETURN(FloatTensor part, get(parts[i].first, parts[i].second));
      const int64_t n = part.num_elements();
      cols = part.shape.size() == 2 ? part.shape[1] : 1;
      const int64_t part_rows = part.shape[0];
      float* dst = buf->data() + offset;
      const int64_t heads = i < heads_to_unpermute.size() ? heads_to_unpermute[i] : 0;
      if (unpermute_qk_ && heads > 0) {
        unpermute_rows(part.data, part_rows, cols, heads, dst);
      } else {
        std::memcpy(dst, part.data, static_cast<size_t>(n) * sizeof(float));
      }
      offset += n;
      rows += part_rows;
    }
    copied_ = copied_before + static_cast<int64_t>(buf->size() * sizeof(float));
    FloatTensor t;
    t.shape = parts[0].second.size() == 2 ? std::vector<int64_t>{rows, cols} : std::vector<int64_t>{rows};
    t.data = buf->data();
    t.owner = buf;
    return t;
  }

 private:
  // llama.cpp stores Llama q/k rows of each head as (i, j) -> row 2i + j; HF order is j * hd/2 + i.
  static void unpermute_rows(const float* src, int64_t rows, int64_t cols, int64_t heads, float* dst) {
    const int64_t hd = rows / heads, half = hd / 2;
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t i = 0; i < half; ++i)
        for (int64_t j = 0; j < 2; ++j)
          std::memcpy(dst + (h * hd + j * half + i) * cols, src + (h * hd + 2 * i + j) * cols,
                      static_cast<size_t>(cols) * sizeof(float));
  }

  static std::string shape_str(const std::vector<int64_t>& s) {
    std::string out = "[";
    for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
    return out + "]";
  }

  TensorLookup lookup_;
  const ModelConfig& config_;
  bool unpermute_qk_;
  int64_t copied_ = 0;
};

Result<ModelWeights> build_weights(WeightBuilder& b, const NameScheme& names, const ModelConfig& c,
                                   const TensorLookup& lookup, const LoadOptions& options) {
  const int64_t H = c.hidden_size, hd = c.head_dim, nh = c.num_heads, nkv = c.num_kv_heads, I = c.intermediate_size;
  ModelWeights w;
  VOSTI_ASSIGN_OR_RETURN(w.embed, b.get(names.embed, {c.vocab_size, H}));
  VOSTI_ASSIGN_OR_RETURN(w.final_norm, b.get(names.final_norm, {H}));
  if (c.tie_word_embeddings && !lookup(names.lm_head).ok()) {
    w.lm_head = w.embed;
  } else {
    VOSTI_ASSIGN_OR_RETURN(w.lm_head, b.get(names.lm_head, {c.vocab_size, H}));
  }
  for (int64_t i = 0; i < c.num_layers; ++i) {
    auto n = [&](const char* role) { return names.layer(i, role); };
    LayerWeights l;
    VOSTI_ASSIGN_OR_RETURN(l.attn_norm, b.get(n("attn_norm"), {H}));
    VOSTI_ASSIGN_OR_RETURN(
        l.wqkv, b.stack({{n("q"), {nh * hd, H}}, {n("k"), {nkv * hd, H}}, {n("v"), {nkv * hd, H}}}, {nh, nkv}));
    if (c.qkv_bias) {
      // Bias vectors are [rows]; unpermuting them treats each as a [rows, 1] matrix.
      VOSTI_ASSIGN_OR_RETURN(
          l.bqkv, b.stack({{n("q_bias"), {nh * hd}}, {n("k_bias"), {nkv * hd}}, {n("v_bias"), {nkv * hd}}}, {nh, nkv}));
    }
    if (c.qk_norm) {
      VOSTI_ASSIGN_OR_RETURN(l.q_norm, b.get(n("q_norm"), {hd}));
      VOSTI_ASSIGN_OR_RETURN(l.k_norm, b.get(n("k_norm"), {hd}));
    }
    VOSTI_ASSIGN_OR_RETURN(l.wo, b.get(n("o"), {H, nh * hd}));
    VOSTI_ASSIGN_OR_RETURN(l.ffn_norm, b.get(n("ffn_norm"), {H}));
    VOSTI_ASSIGN_OR_RETURN(l.w_gate_up, b.stack({{n("gate"), {I, H}}, {n("up"), {I, H}}}, {}));
    VOSTI_ASSIGN_OR_RETURN(l.w_down, b.get(n("down"), {H, I}));
    w.layers.push_back(std::move(l));
    if (options.on_progress) options.on_progress(i + 1, c.num_layers);
  }
  return w;
}

Result<std::shared_ptr<const Model>> load_gguf(const std::string& path, const LoadOptions& options) {
  VOSTI_ASSIGN_OR_RETURN(GgufFile gguf, GgufFile::open(path));
  VOSTI_ASSIGN_OR_RETURN(ModelConfig config, ModelConfig::from_gguf(gguf));
  if (config.name.empty()) config.name = std::filesystem::path(path).stem().string();
  TensorLookup lookup = [&gguf](const std::string& name) { return gguf.tensor(name); };
  // Only Llama GGUFs carry llama.cpp's q/k row permutation.
  WeightBuilder builder(lookup, config, config.arch == Architecture::kLlama);
  auto weights = build_weights(builder, gguf_names(), config, lookup, options);
  if (!weights.ok()) return weights.status().with_context(path);
  return std::shared_ptr<const Model>(
      std::make_shared<Model>(path, config, std::move(weights).value(), builder.num_copied_bytes()));
}

Result<std::shared_ptr<const Model>> load_safetensors(const std::string& dir, const LoadOptions& options) {
  VOSTI_ASSIGN_OR_RETURN(SafetensorsModel st, SafetensorsModel::open(dir));
  VOSTI_ASSIGN_OR_RETURN(ModelConfig config, ModelConfig::from_hf_config(st.config(), dir + "/config.json"));
  if (config.name.empty()) config.name = std::filesystem::path(dir).filename().string();
  TensorLookup lookup = [&st](const std::string& name) { return st.tensor(name); };
  WeightBuilder builder(lookup, config, false);
  auto weights = build_weights(builder, hf_names(), config, lookup, options);
  if (!weights.ok()) return weights.status().with_context(dir);
  return std::shared_ptr<const Model>(
      std::make_shared<Model>(dir, config, std::move(weights).value(), builder.num_copied_bytes()));
}

}  // namespace

Result<std::shared_ptr<const Model>> Model::load(const std::string& path, const LoadOptions& options) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) return load_safetensors(path, options);
  if (!std::filesystem::exists(path, ec))
    return not_found(path + ": no such model file or directory (give a .gguf file or a directory with config.json)");
  return load_gguf(path, options);
}

}  // namespace vosti
