// ModelConfig: the architecture of a decoder-only model, read from a GGUF file's
// metadata or a Hugging Face config.json. A model is a description: what differs between the
// families is data here (flags, per-layer specs, scales), never a branch on the family in the
// forward (model/model.cc).
//
// Invariants after validate(): all sizes positive; num_heads % num_kv_heads == 0;
// head_dim even; vocab_size > 0; sliding windows >= 0; layers.size() == num_layers. Families:
// Llama (Llama 2/3.x, SmolLM, TinyLlama, Mistral, with or without its sliding window), Qwen2/2.5
// (qkv bias), Qwen3 (per-head q/k RMSNorm), Gemma 3 (Gemma3ForCausalLM and the language model of
// Gemma3ForConditionalGeneration: scaled embeddings, (1 + w) norms, post-attention and post-MLP
// norms, q/k norms, GeGLU, query_pre_attn_scalar, interleaved sliding-window and global layers
// with their own RoPE), Qwen3-MoE and Mixtral (mixture-of-experts MLPs: LayerSpec::moe).
// Thread safety: a value type.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/status.h"
#include "kernels/kernel_backend.h"

namespace vosti {

class GgufFile;

enum class Architecture : uint8_t { kLlama, kQwen2, kQwen3, kGemma3, kQwen3Moe, kMixtral };
std::string_view architecture_name(Architecture a);

struct RopeScaling {
  enum class Kind : uint8_t { kNone, kLinear, kLlama3 };
  Kind kind = Kind::kNone;
  double factor = 1.0;
  double low_freq_factor = 1.0;                     // llama3
  double high_freq_factor = 4.0;                    // llama3
  int64_t original_max_position_embeddings = 8192;  // llama3
};

// MlpActivation (the MLP's gate activation) is kernel_backend.h's.
std::string_view mlp_activation_name(MlpActivation a);

// A mixture-of-experts MLP (model/moe_layer.h): a router picks top_k of num_experts SwiGLU FFNs
// of `intermediate_size` for each token and sums their outputs weighted by the router's
// probabilities. num_experts == 0: the layer's MLP is dense (ModelConfig::intermediate_size).
struct MoeSpec {
  int64_t num_experts = 0;
  int64_t top_k = 0;
  // Divide the top_k probabilities (of the softmax over all experts) by their sum: Qwen3-MoE's
  // norm_topk_prob; always for Mixtral (transformers' MixtralTopKRouter).
  bool norm_topk_prob = false;
  int64_t intermediate_size = 0;  // each expert's FFN width
  bool enabled() const { return num_experts > 0; }
  bool operator==(const MoeSpec&) const = default;
};

// What one decoder layer is: how it attends, how it rotates, its MLP and which norms it has.
// The forward reads each layer's spec from ModelConfig::layers; a family is a mapping from its
// config to these specs (model_config.cc), not a path through the forward.
struct LayerSpec {
  // A query at position p attends over positions max(0, p - sliding_window + 1)..p
  // (attention_window_first; transformers' mask p - j < sliding_window); 0: over 0..p.
  int64_t sliding_window = 0;
  double rope_theta = 10000.0;  // this layer's RoPE base
  RopeScaling rope_scaling;     // and its scaling
  MlpActivation activation = MlpActivation::kSilu;
  bool post_attn_norm = false;  // RMSNorm of the attention output before the residual add (Gemma)
  bool post_ffn_norm = false;   // RMSNorm of the MLP output before the residual add (Gemma)
  MoeSpec moe;                  // the MLP is a mixture of experts where moe.enabled()
  bool same_rope(const LayerSpec& o) const;
};

// How the layers' KV divides under window-local KV memory (docs/SPEC.md section 4): the full
// layers (sliding_window 0) keep every position, the window layers only what their window reads.
struct KvLayerGroups {
  int64_t num_full_layers = 0;
  int64_t num_window_layers = 0;
  int32_t window = 0;  // the largest sliding window of the window layers (0: there are none)
};

struct ModelConfig {
  Architecture arch = Architecture::kLlama;
  std::string name;  // general.name or the directory name
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t intermediate_size = 0;
  int64_t num_layers = 0;
  int64_t num_heads = 0;
  int64_t num_kv_heads = 0;
  int64_t head_dim = 0;
  int64_t max_position_embeddings = 0;
  double rms_norm_eps = 1e-5;
  // rope_theta, rope_scaling and sliding_window: the values of a model whose layers all share
  // them (every family but Gemma), from which fill_uniform_layers() makes `layers`; `layers` holds
  // each layer's own and is what both forwards (CPU and CUDA) read. For Gemma 3 they are the global
  // (full-attention) layers' values with sliding_window 0, and layers_uniform() is false.
  double rope_theta = 10000.0;
  RopeScaling rope_scaling;
  RopeLayout rope_layout = RopeLayout::kNeox;
  bool tie_word_embeddings = false;
  bool qkv_bias = false;  // Qwen2
  bool qk_norm = false;   // Qwen3, Gemma 3: per-head RMSNorm of q and k before the rotary
  int64_t sliding_window = 0;
  // The embedding row is multiplied by this f32 value (Gemma: float(sqrt(hidden_size)), as
  // transformers' Gemma3TextScaledWordEmbedding in f32); 1: not scaled.
  float embed_scale = 1.0f;
  // Attention scores are q.k * attention_scale: 1 / sqrt(head_dim) in f32 arithmetic for most
  // families; Gemma: float(query_pre_attn_scalar ** -0.5) computed in double, as transformers.
  float attention_scale = 0.0f;
  // The stored RMSNorm weights of every norm are w where the model multiplies by
  // (norm_weight_offset + w): 1 for Gemma's Hugging Face checkpoints, 0 otherwise (llama.cpp's
  // converter stores Gemma's 1 + w already). ModelFile adds it when it reads a norm (in f32, as
  // transformers' 1.0 + weight.float()), so every loaded norm weight is the multiplier itself.
  float norm_weight_offset = 0.0f;
  // Final logits are cap * tanh(logits / cap) (Gemma 2-style soft-capping); 0: none.
  double final_logit_softcap = 0.0;
  int64_t bos_token_id = -1;
  std::vector<int64_t> eos_token_ids;
  std::vector<LayerSpec> layers;  // [num_layers]

  static Result<ModelConfig> from_hf_config(const nlohmann::json& config, const std::string& source);
  static Result<ModelConfig> from_gguf(const GgufFile& gguf);
  // INVALID_ARGUMENT naming the first inconsistent field.
  Status validate() const;
  // inv_freq[head_dim / 2] after rope scaling, computed as HF transformers does: of the flat
  // rope_theta / rope_scaling, and of one layer's spec.
  std::vector<float> rope_inv_freq() const;
  std::vector<float> rope_inv_freq(const LayerSpec& layer) const;
  // True when every layer is described by the flat fields alone (sliding_window, rope_theta,
  // rope_scaling, SiLU, no post norms) and the embedding, attention scale and norms are those of
  // Llama.
  bool layers_uniform() const;
  // The MoE spec of the first mixture-of-experts layer (every MoE layer of a family shares it);
  // a disabled spec when the model has none.
  MoeSpec moe() const;
  bool has_moe() const { return moe().enabled(); }
  // The layers' KV groups, read from `layers`.
  KvLayerGroups kv_layer_groups() const;
  // `layers` made of num_layers copies of the flat fields' layer (the families whose layers are all
  // alike), and attention_scale set to 1 / sqrt(head_dim) if unset.
  void fill_uniform_layers();
};

}  // namespace vosti
