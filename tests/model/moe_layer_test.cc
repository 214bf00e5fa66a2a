// The mixture-of-experts layer (model/moe_layer.h): the routing order of its header (ties to the
// lowest expert, renormalisation, ascending expert order) and its batch invariance, bit for bit:
// a token's output row is the same whatever other tokens share the call, how many of them went to
// its experts (one alone, or all of them to the same experts) and at which row it sits.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "core/thread_pool.h"
#include "model/model.h"
#include "model/moe_layer.h"
#include "io/gguf.h"
#include "tests/io/test_files.h"
#include "tests/kernels/kernel_test_util.h"
#include "tests/test_paths.h"

namespace vosti {
namespace {

const std::string kModels = vosti::testing::source_dir() + "/tests/golden/models";

MoeSpec spec(int64_t experts, int64_t top_k, bool norm) {
  MoeSpec s;
  s.num_experts = experts;
  s.top_k = top_k;
  s.norm_topk_prob = norm;
  s.intermediate_size = 8;
  return s;
}

TEST(MoeRouting, TiesGoToTheLowestExpertIndex) {
  const std::vector<float> logits(8, 0.25f);
  std::vector<float> probs(8), weights(3);
  std::vector<int32_t> experts(3);
  route_token(logits.data(), spec(8, 3, false), probs.data(), experts.data(), weights.data());
  EXPECT_EQ(experts, (std::vector<int32_t>{0, 1, 2}));
  for (float w : weights) EXPECT_EQ(w, 1.0f / 8.0f);
  route_token(logits.data(), spec(8, 3, true), probs.data(), experts.data(), weights.data());
  EXPECT_EQ(experts, (std::vector<int32_t>{0, 1, 2}));
  const float third = (1.0f / 8.0f) / ((1.0f / 8.0f + 1.0f / 8.0f) + 1.0f / 8.0f);
  for (float w : weights) EXPECT_EQ(w, third);
}

TEST(MoeRouting, PicksTheLargestAndListsThemByExpertIndex) {
  const std::vector<float> logits = {0.0f, 3.0f, 1.0f, 3.0f, 2.5f, -1.0f};
  std::vector<float> probs(6), weights(3);
  std::vector<int32_t> experts(3);
  route_token(logits.data(), spec(6, 3, true), probs.data(), experts.data(), weights.data());
  EXPECT_EQ(experts, (std::vector<int32_t>{1, 3, 4}));
  EXPECT_EQ(weights[0], weights[1]);  // experts 1 and 3: equal logits
  EXPECT_GT(weights[0], weights[2]);
  EXPECT_NEAR(weights[0] + weights[1] + weights[2], 1.0f, 1e-6f);
  route_token(logits.data(), spec(6, 3, false), probs.data(), experts.data(), weights.data());
  EXPECT_LT(weights[0] + weights[1] + weights[2], 1.0f);  // the softmax's top-3 share, not renormalised
}

// Every row of `h` [T, H] through the first MoE layer of `model`, once all together and once one
// row at a time: the rows must agree bit for bit.
void expect_rows_invariant(const Model& model, KernelBackend& kernels, const std::vector<float>& h, int64_t T) {
  const ModelConfig& c = model.config();
  int64_t layer = 0;
  while (!c.layers[static_cast<size_t>(layer)].moe.enabled()) ++layer;
  const LayerSpec& s = c.layers[static_cast<size_t>(layer)];
  const LayerWeights& w = model.weights().layers[static_cast<size_t>(layer)];
  const int64_t H = c.hidden_size;
  MoeScratch scratch;
  std::vector<float> all(static_cast<size_t>(T * H)), one(static_cast<size_t>(H));
  moe_mlp(s.moe, s.activation, w, h.data(), T, H, kernels, scratch, all.data());
  for (int64_t t = 0; t < T; ++t) {
    moe_mlp(s.moe, s.activation, w, h.data() + t * H, 1, H, kernels, scratch, one.data());
    EXPECT_EQ(std::memcmp(one.data(), all.data() + t * H, static_cast<size_t>(H) * sizeof(float)), 0)
        << kernels.name() << " row " << t << " of " << T;
  }
}

TEST(MoeLayer, ATokensRowIsIndependentOfTheBatchAndOfTheExpertLoad) {
  ThreadPool pool(2);
  for (const char* name : {"qwen3-moe-tiny", "mixtral-tiny", "qwen3-moe-tiny-dense1-bf16"}) {
    auto model = Model::load(kModels + "/" + name);
    ASSERT_TRUE(model.ok()) << model.status().to_string();
    const int64_t H = (*model)->config().hidden_size;
    std::vector<std::unique_ptr<KernelBackend>> backends;
    backends.push_back(make_ref_backend());
    backends.push_back(make_cpu_backend(&pool));
    for (const auto& kernels : backends) {
      // Mixed load: 70 random rows spread over the experts.
      expect_rows_invariant(**model, *kernels, testing::random_floats(static_cast<size_t>(70 * H), 5), 70);
      // Skewed load: one row repeated 40 times sends all 40 tokens to the same experts.
      const auto row = testing::random_floats(static_cast<size_t>(H), 6);
      std::vector<float> same;
      for (int i = 0; i < 40; ++i) same.insert(same.end(), row.begin(), row.end());
      expect_rows_invariant(**model, *kernels, same, 40);
    }
  }
}

TEST(MoeConfig, ReadsTheExpertFieldsOfEachFamily) {
  auto q = Model::load(kModels + "/qwen3-moe-tiny-dense1-bf16");
  ASSERT_TRUE(q.ok()) << q.status().to_string();
  const ModelConfig& qc = (*q)->config();
  EXPECT_EQ(qc.arch, Architecture::kQwen3Moe);
  EXPECT_TRUE(qc.layers[0].moe.enabled());
  EXPECT_FALSE(qc.layers[1].moe.enabled());  // mlp_only_layers [1]: the dense MLP of 160
  EXPECT_TRUE(qc.layers[2].moe.enabled());
  EXPECT_EQ(qc.layers[0].moe, (MoeSpec{6, 3, false, 32}));
  auto m = Model::load(kModels + "/mixtral-tiny");
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  const ModelConfig& mc = (*m)->config();
  EXPECT_EQ(mc.arch, Architecture::kMixtral);
  for (const LayerSpec& l : mc.layers) EXPECT_EQ(l.moe, (MoeSpec{4, 2, true, 96}));
  EXPECT_EQ(mc.sliding_window, 0);  // "sliding_window": null
}

TEST(MoeConfig, RejectsBadExpertFields) {
  nlohmann::json j = {{"model_type", "qwen3_moe"},
                      {"vocab_size", 32},
                      {"hidden_size", 16},
                      {"intermediate_size", 32},
                      {"num_hidden_layers", 2},
                      {"num_attention_heads", 2},
                      {"num_key_value_heads", 1},
                      {"num_experts", 4},
                      {"num_experts_per_tok", 2},
                      {"moe_intermediate_size", 8},
                      {"max_position_embeddings", 64}};
  ASSERT_TRUE(ModelConfig::from_hf_config(j, "t").ok());
  auto bad = j;
  bad["num_experts_per_tok"] = 5;
  auto r = ModelConfig::from_hf_config(bad, "t");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().to_string().find("num_experts_per_tok"), std::string::npos) << r.status().to_string();
  bad = j;
  bad.erase("moe_intermediate_size");
  r = ModelConfig::from_hf_config(bad, "t");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().to_string().find("moe_intermediate_size"), std::string::npos) << r.status().to_string();
  bad = j;
  bad["mlp_only_layers"] = {7};
  r = ModelConfig::from_hf_config(bad, "t");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().to_string().find("mlp_only_layers"), std::string::npos) << r.status().to_string();
}

// llama.cpp's Mixtral GGUFs: architecture "llama" with expert_count. The stacked layout is read;
// the older one tensor an expert (blk.N.ffn_gate.E.weight) is refused, naming the fix.
Result<ModelConfig> mixtral_gguf_config(const std::string& gate_tensor) {
  testing::GgufBuilder b;
  b.kv_string("general.architecture", "llama")
      .kv_u32("llama.embedding_length", 16)
      .kv_u32("llama.feed_forward_length", 32)
      .kv_u32("llama.block_count", 1)
      .kv_u32("llama.attention.head_count", 2)
      .kv_u32("llama.vocab_size", 32)
      .kv_u32("llama.expert_count", 4)
      .kv_u32("llama.expert_used_count", 2)
      .f32_tensor(gate_tensor, {16, 32, 4});
  auto gguf = testing::parse_gguf_bytes(b.build());
  if (!gguf.ok()) return gguf.status();
  return ModelConfig::from_gguf(*gguf);
}

TEST(MoeConfig, MixtralGgufStackedIsReadAndPerExpertIsRefused) {
  auto stacked = mixtral_gguf_config("blk.0.ffn_gate_exps.weight");
  ASSERT_TRUE(stacked.ok()) << stacked.status().to_string();
  EXPECT_EQ(stacked->arch, Architecture::kMixtral);
  EXPECT_EQ(stacked->moe(), (MoeSpec{4, 2, true, 32}));
  auto per_expert = mixtral_gguf_config("blk.0.ffn_gate.0.weight");
  ASSERT_FALSE(per_expert.ok());
  EXPECT_NE(per_expert.status().to_string().find("separate tensors"), std::string::npos)
      << per_expert.status().to_string();
}

}  // namespace
}  // namespace vosti
