// ModelConfig: the architecture of a decoder-only model, read from a GGUF file's
// metadata or a Hugging Face config.json.
//
// Invariants after validate(): all sizes positive; num_heads % num_kv_heads == 0;
// head_dim even; vocab_size > 0; sliding_window >= 0. Families: Llama (Llama 2/3.x, SmolLM,
// TinyLlama, Mistral, with or without its sliding window), Qwen2/2.5 (qkv bias), Qwen3 (per-head
// q/k RMSNorm).
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

enum class Architecture : uint8_t { kLlama, kQwen2, kQwen3 };
std::string_view architecture_name(Architecture a);

struct RopeScaling {
  enum class Kind : uint8_t { kNone, kLinear, kLlama3 };
  Kind kind = Kind::kNone;
  double factor = 1.0;
  double low_freq_factor = 1.0;                     // llama3
  double high_freq_factor = 4.0;                    // llama3
  int64_t original_max_position_embeddings = 8192;  // llama3
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
  double rope_theta = 10000.0;
  RopeScaling rope_scaling;
  RopeLayout rope_layout = RopeLayout::kNeox;
  bool tie_word_embeddings = false;
  bool qkv_bias = false;  // Qwen2
  bool qk_norm = false;   // Qwen3
  // Every layer's query at position p attends over positions max(0, p - sliding_window + 1)..p
  // (Mistral's sliding window, as transformers masks it); 0: over 0..p.
  int64_t sliding_window = 0;
  int64_t bos_token_id = -1;
  std::vector<int64_t> eos_token_ids;

  static Result<ModelConfig> from_hf_config(const nlohmann::json& config, const std::string& source);
  static Result<ModelConfig> from_gguf(const GgufFile& gguf);
  // INVALID_ARGUMENT naming the first inconsistent field.
  Status validate() const;
  // inv_freq[head_dim / 2] after rope scaling, computed as HF transformers does.
  std::vector<float> rope_inv_freq() const;
};

}  // namespace vosti
