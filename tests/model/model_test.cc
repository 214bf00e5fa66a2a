// The model layer: config parsing and its errors, loading errors, and the forward's
// independence from how a sequence is chunked (bit for bit).
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "core/thread_pool.h"
#include "model/model.h"
#include "runner/single_sequence.h"
#include "tests/test_paths.h"

namespace vosti {
namespace {

const std::string kModels = vosti::testing::source_dir() + "/tests/golden/models";

nlohmann::json tiny_config() {
  std::ifstream in(kModels + "/llama-tiny/config.json");
  return nlohmann::json::parse(in);
}

TEST(ModelConfig, ParsesEveryFamily) {
  for (const char* name : {"llama-tiny", "llama3-tiny-tied-sharded", "qwen2-tiny-bf16", "qwen3-tiny"}) {
    std::ifstream in(kModels + "/" + name + "/config.json");
    auto c = ModelConfig::from_hf_config(nlohmann::json::parse(in), name);
    ASSERT_TRUE(c.ok()) << c.status().to_string();
    EXPECT_EQ(c->hidden_size, 64);
  }
}

TEST(ModelConfig, MissingKeysAndBadValuesNameTheProblem) {
  auto j = tiny_config();
  j.erase("hidden_size");
  auto c = ModelConfig::from_hf_config(j, "x/config.json");
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("hidden_size"), std::string::npos) << c.status().message();
  EXPECT_NE(c.status().message().find("x/config.json"), std::string::npos);

  j = tiny_config();
  j["num_key_value_heads"] = 3;
  c = ModelConfig::from_hf_config(j, "cfg");
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("num_kv_heads"), std::string::npos) << c.status().message();

  j = tiny_config();
  j["model_type"] = "gpt2";
  c = ModelConfig::from_hf_config(j, "cfg");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), StatusCode::kUnimplemented);

  j = tiny_config();
  j["model_type"] = "mistral";
  j["sliding_window"] = -3;
  c = ModelConfig::from_hf_config(j, "cfg");
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("sliding_window must be a positive integer"), std::string::npos)
      << c.status().message();

  j = tiny_config();
  j["model_type"] = "qwen2";
  j["use_sliding_window"] = true;
  c = ModelConfig::from_hf_config(j, "cfg");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), StatusCode::kUnimplemented);

  j = tiny_config();
  j["num_hidden_layers"] = "three";
  c = ModelConfig::from_hf_config(j, "cfg");
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("num_hidden_layers"), std::string::npos);
}

// Mistral's sliding window (transformers: position p attends to j with p - j < window); a
// Llama config's stray field and a null window mean none.
TEST(ModelConfig, MistralSlidingWindowIsRead) {
  auto j = tiny_config();
  j["model_type"] = "mistral";
  j["sliding_window"] = 4096;
  auto c = ModelConfig::from_hf_config(j, "cfg");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->sliding_window, 4096);
  j["sliding_window"] = nullptr;
  c = ModelConfig::from_hf_config(j, "cfg");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->sliding_window, 0);
  j["model_type"] = "llama";
  j["sliding_window"] = 16;
  c = ModelConfig::from_hf_config(j, "cfg");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->sliding_window, 0);
  EXPECT_EQ(attention_window_first(10, 0), 0);
  EXPECT_EQ(attention_window_first(3, 4), 0);
  EXPECT_EQ(attention_window_first(4, 4), 1);  // positions 1..4: four of them
  EXPECT_EQ(attention_window_first(100, 4), 97);
}

TEST(ModelConfig, Llama3RopeScalingMatchesTransformersFormula) {
  ModelConfig c;
  c.head_dim = 16;
  c.rope_theta = 500000.0;
  const auto plain = c.rope_inv_freq();
  c.rope_scaling.kind = RopeScaling::Kind::kLlama3;
  c.rope_scaling.factor = 8.0;
  c.rope_scaling.original_max_position_embeddings = 64;
  const auto scaled = c.rope_inv_freq();
  // High frequencies (short wavelengths) are kept, the lowest are divided by the factor.
  EXPECT_EQ(scaled[0], plain[0]);
  EXPECT_FLOAT_EQ(scaled.back(), plain.back() / 8.0f);
}

TEST(ModelLoad, MissingPathAndShapeMismatchAreClearErrors) {
  auto m = Model::load("/nonexistent/model.gguf");
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), StatusCode::kNotFound);

  // A config that disagrees with the stored tensors.
  const auto dir = std::filesystem::temp_directory_path() / "vosti_model_test_mismatch";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  std::filesystem::copy_file(kModels + "/llama-tiny/model.safetensors", dir / "model.safetensors");
  auto j = tiny_config();
  j["intermediate_size"] = 96;
  std::ofstream(dir / "config.json") << j.dump();
  m = Model::load(dir.string());
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("shape"), std::string::npos) << m.status().message();
  EXPECT_NE(m.status().message().find("mlp.gate_proj"), std::string::npos) << m.status().message();
  std::filesystem::remove_all(dir);
}

// F_D does not depend on chunking: a sequence computed in one prefill, token by token,
// or in ragged chunks gives the same bits at every position (kernel contract + rule 4).
TEST(ModelForward, ChunkingDoesNotChangeABit) {
  for (const char* name : {"llama-tiny", "qwen2-tiny-bf16", "qwen3-tiny"}) {
    auto model = Model::load(kModels + "/" + name);
    ASSERT_TRUE(model.ok()) << model.status().to_string();
    const int64_t vocab = (*model)->config().vocab_size;
    ThreadPool pool(2);
    auto kernels = make_cpu_backend(&pool);
    std::vector<int32_t> tokens(75);
    for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<int32_t>((i * 37 + 11) % vocab);

    SingleSequence whole(**model, *kernels, 75, 16);
    const auto all = whole.append(tokens, true);

    for (int chunk : {1, 3, 16, 29}) {
      SingleSequence seq(**model, *kernels, 75, 16);
      std::vector<float> got;
      for (size_t b = 0; b < tokens.size(); b += static_cast<size_t>(chunk)) {
        const size_t e = std::min(tokens.size(), b + static_cast<size_t>(chunk));
        const auto part = seq.append(std::span<const int32_t>(tokens).subspan(b, e - b), true);
        got.insert(got.end(), part.begin(), part.end());
      }
      ASSERT_EQ(got.size(), all.size());
      EXPECT_EQ(std::memcmp(got.data(), all.data(), all.size() * sizeof(float)), 0) << name << " chunk " << chunk;
    }
  }
}

}  // namespace
}  // namespace vosti
