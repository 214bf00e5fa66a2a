// Gemma 3's config mapping: config.json (transformers' Gemma3TextConfig, its defaults where a
// field is absent, as transformers fills them) or llama.cpp's GGUF metadata -> ModelConfig with
// one LayerSpec per layer. Every detail follows transformers' modeling_gemma3.py (5.x):
// - layer i is "sliding_attention" or "full_attention": config.layer_types, else
//   sliding_window_pattern P (default 6): layer i is global iff (i + 1) % P == 0;
// - sliding layers attend over a window of sliding_window positions (mask q - k < W) and rotate
//   with rope_local_base_freq (default 10,000), no scaling; global layers attend over 0..p and
//   rotate with rope_theta (default 1e6) and rope_scaling (linear on 4B..27B); transformers 5's
//   rope_parameters {"sliding_attention": {...}, "full_attention": {...}} says the same;
// - scores scaled by query_pre_attn_scalar ** -0.5; q and k RMS-normed per head; GeGLU with
//   gelu_pytorch_tanh; norms (1 + w); post-attention and post-MLP norms; embeddings times
//   sqrt(hidden_size); tied lm_head; optional final logit soft-capping.
#include <algorithm>
#include <cmath>

#include "io/gguf.h"
#include "model/model_config_parse.h"

namespace vosti {

using namespace config_parse;  // NOLINT(google-build-using-namespace): the model library's own helpers

namespace {

// The layer of each kind, before the windows and rotary are set per layer.
LayerSpec gemma_layer() {
  LayerSpec l;
  l.activation = MlpActivation::kGeluTanh;
  l.post_attn_norm = true;
  l.post_ffn_norm = true;
  return l;
}

// Fills c.layers from which layers slide, the window and each kind's rotary; the flat fields
// get the global layers' values (sliding_window 0).
void set_gemma_layers(ModelConfig& c, const std::vector<bool>& sliding, int64_t window, const LayerSpec& local_rope,
                      const LayerSpec& global_rope) {
  c.layers.clear();
  for (bool s : sliding) {
    LayerSpec l = gemma_layer();
    const LayerSpec& rope = s ? local_rope : global_rope;
    l.rope_theta = rope.rope_theta;
    l.rope_scaling = rope.rope_scaling;
    l.sliding_window = s ? window : 0;
    c.layers.push_back(l);
  }
  c.rope_theta = global_rope.rope_theta;
  c.rope_scaling = global_rope.rope_scaling;
  c.sliding_window = 0;
}

std::vector<bool> pattern_layers(int64_t num_layers, int64_t pattern) {
  std::vector<bool> sliding(static_cast<size_t>(std::max<int64_t>(num_layers, 0)));
  for (int64_t i = 0; i < num_layers; ++i) sliding[static_cast<size_t>(i)] = pattern <= 0 || (i + 1) % pattern != 0;
  return sliding;
}

// The values every Gemma 3 shares, given the sizes: scales and flags.
void set_gemma_numbers(ModelConfig& c, double query_pre_attn_scalar) {
  c.arch = Architecture::kGemma3;
  c.qk_norm = true;
  c.rope_layout = RopeLayout::kNeox;
  // transformers: torch.tensor(hidden_size ** 0.5) (f32) times the f32 embedding row.
  c.embed_scale = static_cast<float>(std::sqrt(static_cast<double>(c.hidden_size)));
  // transformers: query_pre_attn_scalar ** -0.5 in double, applied to f32 scores as an f32 scalar.
  c.attention_scale = static_cast<float>(std::pow(query_pre_attn_scalar, -0.5));
}

// The text config's layer kinds: layer_types, else sliding_window_pattern.
Result<std::vector<bool>> hf_sliding_layers(const json& j, int64_t num_layers, const std::string& source) {
  auto it = j.find("layer_types");
  if (it == j.end() || it->is_null()) return pattern_layers(num_layers, json_int_or(j, "sliding_window_pattern", 6));
  if (!it->is_array() || static_cast<int64_t>(it->size()) != num_layers)
    return invalid_argument(source + ": layer_types must list num_hidden_layers layer kinds");
  std::vector<bool> sliding;
  for (const auto& t : *it) {
    const std::string kind = t.is_string() ? t.get<std::string>() : std::string();
    if (kind != "sliding_attention" && kind != "full_attention")
      return unimplemented(source + ": layer type " + t.dump() +
                           " is not supported (supported: sliding_attention, full_attention)");
    sliding.push_back(kind == "sliding_attention");
  }
  return sliding;
}

// Each kind's rotary: transformers 5's nested rope_parameters, or rope_theta + rope_scaling
// (global) and rope_local_base_freq (sliding).
Status hf_gemma_rope(const json& j, const std::string& source, LayerSpec& local, LayerSpec& global) {
  global.rope_theta = json_double_or(j, "rope_theta", 1000000.0);
  local.rope_theta = json_double_or(j, "rope_local_base_freq", 10000.0);
  const json* params = nullptr;
  for (const char* key : {"rope_parameters", "rope_scaling"}) {
    auto it = j.find(key);
    if (it != j.end() && it->is_object()) params = &*it;
  }
  if (params == nullptr) return Status();
  const bool nested = params->contains("full_attention") || params->contains("sliding_attention");
  if (!nested) return parse_rope_dict(*params, source, global.rope_theta, global.rope_scaling);
  for (auto [key, spec] : {std::pair{"full_attention", &global}, std::pair{"sliding_attention", &local}}) {
    auto it = params->find(key);
    if (it != params->end() && it->is_object())
      VOSTI_RETURN_IF_ERROR(parse_rope_dict(*it, source, spec->rope_theta, spec->rope_scaling));
  }
  return Status();
}

}  // namespace

Result<ModelConfig> gemma3_from_hf_config(const json& outer, const std::string& source) {
  // Gemma3ForConditionalGeneration: the language model's config is text_config (absent fields and
  // an absent text_config take Gemma3TextConfig's defaults).
  const bool multimodal = outer.value("model_type", std::string()) == "gemma3";
  const json& j =
      multimodal && outer.contains("text_config") && outer["text_config"].is_object() ? outer["text_config"] : outer;
  ModelConfig c;
  c.vocab_size = json_int_or(j, "vocab_size", 262208);
  c.hidden_size = json_int_or(j, "hidden_size", 2304);
  c.intermediate_size = json_int_or(j, "intermediate_size", 9216);
  c.num_layers = json_int_or(j, "num_hidden_layers", 26);
  c.num_heads = json_int_or(j, "num_attention_heads", 8);
  c.num_kv_heads = json_int_or(j, "num_key_value_heads", 4);
  c.head_dim = json_int_or(j, "head_dim", 256);
  c.max_position_embeddings = json_int_or(j, "max_position_embeddings", 131072);
  c.rms_norm_eps = json_double_or(j, "rms_norm_eps", 1e-6);
  c.tie_word_embeddings = json_bool_or(j, "tie_word_embeddings", true);
  c.qkv_bias = json_bool_or(j, "attention_bias", false);
  c.norm_weight_offset = 1.0f;  // Gemma3RMSNorm: x * (1 + w)
  c.bos_token_id = 2;
  c.eos_token_ids = {1};
  read_token_ids(j, c);
  if (multimodal) read_token_ids(outer, c);  // the checkpoint's own ids ([1, 106] on the Hub) win
  const std::string act = j.value("hidden_activation", j.value("hidden_act", std::string("gelu_pytorch_tanh")));
  if (act != "gelu_pytorch_tanh")
    return unimplemented(source + ": Gemma 3 hidden_activation \"" + act +
                         "\" is not supported (supported: gelu_pytorch_tanh)");
  if (json_bool_or(j, "use_bidirectional_attention", false))
    return unimplemented(source + ": Gemma 3 with use_bidirectional_attention is not supported");
  if (auto it = j.find("attn_logit_softcapping"); it != j.end() && !it->is_null())
    return unimplemented(source + ": attention logit soft-capping is not supported (Gemma 3 configs carry null)");
  if (auto it = j.find("final_logit_softcapping"); it != j.end() && !it->is_null()) {
    if (!it->is_number()) return invalid_argument(source + ": final_logit_softcapping must be a number or null");
    c.final_logit_softcap = it->get<double>();
  }
  int64_t window = 0;
  if (auto it = j.find("sliding_window"); it == j.end()) {
    window = 4096;
  } else if (!it->is_null()) {
    if (!it->is_number_integer() || it->get<int64_t>() <= 0)
      return invalid_argument(source + ": sliding_window must be a positive integer or null, got " + it->dump());
    window = it->get<int64_t>();
  }
  VOSTI_ASSIGN_OR_RETURN(std::vector<bool> sliding, hf_sliding_layers(j, c.num_layers, source));
  LayerSpec local, global;
  VOSTI_RETURN_IF_ERROR(hf_gemma_rope(j, source, local, global));
  set_gemma_layers(c, sliding, window, local, global);
  set_gemma_numbers(c, json_double_or(j, "query_pre_attn_scalar", 256.0));
  VOSTI_RETURN_IF_ERROR(c.validate().with_context(source));
  return c;
}

// llama.cpp's gemma3 architecture (convert_hf_to_gguf.py's Gemma3Model, llama-model.cpp):
// - sizes under gemma3.*; attention.key_length is head_dim; rope.freq_base the global layers' base;
//   rope.scaling.type/factor (linear) for the global layers only;
// - attention.sliding_window W present and > 0: interleaved layers, period
//   attention.sliding_window_pattern (a uint32 period, or one bool per layer, true = sliding)
//   else 6; sliding layers rotate with rope.freq_base_swa, else 10,000, unscaled. Absent: every
//   layer global;
// - the attention scale: attention.scale when present, else llama.cpp's rule (gemma_pytorch's):
//   query_pre_attn_scalar = hidden / heads for the 62-layer 27B, head_dim otherwise;
// - final_logit_softcapping when present; norms stored as 1 + w (norm_weight_offset 0);
// - q/k rows in HF order (no permutation: llama.cpp's Gemma rotary is NeoX); no output.weight.
Result<ModelConfig> gemma3_from_gguf(const GgufFile& g) {
  const std::string& source = g.path();
  auto key = [](const char* suffix) { return std::string("gemma3.") + suffix; };
  ModelConfig c;
  if (auto name = g.get_string("general.name"); name.ok()) c.name = *name;
  VOSTI_ASSIGN_OR_RETURN(c.hidden_size, g.get_int(key("embedding_length")));
  VOSTI_ASSIGN_OR_RETURN(c.intermediate_size, g.get_int(key("feed_forward_length")));
  VOSTI_ASSIGN_OR_RETURN(c.num_layers, g.get_int(key("block_count")));
  VOSTI_ASSIGN_OR_RETURN(c.num_heads, g.get_int(key("attention.head_count")));
  auto kv = g.get_int(key("attention.head_count_kv"));
  c.num_kv_heads = kv.ok() ? *kv : c.num_heads;
  auto key_length = g.get_int(key("attention.key_length"));
  c.head_dim = key_length.ok() ? *key_length : 256;
  auto ctx = g.get_int(key("context_length"));
  c.max_position_embeddings = ctx.ok() ? *ctx : 131072;
  auto eps = g.get_double(key("attention.layer_norm_rms_epsilon"));
  c.rms_norm_eps = eps.ok() ? *eps : 1e-6;
  LayerSpec local, global;
  auto theta = g.get_double(key("rope.freq_base"));
  global.rope_theta = theta.ok() ? *theta : 1000000.0;
  auto theta_swa = g.get_double(key("rope.freq_base_swa"));
  local.rope_theta = theta_swa.ok() ? *theta_swa : 10000.0;
  if (auto type = g.get_string(key("rope.scaling.type")); type.ok() && *type != "none") {
    if (*type != "linear")
      return unimplemented(source + ": GGUF rope scaling \"" + *type + "\" is not supported (supported: linear)");
    global.rope_scaling.kind = RopeScaling::Kind::kLinear;
    auto factor = g.get_double(key("rope.scaling.factor"));
    global.rope_scaling.factor = factor.ok() ? *factor : 1.0;
  }
  int64_t window = 0;
  if (auto sw = g.get_int(key("attention.sliding_window")); sw.ok()) window = *sw;
  if (window < 0) return invalid_argument(source + ": " + key("attention.sliding_window") + " is negative");
  std::vector<bool> sliding(static_cast<size_t>(std::max<int64_t>(c.num_layers, 0)), false);
  if (window > 0) {
    sliding = pattern_layers(c.num_layers, 6);
    if (const GgufValue* p = g.find(key("attention.sliding_window_pattern")); p != nullptr) {
      if (p->type == GgufType::kArray) {
        const auto& items = std::get<GgufArray>(p->value).items;
        if (static_cast<int64_t>(items.size()) != c.num_layers)
          return invalid_argument(source + ": " + key("attention.sliding_window_pattern") +
                                  " must have one entry a layer");
        for (size_t i = 0; i < items.size(); ++i) {
          VOSTI_ASSIGN_OR_RETURN(bool s, items[i].as_bool());
          sliding[i] = s;
        }
      } else {
        VOSTI_ASSIGN_OR_RETURN(int64_t period, p->as_int());
        sliding = pattern_layers(c.num_layers, period);
      }
    }
  }
  set_gemma_layers(c, sliding, window, local, global);
  if (auto cap = g.get_double(key("final_logit_softcapping")); cap.ok()) c.final_logit_softcap = *cap;
  int64_t end_of_turn = -1;  // llama.cpp ends generation at "<end_of_turn>" too (found by its text)
  if (auto tokens = g.find("tokenizer.ggml.tokens"); tokens && tokens->type == GgufType::kArray) {
    const auto& items = std::get<GgufArray>(tokens->value).items;
    c.vocab_size = static_cast<int64_t>(items.size());
    for (size_t i = 0; i < items.size() && end_of_turn < 0; ++i)
      if (const auto* text = std::get_if<std::string>(&items[i].value); text && *text == "<end_of_turn>")
        end_of_turn = static_cast<int64_t>(i);
  }
  if (auto vocab = g.get_int(key("vocab_size")); vocab.ok()) c.vocab_size = *vocab;
  for (const auto& t : g.tensors())
    if (t.name == "token_embd.weight" && t.dims.size() == 2) c.vocab_size = t.dims[1];
  const double qpas = c.num_layers == 62 && c.num_heads > 0 ? static_cast<double>(c.hidden_size / c.num_heads)
                                                            : static_cast<double>(c.head_dim);
  set_gemma_numbers(c, qpas);
  if (auto scale = g.get_double(key("attention.scale")); scale.ok()) c.attention_scale = static_cast<float>(*scale);
  bool has_output = false;
  for (const auto& t : g.tensors()) has_output |= (t.name == "output.weight");
  c.tie_word_embeddings = !has_output;
  c.norm_weight_offset = 0.0f;  // convert_hf_to_gguf.py stores Gemma's norms as 1 + w (f32)
  if (auto bos = g.get_int("tokenizer.ggml.bos_token_id"); bos.ok()) c.bos_token_id = *bos;
  if (auto eos = g.get_int("tokenizer.ggml.eos_token_id"); eos.ok()) c.eos_token_ids.push_back(*eos);
  if (auto eot = g.get_int("tokenizer.ggml.eot_token_id");
      eot.ok() && (c.eos_token_ids.empty() || *eot != c.eos_token_ids[0]))
    c.eos_token_ids.push_back(*eot);
  if (end_of_turn >= 0 &&
      std::find(c.eos_token_ids.begin(), c.eos_token_ids.end(), end_of_turn) == c.eos_token_ids.end())
    c.eos_token_ids.push_back(end_of_turn);
  VOSTI_RETURN_IF_ERROR(c.validate().with_context(source));
  return c;
}

}  // namespace vosti
