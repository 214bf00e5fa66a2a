// The real models whose configs `vosti make-model` writes (tools/cmd_make_model.cc): each shape's
// config.json numbers, special tokens and chat template.
// Thread safety: pure data.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <vector>

namespace vosti::tools {

// A special token at its real id.
struct Special {
  int64_t id;
  const char* text;
};

// The configs of the real models (their config.json fields that Vosti reads).
struct Shape {
  const char* name;
  const char* model_type;  // config.json model_type: llama, qwen2, qwen3, gemma3_text, qwen3_moe, mixtral
  int64_t hidden, intermediate, layers, heads, kv_heads, head_dim, vocab, max_positions;
  double rms_eps, rope_theta;
  bool tied, qkv_bias;
  int64_t bos;
  std::vector<int64_t> eos;
  std::vector<Special> specials;
  nlohmann::ordered_json rope_scaling;     // null for none
  nlohmann::ordered_json extra = nullptr;  // further config.json fields of the family (Gemma's, MoE's), or null
  // Mixture of experts (qwen3_moe, mixtral: every layer sparse): the expert count and each expert's
  // FFN width (the config's fields are in `extra`); 0 for a dense model.
  int64_t experts = 0;
  int64_t expert_intermediate = 0;
};

// Every shape, in the order `--shape` lists them.
std::vector<Shape> make_model_shapes();

// Gemma 3's chat template (the instruction-tuned checkpoints' tokenizer_config.json).
extern const char* const kGemma3ChatTemplate;

}  // namespace vosti::tools
