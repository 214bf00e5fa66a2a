// The pieces ModelConfig's readers share (model_config.cc: the Llama and Qwen families;
// model_config_gemma.cc: Gemma 3): typed config.json look-ups and the family readers.
// Internal to the model library.
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "core/status.h"
#include "model/model_config.h"

namespace vosti {

class GgufFile;

namespace config_parse {

using nlohmann::json;

// j[key] as an integer; INVALID_ARGUMENT naming the key when missing, null or not an integer.
Result<int64_t> json_int(const json& j, const char* key, const std::string& source);
// j[key] when present with the type, else fallback.
int64_t json_int_or(const json& j, const char* key, int64_t fallback);
double json_double_or(const json& j, const char* key, double fallback);
bool json_bool_or(const json& j, const char* key, bool fallback);
// One RoPE parameter dict ({"rope_type" or "type", "factor", ..., "rope_theta"}): theta is
// replaced when the dict has rope_theta, scaling set for "linear" and "llama3"; UNIMPLEMENTED
// for other types.
Status parse_rope_dict(const json& rs, const std::string& source, double& theta, RopeScaling& scaling);
// bos_token_id and eos_token_id (an integer or a list) when j has them.
void read_token_ids(const json& j, ModelConfig& c);

}  // namespace config_parse

// Gemma 3 (model_config_gemma.cc): config.json of Gemma3ForCausalLM ("gemma3_text") or of
// Gemma3ForConditionalGeneration ("gemma3", the language model's text_config), and the GGUF
// metadata of llama.cpp's "gemma3" architecture.
Result<ModelConfig> gemma3_from_hf_config(const nlohmann::json& config, const std::string& source);
Result<ModelConfig> gemma3_from_gguf(const GgufFile& gguf);

// Mixture of experts (model_config_moe.cc): fills the MoE specs of `c.layers` (made by
// fill_uniform_layers) from config.json of Qwen3MoeForCausalLM ("qwen3_moe": num_experts,
// num_experts_per_tok, norm_topk_prob, moe_intermediate_size, decoder_sparse_step, mlp_only_layers)
// or MixtralForCausalLM ("mixtral": num_local_experts, num_experts_per_tok; every layer, the
// expert FFN intermediate_size wide, top-k renormalised); INVALID_ARGUMENT naming a bad field.
Status moe_from_hf_config(const nlohmann::json& config, const std::string& source, ModelConfig& c);
// From llama.cpp's GGUF metadata (<arch>.expert_count, expert_used_count,
// expert_feed_forward_length, expert_weights_norm): every layer MoE, as llama.cpp builds them.
// Does nothing when the file has no expert_count (a dense model).
Status moe_from_gguf(const GgufFile& gguf, const std::string& arch, ModelConfig& c);

}  // namespace vosti
