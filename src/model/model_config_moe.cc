// The mixture-of-experts fields of ModelConfig::layers (LayerSpec::moe) from config.json
// (Qwen3-MoE, Mixtral) or llama.cpp's GGUF metadata (qwen3moe, and llama files with experts:
// Mixtral). See model_config_parse.h for the contracts.
#include <string>

#include "io/gguf.h"
#include "model/model_config_parse.h"

namespace vosti {

using namespace config_parse;  // NOLINT(google-build-using-namespace): the model library's own helpers

Status moe_from_hf_config(const json& j, const std::string& source, ModelConfig& c) {
  if (c.arch != Architecture::kQwen3Moe && c.arch != Architecture::kMixtral) return Status();
  MoeSpec moe;
  // transformers 5 writes Qwen3-MoE's expert count as num_local_experts; the Hub's configs say
  // num_experts.
  const char* count_key =
      c.arch == Architecture::kMixtral || j.contains("num_local_experts") ? "num_local_experts" : "num_experts";
  VOSTI_ASSIGN_OR_RETURN(moe.num_experts, json_int(j, count_key, source));
  VOSTI_ASSIGN_OR_RETURN(moe.top_k, json_int(j, "num_experts_per_tok", source));
  if (moe.num_experts <= 0)
    return invalid_argument(source + ": \"" + count_key + "\" must be positive, got " +
                            std::to_string(moe.num_experts));
  if (moe.top_k <= 0 || moe.top_k > moe.num_experts)
    return invalid_argument(source + ": \"num_experts_per_tok\" must be in 1.." + std::to_string(moe.num_experts) +
                            ", got " + std::to_string(moe.top_k));
  if (c.arch == Architecture::kMixtral) {
    moe.norm_topk_prob = true;  // MixtralTopKRouter divides the top-k probabilities by their sum
    moe.intermediate_size = c.intermediate_size;
    for (LayerSpec& l : c.layers) l.moe = moe;
    return Status();
  }
  moe.norm_topk_prob = json_bool_or(j, "norm_topk_prob", false);
  VOSTI_ASSIGN_OR_RETURN(moe.intermediate_size, json_int(j, "moe_intermediate_size", source));
  const int64_t step = json_int_or(j, "decoder_sparse_step", 1);
  if (step <= 0) return invalid_argument(source + ": \"decoder_sparse_step\" must be positive");
  std::vector<int64_t> dense;
  if (auto it = j.find("mlp_only_layers"); it != j.end() && !it->is_null()) {
    if (!it->is_array()) return invalid_argument(source + ": \"mlp_only_layers\" must be a list of layer indices");
    for (const auto& e : *it) {
      if (!e.is_number_integer() || e.get<int64_t>() < 0 || e.get<int64_t>() >= c.num_layers)
        return invalid_argument(source + ": \"mlp_only_layers\" holds " + e.dump() + ", not a layer index below " +
                                std::to_string(c.num_layers));
      dense.push_back(e.get<int64_t>());
    }
  }
  // transformers' Qwen3MoeDecoderLayer: sparse where the layer is not in mlp_only_layers and
  // (layer + 1) % decoder_sparse_step == 0.
  for (int64_t i = 0; i < c.num_layers; ++i) {
    const bool only_mlp = std::find(dense.begin(), dense.end(), i) != dense.end();
    if (!only_mlp && (i + 1) % step == 0) c.layers[static_cast<size_t>(i)].moe = moe;
  }
  return Status();
}

Status moe_from_gguf(const GgufFile& g, const std::string& arch, ModelConfig& c) {
  auto count = g.get_int(arch + ".expert_count");
  if (!count.ok() || *count == 0) return Status();
  const std::string& source = g.path();
  if (c.arch == Architecture::kLlama) c.arch = Architecture::kMixtral;
  if (c.arch != Architecture::kMixtral && c.arch != Architecture::kQwen3Moe)
    return unimplemented(source + ": GGUF architecture \"" + arch + "\" with experts is not supported");
  MoeSpec moe;
  moe.num_experts = *count;
  VOSTI_ASSIGN_OR_RETURN(moe.top_k, g.get_int(arch + ".expert_used_count"));
  if (auto ff = g.get_int(arch + ".expert_feed_forward_length"); ff.ok()) {
    moe.intermediate_size = *ff;
  } else {
    moe.intermediate_size = c.intermediate_size;  // Mixtral: the FFN length is the experts'
  }
  // llama.cpp renormalises the top-k weights of both (build_moe_ffn's norm_w for llama and
  // qwen3moe); a newer key may say so explicitly.
  moe.norm_topk_prob = true;
  if (auto norm = g.find(arch + ".expert_weights_norm"); norm && norm->type == GgufType::kBool)
    moe.norm_topk_prob = std::get<bool>(norm->value);
  // Older Mixtral GGUFs store each expert as its own tensor (blk.N.ffn_gate.E.weight).
  bool stacked = false;
  for (const auto& t : g.tensors()) stacked |= t.name == "blk.0.ffn_gate_exps.weight";
  if (!stacked)
    return unimplemented(source +
                         ": this GGUF stores its experts as separate tensors (blk.N.ffn_gate.E.weight, "
                         "an older llama.cpp layout); reconvert it with a current convert_hf_to_gguf.py, "
                         "which writes them stacked (ffn_gate_exps)");
  for (LayerSpec& l : c.layers) l.moe = moe;
  return Status();
}

}  // namespace vosti
