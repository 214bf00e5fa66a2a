// Gemma 3's config mapping (model/model_config_gemma.cc): transformers' defaults and nesting,
// both RoPE formats, the per-layer specs, the refusals; and that the other families keep a
// uniform per-layer description with the attention scale they always had.
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "model/model_config.h"

namespace vosti {
namespace {

using nlohmann::json;

// gemma-3-4b-it's config.json as the Hub has it: most text fields left to Gemma3TextConfig's
// defaults.
json gemma3_4b_config() {
  return json::parse(R"({
    "architectures": ["Gemma3ForConditionalGeneration"], "model_type": "gemma3",
    "eos_token_id": [1, 106], "boi_token_index": 255999,
    "text_config": {"hidden_size": 2560, "intermediate_size": 10240, "model_type": "gemma3_text",
                    "num_hidden_layers": 34, "rope_scaling": {"factor": 8.0, "rope_type": "linear"},
                    "sliding_window": 1024},
    "vision_config": {"model_type": "siglip_vision_model"}})");
}

TEST(Gemma3Config, ConditionalGenerationTakesTextConfigAndDefaults) {
  auto c = ModelConfig::from_hf_config(gemma3_4b_config(), "gemma-3-4b-it/config.json");
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ(c->arch, Architecture::kGemma3);
  EXPECT_EQ(c->vocab_size, 262208);
  EXPECT_EQ(c->num_heads, 8);
  EXPECT_EQ(c->num_kv_heads, 4);
  EXPECT_EQ(c->head_dim, 256);
  EXPECT_EQ(c->eos_token_ids, (std::vector<int64_t>{1, 106}));
  EXPECT_EQ(c->bos_token_id, 2);
  EXPECT_TRUE(c->tie_word_embeddings);
  EXPECT_TRUE(c->qk_norm);
  EXPECT_EQ(c->norm_weight_offset, 1.0f);
  EXPECT_EQ(c->embed_scale, static_cast<float>(std::sqrt(2560.0)));
  EXPECT_EQ(c->attention_scale, 0.0625f);  // 256 ** -0.5
  EXPECT_FALSE(c->layers_uniform());
  ASSERT_EQ(c->layers.size(), 34u);
  for (size_t i = 0; i < c->layers.size(); ++i) {
    const LayerSpec& l = c->layers[i];
    const bool global = (i + 1) % 6 == 0;
    EXPECT_EQ(l.sliding_window, global ? 0 : 1024) << i;
    EXPECT_EQ(l.rope_theta, global ? 1e6 : 1e4) << i;
    EXPECT_EQ(l.rope_scaling.kind, global ? RopeScaling::Kind::kLinear : RopeScaling::Kind::kNone) << i;
    EXPECT_EQ(l.activation, MlpActivation::kGeluTanh);
    EXPECT_TRUE(l.post_attn_norm && l.post_ffn_norm);
  }
  // The flat fields: the global layers'.
  EXPECT_EQ(c->rope_scaling.kind, RopeScaling::Kind::kLinear);
  EXPECT_EQ(c->rope_scaling.factor, 8.0);
  EXPECT_EQ(c->sliding_window, 0);
}

TEST(Gemma3Config, NestedRopeParametersAndLayerTypes) {
  json j = json::parse(R"({"model_type": "gemma3_text", "vocab_size": 320, "hidden_size": 64,
    "intermediate_size": 128, "num_hidden_layers": 3, "num_attention_heads": 4, "num_key_value_heads": 2,
    "head_dim": 32, "query_pre_attn_scalar": 24, "sliding_window": 24, "final_logit_softcapping": 30.0,
    "layer_types": ["full_attention", "sliding_attention", "full_attention"],
    "rope_parameters": {"sliding_attention": {"rope_type": "default", "rope_theta": 5000.0},
                        "full_attention": {"rope_type": "linear", "factor": 4.0, "rope_theta": 20000.0}}})");
  auto c = ModelConfig::from_hf_config(j, "cfg");
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ(c->layers[0].sliding_window, 0);
  EXPECT_EQ(c->layers[1].sliding_window, 24);
  EXPECT_EQ(c->layers[1].rope_theta, 5000.0);
  EXPECT_EQ(c->layers[2].rope_theta, 20000.0);
  EXPECT_EQ(c->layers[2].rope_scaling.factor, 4.0);
  EXPECT_FALSE(c->layers[0].same_rope(c->layers[1]));
  EXPECT_TRUE(c->layers[0].same_rope(c->layers[2]));
  EXPECT_EQ(c->attention_scale, static_cast<float>(std::pow(24.0, -0.5)));
  EXPECT_EQ(c->final_logit_softcap, 30.0);
  // The global layers' inverse frequencies are the sliding ones' base changed and divided by 4.
  const std::vector<float> global = c->rope_inv_freq(c->layers[0]);
  EXPECT_EQ(global[1], (1.0f / std::pow(20000.0f, 2.0f / 32.0f)) / 4.0f);
}

TEST(Gemma3Config, RefusesWhatTheForwardDoesNotDo) {
  json j = json::parse(R"({"model_type": "gemma3_text", "num_hidden_layers": 2})");
  j["attn_logit_softcapping"] = 50.0;
  EXPECT_EQ(ModelConfig::from_hf_config(j, "cfg").status().code(), StatusCode::kUnimplemented);
  j.erase("attn_logit_softcapping");
  j["use_bidirectional_attention"] = true;
  EXPECT_EQ(ModelConfig::from_hf_config(j, "cfg").status().code(), StatusCode::kUnimplemented);
  j.erase("use_bidirectional_attention");
  j["hidden_activation"] = "silu";
  EXPECT_EQ(ModelConfig::from_hf_config(j, "cfg").status().code(), StatusCode::kUnimplemented);
  j.erase("hidden_activation");
  j["layer_types"] = {"sliding_attention", "chunked_attention"};
  EXPECT_EQ(ModelConfig::from_hf_config(j, "cfg").status().code(), StatusCode::kUnimplemented);
}

TEST(Gemma3Config, OtherFamiliesAreUniform) {
  json j = json::parse(R"({"model_type": "mistral", "vocab_size": 320, "hidden_size": 64,
    "intermediate_size": 160, "num_hidden_layers": 3, "num_attention_heads": 4, "num_key_value_heads": 2,
    "sliding_window": 24})");
  auto c = ModelConfig::from_hf_config(j, "cfg");
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_TRUE(c->layers_uniform());
  ASSERT_EQ(c->layers.size(), 3u);
  EXPECT_EQ(c->layers[2].sliding_window, 24);
  EXPECT_EQ(c->layers[0].activation, MlpActivation::kSilu);
  EXPECT_EQ(c->attention_scale, 1.0f / std::sqrt(16.0f));
  EXPECT_EQ(c->embed_scale, 1.0f);
}

}  // namespace
}  // namespace vosti
