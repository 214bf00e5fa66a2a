#include "model/model_config.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "io/gguf.h"
#include "model/model_config_parse.h"

namespace vosti {

std::string_view architecture_name(Architecture a) {
  switch (a) {
    case Architecture::kLlama:
      return "llama";
    case Architecture::kQwen2:
      return "qwen2";
    case Architecture::kQwen3:
      return "qwen3";
    case Architecture::kGemma3:
      return "gemma3";
    case Architecture::kQwen3Moe:
      return "qwen3_moe";
    case Architecture::kMixtral:
      return "mixtral";
  }
  return "?";
}

std::string_view mlp_activation_name(MlpActivation a) {
  switch (a) {
    case MlpActivation::kSilu:
      return "silu";
    case MlpActivation::kGeluTanh:
      return "gelu_pytorch_tanh";
  }
  return "?";
}

bool LayerSpec::same_rope(const LayerSpec& o) const {
  return rope_theta == o.rope_theta && rope_scaling.kind == o.rope_scaling.kind &&
         rope_scaling.factor == o.rope_scaling.factor &&
         rope_scaling.low_freq_factor == o.rope_scaling.low_freq_factor &&
         rope_scaling.high_freq_factor == o.rope_scaling.high_freq_factor &&
         rope_scaling.original_max_position_embeddings == o.rope_scaling.original_max_position_embeddings;
}

namespace config_parse {

Result<int64_t> json_int(const json& j, const char* key, const std::string& source) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return invalid_argument(source + ": config.json is missing \"" + key + "\"");
  if (!it->is_number_integer()) return invalid_argument(source + ": config.json \"" + key + "\" must be an integer");
  return it->get<int64_t>();
}

int64_t json_int_or(const json& j, const char* key, int64_t fallback) {
  auto it = j.find(key);
  return (it != j.end() && it->is_number_integer()) ? it->get<int64_t>() : fallback;
}

double json_double_or(const json& j, const char* key, double fallback) {
  auto it = j.find(key);
  return (it != j.end() && it->is_number()) ? it->get<double>() : fallback;
}

bool json_bool_or(const json& j, const char* key, bool fallback) {
  auto it = j.find(key);
  return (it != j.end() && it->is_boolean()) ? it->get<bool>() : fallback;
}

// One RoPE parameter dict ({"rope_type", "factor", ..., "rope_theta"}) into theta and scaling.
Status parse_rope_dict(const json& rs, const std::string& source, double& theta, RopeScaling& scaling) {
  theta = json_double_or(rs, "rope_theta", theta);
  std::string type = "default";
  for (const char* key : {"rope_type", "type"}) {
    auto it = rs.find(key);
    if (it != rs.end() && it->is_string()) type = it->get<std::string>();
  }
  if (type == "default") return Status();
  scaling.factor = json_double_or(rs, "factor", 1.0);
  if (type == "linear") {
    scaling.kind = RopeScaling::Kind::kLinear;
  } else if (type == "llama3") {
    scaling.kind = RopeScaling::Kind::kLlama3;
    scaling.low_freq_factor = json_double_or(rs, "low_freq_factor", 1.0);
    scaling.high_freq_factor = json_double_or(rs, "high_freq_factor", 4.0);
    scaling.original_max_position_embeddings = json_int_or(rs, "original_max_position_embeddings", 8192);
  } else {
    return unimplemented(source + ": rope scaling type \"" + type + "\" is not supported (supported: linear, llama3)");
  }
  return Status();
}

Status parse_rope_scaling(const json& j, const std::string& source, ModelConfig& c) {
  // transformers <= 4.x: "rope_scaling"; 5.x: "rope_parameters" (which may also carry rope_theta).
  const json* rs = nullptr;
  for (const char* key : {"rope_parameters", "rope_scaling"}) {
    auto it = j.find(key);
    if (it != j.end() && it->is_object()) rs = &*it;
  }
  if (!rs) return Status();
  return parse_rope_dict(*rs, source, c.rope_theta, c.rope_scaling);
}

void read_token_ids(const json& j, ModelConfig& c) {
  c.bos_token_id = json_int_or(j, "bos_token_id", c.bos_token_id);
  if (auto it = j.find("eos_token_id"); it != j.end() && (it->is_number_integer() || it->is_array())) {
    c.eos_token_ids.clear();
    if (it->is_number_integer()) c.eos_token_ids.push_back(it->get<int64_t>());
    if (it->is_array())
      for (const auto& e : *it)
        if (e.is_number_integer()) c.eos_token_ids.push_back(e.get<int64_t>());
  }
}

}  // namespace config_parse

using namespace config_parse;  // NOLINT(google-build-using-namespace): this file's own helpers

Result<ModelConfig> ModelConfig::from_hf_config(const json& j, const std::string& source) {
  if (!j.is_object()) return invalid_argument(source + ": config.json is not a JSON object");
  const std::string model_type = j.value("model_type", std::string());
  if (model_type == "gemma3_text" || model_type == "gemma3") return gemma3_from_hf_config(j, source);
  ModelConfig c;
  if (model_type == "llama" || model_type == "mistral" || model_type == "mixtral") {
    c.arch = model_type == "mixtral" ? Architecture::kMixtral : Architecture::kLlama;
    c.qkv_bias = json_bool_or(j, "attention_bias", false);
    // Only Mistral's and Mixtral's configs mean sliding_window (Llama configs carry no such field).
    if (auto sw = j.find("sliding_window"); model_type != "llama" && sw != j.end() && !sw->is_null()) {
      if (!sw->is_number_integer() || sw->get<int64_t>() <= 0)
        return invalid_argument(source + ": sliding_window must be a positive integer or null, got " + sw->dump());
      c.sliding_window = sw->get<int64_t>();
    }
  } else if (model_type == "qwen2") {
    c.arch = Architecture::kQwen2;
    c.qkv_bias = true;
    if (json_bool_or(j, "use_sliding_window", false))
      return unimplemented(source + ": Qwen2 with use_sliding_window is not supported");
  } else if (model_type == "qwen3" || model_type == "qwen3_moe") {
    c.arch = model_type == "qwen3" ? Architecture::kQwen3 : Architecture::kQwen3Moe;
    c.qk_norm = true;
    c.qkv_bias = json_bool_or(j, "attention_bias", false);
    if (json_bool_or(j, "use_sliding_window", false))
      return unimplemented(source + ": Qwen3 with use_sliding_window is not supported");
  } else {
    return unimplemented(source + ": model_type \"" + model_type +
                         "\" is not supported (supported: llama, mistral, mixtral, qwen2, qwen3, qwen3_moe, "
                         "gemma3_text, gemma3)");
  }
  VOSTI_ASSIGN_OR_RETURN(c.vocab_size, json_int(j, "vocab_size", source));
  VOSTI_ASSIGN_OR_RETURN(c.hidden_size, json_int(j, "hidden_size", source));
  VOSTI_ASSIGN_OR_RETURN(c.intermediate_size, json_int(j, "intermediate_size", source));
  VOSTI_ASSIGN_OR_RETURN(c.num_layers, json_int(j, "num_hidden_layers", source));
  VOSTI_ASSIGN_OR_RETURN(c.num_heads, json_int(j, "num_attention_heads", source));
  c.num_kv_heads = json_int_or(j, "num_key_value_heads", c.num_heads);
  c.head_dim = json_int_or(j, "head_dim", c.num_heads > 0 ? c.hidden_size / c.num_heads : 0);
  c.max_position_embeddings = json_int_or(j, "max_position_embeddings", 2048);
  c.rms_norm_eps = json_double_or(j, "rms_norm_eps", 1e-6);
  c.rope_theta = json_double_or(j, "rope_theta", 10000.0);
  VOSTI_RETURN_IF_ERROR(parse_rope_scaling(j, source, c));
  c.tie_word_embeddings = json_bool_or(j, "tie_word_embeddings", false);
  read_token_ids(j, c);
  c.rope_layout = RopeLayout::kNeox;
  c.fill_uniform_layers();
  VOSTI_RETURN_IF_ERROR(moe_from_hf_config(j, source, c));
  VOSTI_RETURN_IF_ERROR(c.validate().with_context(source));
  return c;
}

Result<ModelConfig> ModelConfig::from_gguf(const GgufFile& g) {
  const std::string& source = g.path();
  VOSTI_ASSIGN_OR_RETURN(std::string arch, g.get_string("general.architecture"));
  ModelConfig c;
  if (arch == "llama") {
    c.arch = Architecture::kLlama;
  } else if (arch == "qwen2") {
    c.arch = Architecture::kQwen2;
    c.qkv_bias = true;
  } else if (arch == "qwen3" || arch == "qwen3moe") {
    c.arch = arch == "qwen3" ? Architecture::kQwen3 : Architecture::kQwen3Moe;
    c.qk_norm = true;
  } else if (arch == "gemma3") {
    return gemma3_from_gguf(g);
  } else {
    return unimplemented(source + ": GGUF architecture \"" + arch +
                         "\" is not supported (supported: llama, qwen2, qwen3, qwen3moe, gemma3)");
  }
  if (auto name = g.get_string("general.name"); name.ok()) c.name = *name;
  auto key = [&](const char* suffix) { return arch + "." + suffix; };
  VOSTI_ASSIGN_OR_RETURN(c.hidden_size, g.get_int(key("embedding_length")));
  if (auto ff = g.get_int(key("feed_forward_length")); ff.ok()) {
    c.intermediate_size = *ff;
  } else if (auto expert_ff = g.get_int(key("expert_feed_forward_length")); expert_ff.ok()) {
    c.intermediate_size = *expert_ff;  // a MoE model without dense layers (qwen3moe)
  } else {
    return ff.status();
  }
  VOSTI_ASSIGN_OR_RETURN(c.num_layers, g.get_int(key("block_count")));
  VOSTI_ASSIGN_OR_RETURN(c.num_heads, g.get_int(key("attention.head_count")));
  auto kv = g.get_int(key("attention.head_count_kv"));
  c.num_kv_heads = kv.ok() ? *kv : c.num_heads;
  auto key_length = g.get_int(key("attention.key_length"));
  c.head_dim = key_length.ok() ? *key_length : (c.num_heads > 0 ? c.hidden_size / c.num_heads : 0);
  auto ctx = g.get_int(key("context_length"));
  c.max_position_embeddings = ctx.ok() ? *ctx : 2048;
  auto eps = g.get_double(key("attention.layer_norm_rms_epsilon"));
  c.rms_norm_eps = eps.ok() ? *eps : 1e-5;
  if (auto sw = g.get_int(key("attention.sliding_window")); sw.ok()) {
    if (arch != "llama")  // Qwen's windows apply to some layers only: not supported
      return unimplemented(source + ": " + key("attention.sliding_window") + " is not supported for " + arch);
    if (*sw < 0) return invalid_argument(source + ": " + key("attention.sliding_window") + " is negative");
    c.sliding_window = *sw;
  }
  auto theta = g.get_double(key("rope.freq_base"));
  c.rope_theta = theta.ok() ? *theta : 10000.0;
  if (auto type = g.get_string(key("rope.scaling.type")); type.ok() && *type != "none") {
    if (*type != "linear")
      return unimplemented(source + ": GGUF rope scaling \"" + *type + "\" is not supported (supported: linear)");
    c.rope_scaling.kind = RopeScaling::Kind::kLinear;
    auto factor = g.get_double(key("rope.scaling.factor"));
    c.rope_scaling.factor = factor.ok() ? *factor : 1.0;
  }
  if (auto vocab = g.get_int(key("vocab_size")); vocab.ok()) {
    c.vocab_size = *vocab;
  } else {
    auto tokens = g.find("tokenizer.ggml.tokens");
    if (!tokens || tokens->type != GgufType::kArray)
      return invalid_argument(source + ": neither " + key("vocab_size") + " nor tokenizer.ggml.tokens is present");
    c.vocab_size = static_cast<int64_t>(std::get<GgufArray>(tokens->value).items.size());
  }
  bool has_output = false;
  for (const auto& t : g.tensors()) has_output |= (t.name == "output.weight");
  c.tie_word_embeddings = !has_output;
  if (auto bos = g.get_int("tokenizer.ggml.bos_token_id"); bos.ok()) c.bos_token_id = *bos;
  if (auto eos = g.get_int("tokenizer.ggml.eos_token_id"); eos.ok()) c.eos_token_ids.push_back(*eos);
  if (auto eot = g.get_int("tokenizer.ggml.eot_token_id");
      eot.ok() && (c.eos_token_ids.empty() || *eot != c.eos_token_ids[0]))
    c.eos_token_ids.push_back(*eot);
  // llama.cpp's converter permutes Llama's q/k rows for GPT-J-style rotary; the loader
  // undoes that permutation, so every family runs NeoX rotary on HF-ordered weights.
  c.rope_layout = RopeLayout::kNeox;
  c.fill_uniform_layers();
  VOSTI_RETURN_IF_ERROR(moe_from_gguf(g, arch, c));
  VOSTI_RETURN_IF_ERROR(c.validate().with_context(source));
  return c;
}

Status ModelConfig::validate() const {
  auto positive = [](int64_t v, const char* name) -> Status {
    if (v <= 0) return invalid_argument(std::string(name) + " must be positive, got " + std::to_string(v));
    if (v > (int64_t{1} << 31)) return invalid_argument(std::string(name) + " is absurdly large: " + std::to_string(v));
    return Status();
  };
  VOSTI_RETURN_IF_ERROR(positive(vocab_size, "vocab_size"));
  VOSTI_RETURN_IF_ERROR(positive(hidden_size, "hidden_size"));
  VOSTI_RETURN_IF_ERROR(positive(intermediate_size, "intermediate_size"));
  VOSTI_RETURN_IF_ERROR(positive(num_layers, "num_layers"));
  VOSTI_RETURN_IF_ERROR(positive(num_heads, "num_heads"));
  VOSTI_RETURN_IF_ERROR(positive(num_kv_heads, "num_kv_heads"));
  VOSTI_RETURN_IF_ERROR(positive(head_dim, "head_dim"));
  VOSTI_RETURN_IF_ERROR(positive(max_position_embeddings, "max_position_embeddings"));
  if (num_heads % num_kv_heads != 0)
    return invalid_argument("num_heads (" + std::to_string(num_heads) + ") is not a multiple of num_kv_heads (" +
                            std::to_string(num_kv_heads) + ")");
  if (head_dim % 2 != 0)
    return invalid_argument("head_dim must be even for rotary embeddings, got " + std::to_string(head_dim));
  if (sliding_window < 0 || sliding_window >= (int64_t{1} << 31))
    return invalid_argument("sliding_window must be in 0..2^31 - 1 (0: none), got " + std::to_string(sliding_window));
  if (!(rms_norm_eps > 0) || !std::isfinite(rms_norm_eps)) return invalid_argument("rms_norm_eps must be positive");
  if (!(rope_theta > 0) || !std::isfinite(rope_theta)) return invalid_argument("rope_theta must be positive");
  if (rope_scaling.kind != RopeScaling::Kind::kNone && !(rope_scaling.factor > 0))
    return invalid_argument("rope scaling factor must be positive");
  if (static_cast<int64_t>(layers.size()) != num_layers)
    return invalid_argument("the config describes " + std::to_string(layers.size()) + " layers, num_layers is " +
                            std::to_string(num_layers));
  for (size_t i = 0; i < layers.size(); ++i) {
    const LayerSpec& l = layers[i];
    const std::string name = "layer " + std::to_string(i) + ": ";
    if (l.sliding_window < 0 || l.sliding_window >= (int64_t{1} << 31))
      return invalid_argument(name + "sliding_window must be in 0..2^31 - 1 (0: none), got " +
                              std::to_string(l.sliding_window));
    if (!(l.rope_theta > 0) || !std::isfinite(l.rope_theta))
      return invalid_argument(name + "rope_theta must be positive");
    if (l.rope_scaling.kind != RopeScaling::Kind::kNone && !(l.rope_scaling.factor > 0))
      return invalid_argument(name + "rope scaling factor must be positive");
    if (l.moe.enabled()) {
      if (l.moe.top_k <= 0 || l.moe.top_k > l.moe.num_experts)
        return invalid_argument(name + "num_experts_per_tok must be in 1.." + std::to_string(l.moe.num_experts) +
                                " (the expert count), got " + std::to_string(l.moe.top_k));
      if (l.moe.intermediate_size <= 0 || l.moe.intermediate_size > (int64_t{1} << 31))
        return invalid_argument(name + "the expert FFN size must be positive, got " +
                                std::to_string(l.moe.intermediate_size));
      if (l.moe.num_experts > 65536)
        return invalid_argument(name + "num_experts is absurdly large: " + std::to_string(l.moe.num_experts));
      if (!(l.moe == moe()))
        return invalid_argument(name + "its mixture of experts differs from the first MoE layer's");
    } else if (l.moe.num_experts < 0) {
      return invalid_argument(name + "num_experts must not be negative");
    }
  }
  if (!(embed_scale > 0) || !std::isfinite(embed_scale)) return invalid_argument("embed_scale must be positive");
  if (!(attention_scale > 0) || !std::isfinite(attention_scale))
    return invalid_argument("the attention scale must be positive");
  if (final_logit_softcap < 0 || !std::isfinite(final_logit_softcap))
    return invalid_argument("final_logit_softcapping must be positive or absent");
  return Status();
}

void ModelConfig::fill_uniform_layers() {
  LayerSpec l;
  l.sliding_window = sliding_window;
  l.rope_theta = rope_theta;
  l.rope_scaling = rope_scaling;
  layers.assign(static_cast<size_t>(std::max<int64_t>(num_layers, 0)), l);
  // 1 / sqrt(head_dim) in f32 arithmetic: the scale every family but Gemma has always used.
  if (attention_scale == 0.0f && head_dim > 0) attention_scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
}

MoeSpec ModelConfig::moe() const {
  for (const LayerSpec& l : layers)
    if (l.moe.enabled()) return l.moe;
  return MoeSpec{};
}

bool ModelConfig::layers_uniform() const {
  if (embed_scale != 1.0f || norm_weight_offset != 0.0f || final_logit_softcap != 0.0 ||
      attention_scale != 1.0f / std::sqrt(static_cast<float>(head_dim)))
    return false;
  LayerSpec flat;
  flat.sliding_window = sliding_window;
  flat.rope_theta = rope_theta;
  flat.rope_scaling = rope_scaling;
  for (const LayerSpec& l : layers) {
    if (l.sliding_window != flat.sliding_window || !l.same_rope(flat) || l.activation != MlpActivation::kSilu ||
        l.post_attn_norm || l.post_ffn_norm || l.moe.enabled())
      return false;
  }
  return true;
}

KvLayerGroups ModelConfig::kv_layer_groups() const {
  KvLayerGroups g;
  for (const LayerSpec& l : layers) {
    if (l.sliding_window > 0) {
      ++g.num_window_layers;
      g.window = std::max(g.window, static_cast<int32_t>(l.sliding_window));
    } else {
      ++g.num_full_layers;
    }
  }
  return g;
}

std::vector<float> ModelConfig::rope_inv_freq() const {
  LayerSpec flat;
  flat.rope_theta = rope_theta;
  flat.rope_scaling = rope_scaling;
  return rope_inv_freq(flat);
}

std::vector<float> ModelConfig::rope_inv_freq(const LayerSpec& layer) const {
  // As transformers computes it, in f32: 1 / base^(arange(0, dim, 2) / dim).
  const double rope_theta = layer.rope_theta;
  const RopeScaling& rope_scaling = layer.rope_scaling;
  const int64_t half = head_dim / 2;
  std::vector<float> inv(static_cast<size_t>(half));
  for (int64_t i = 0; i < half; ++i) {
    const float exponent = static_cast<float>(2 * i) / static_cast<float>(head_dim);
    inv[static_cast<size_t>(i)] = 1.0f / std::pow(static_cast<float>(rope_theta), exponent);
  }
  if (rope_scaling.kind == RopeScaling::Kind::kLinear) {
    for (auto& f : inv) f = static_cast<float>(f / rope_scaling.factor);
  } else if (rope_scaling.kind == RopeScaling::Kind::kLlama3) {
    const double factor = rope_scaling.factor;
    const double lo = rope_scaling.low_freq_factor, hi = rope_scaling.high_freq_factor;
    const double old_ctx = static_cast<double>(rope_scaling.original_max_position_embeddings);
    const double low_freq_wavelen = old_ctx / lo, high_freq_wavelen = old_ctx / hi;
    for (auto& f : inv) {
      const double wavelen = 2.0 * std::numbers::pi / f;
      double scaled = wavelen > low_freq_wavelen ? f / factor : f;
      if (!(wavelen < high_freq_wavelen) && !(wavelen > low_freq_wavelen)) {
        const double smooth = (old_ctx / wavelen - lo) / (hi - lo);
        scaled = (1 - smooth) * scaled / factor + smooth * scaled;
      }
      f = static_cast<float>(scaled);
    }
  }
  return inv;
}

}  // namespace vosti
