// Vosti's logits against HF transformers' (tests/golden/make_golden.py), for the real
// default model and a random-weight model of each family (Gemma 3: two, one of them a
// Gemma3ForConditionalGeneration checkpoint; and its llama.cpp-style GGUF; Qwen3-MoE: two, and a
// llama.cpp-style qwen3moe GGUF; Mixtral, and its llama.cpp-style GGUF).
//
// Bounds: the reference is f32 PyTorch (eager attention); Vosti computes in f32 with
// other reduction orders (SIMD lanes, tiled online softmax), so each position's
// logits differ by rounding only. Measured worst cases: 4e-6 relative for the
// 3-layer models, 6.4e-6 for the 30-layer default model; the bounds (2e-5 and 2e-4)
// leave head room while catching any real bug (a wrong rotary layout, a norm or a
// bf16-rounded rope table each give > 1e-4). Argmax must agree everywhere (the
// fixtures' smallest top-1 margin is 0.06, far above the error).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/thread_pool.h"
#include "kernels/kernel_backend.h"
#include "model/model.h"
#include "runner/single_sequence.h"
#include "tests/test_paths.h"

namespace vosti {
namespace {

const std::string kGoldenDir = vosti::testing::source_dir() + "/tests/golden";

nlohmann::json read_json(const std::string& path) {
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << path;
  return nlohmann::json::parse(in);
}

int64_t argmax(const float* row, int64_t n) {
  int64_t best = 0;
  for (int64_t i = 1; i < n; ++i)
    if (row[i] > row[best]) best = i;
  return best;
}

double rel_error(const std::vector<double>& out, const std::vector<double>& ref) {
  double num = 0, den = 0;
  for (size_t i = 0; i < out.size(); ++i) {
    num += (out[i] - ref[i]) * (out[i] - ref[i]);
    den += ref[i] * ref[i];
  }
  return std::sqrt(num / den);
}

struct BackendCase {
  const char* name;
  std::unique_ptr<KernelBackend> (*make)(ThreadPool*);
};
std::unique_ptr<KernelBackend> make_ref(ThreadPool*) { return make_ref_backend(); }
const BackendCase kBackends[] = {{"ref", make_ref}, {"cpu", make_cpu_backend}};

class TinyGolden : public ::testing::TestWithParam<std::string> {};

TEST_P(TinyGolden, MatchesTransformers) {
  const auto golden = read_json(kGoldenDir + "/data/" + GetParam() + ".json");
  auto model = Model::load(kGoldenDir + "/" + golden["model"].get<std::string>());
  ASSERT_TRUE(model.ok()) << model.status().to_string();
  const int64_t vocab = (*model)->config().vocab_size;
  ThreadPool pool(2);
  for (const auto& backend : kBackends) {
    auto kernels = backend.make(&pool);
    double worst = 0;
    int64_t routed = 0;
    for (const auto& prompt : golden["prompts"]) {
      const auto tokens = prompt["tokens"].get<std::vector<int32_t>>();
      SingleSequence seq(**model, *kernels, static_cast<int64_t>(tokens.size()));
      const std::vector<float> logits = seq.append(tokens, /*all_logits=*/true);
      if (prompt.contains("routed_experts")) {
        // transformers' router choices, per position and MoE layer: Vosti's routing picks the same.
        std::vector<int32_t> want;
        for (const auto& position : prompt["routed_experts"])
          for (const auto& layer : position)
            for (const auto& e : layer) want.push_back(e.get<int32_t>());
        EXPECT_EQ(seq.routed_experts(), want) << backend.name;
        routed += static_cast<int64_t>(want.size());
      }
      for (size_t p = 0; p < tokens.size(); ++p) {
        const auto ref = prompt["logits"][p].get<std::vector<double>>();
        ASSERT_EQ(static_cast<int64_t>(ref.size()), vocab);
        std::vector<double> out(logits.begin() + static_cast<int64_t>(p) * vocab,
                                logits.begin() + static_cast<int64_t>(p + 1) * vocab);
        const double err = rel_error(out, ref);
        worst = std::max(worst, err);
        EXPECT_LT(err, 2e-5) << backend.name << " position " << p;
        const auto ref_max = std::max_element(ref.begin(), ref.end()) - ref.begin();
        EXPECT_EQ(argmax(logits.data() + static_cast<int64_t>(p) * vocab, vocab), ref_max)
            << backend.name << " position " << p;
      }
    }
    std::printf("[ golden ] %s %s worst relative error %.3g\n", GetParam().c_str(), backend.name, worst);
    if (routed > 0)
      std::printf("[ golden ] %s %s %lld routed experts as transformers'\n", GetParam().c_str(), backend.name,
                  static_cast<long long>(routed));
  }
}

INSTANTIATE_TEST_SUITE_P(Families, TinyGolden,
                         ::testing::Values("llama-tiny", "llama3-tiny-tied-sharded", "qwen2-tiny-bf16", "qwen3-tiny",
                                           "mistral-tiny-window", "gemma3-tiny", "gemma3-tiny-mm-bf16-softcap",
                                           "qwen3-moe-tiny", "qwen3-moe-tiny-dense1-bf16", "mixtral-tiny"),
                         [](const auto& info) {
                           std::string s = info.param;
                           for (auto& ch : s)
                             if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           return s;
                         });

// A tiny model written as llama.cpp writes its GGUF (make_golden.py) gives the same logits bit for
// bit as its safetensors directory (so the same distance to transformers), on both CPU backends.
void expect_gguf_matches_safetensors(const std::string& name) {
  const auto golden = read_json(kGoldenDir + "/data/" + name + ".json");
  auto from_gguf = Model::load(kGoldenDir + "/models/" + name + ".gguf");
  ASSERT_TRUE(from_gguf.ok()) << from_gguf.status().to_string();
  auto from_st = Model::load(kGoldenDir + "/models/" + name);
  ASSERT_TRUE(from_st.ok()) << from_st.status().to_string();
  const ModelConfig& g = (*from_gguf)->config();
  const ModelConfig& h = (*from_st)->config();
  ASSERT_EQ(g.layers.size(), h.layers.size());
  for (size_t i = 0; i < g.layers.size(); ++i) {
    EXPECT_EQ(g.layers[i].sliding_window, h.layers[i].sliding_window) << "layer " << i;
    EXPECT_TRUE(g.layers[i].same_rope(h.layers[i])) << "layer " << i;
    EXPECT_TRUE(g.layers[i].moe == h.layers[i].moe) << "layer " << i;
  }
  EXPECT_EQ(g.attention_scale, h.attention_scale);
  EXPECT_EQ(g.embed_scale, h.embed_scale);
  ThreadPool pool(2);
  for (const auto& backend : kBackends) {
    auto kernels = backend.make(&pool);
    for (const auto& prompt : golden["prompts"]) {
      const auto tokens = prompt["tokens"].get<std::vector<int32_t>>();
      SingleSequence a(**from_gguf, *kernels, static_cast<int64_t>(tokens.size()));
      SingleSequence b(**from_st, *kernels, static_cast<int64_t>(tokens.size()));
      const std::vector<float> la = a.append(tokens, /*all_logits=*/true);
      const std::vector<float> lb = b.append(tokens, /*all_logits=*/true);
      ASSERT_EQ(la.size(), lb.size());
      EXPECT_EQ(std::memcmp(la.data(), lb.data(), la.size() * sizeof(float)), 0) << backend.name;
    }
  }
}

// Gemma 3: norms stored as 1 + w, f32 tensors.
TEST(GgufGolden, Gemma3GgufMatchesItsSafetensors) { expect_gguf_matches_safetensors("gemma3-tiny"); }

// Qwen3-MoE: the experts stacked in ffn_{gate,up,down}_exps [n_expert, ...], read as one slice an
// expert; the router ffn_gate_inp; expert_count / expert_used_count / expert_feed_forward_length.
TEST(GgufGolden, Qwen3MoeGgufMatchesItsSafetensors) {
  auto model = Model::load(kGoldenDir + "/models/qwen3-moe-tiny.gguf");
  ASSERT_TRUE(model.ok()) << model.status().to_string();
  const MoeSpec moe = (*model)->config().moe();
  EXPECT_EQ(moe.num_experts, 8);
  EXPECT_EQ(moe.top_k, 2);
  EXPECT_EQ(moe.intermediate_size, 48);
  EXPECT_TRUE(moe.norm_topk_prob);
  expect_gguf_matches_safetensors("qwen3-moe-tiny");
}

// Mixtral as llama.cpp converts it: architecture "llama" with llama.expert_count, q/k rows
// permuted (undone by the loader), the experts stacked.
TEST(GgufGolden, MixtralGgufMatchesItsSafetensors) {
  auto model = Model::load(kGoldenDir + "/models/mixtral-tiny.gguf");
  ASSERT_TRUE(model.ok()) << model.status().to_string();
  EXPECT_EQ((*model)->config().arch, Architecture::kMixtral);
  EXPECT_EQ((*model)->config().moe(), (MoeSpec{4, 2, true, 96}));
  expect_gguf_matches_safetensors("mixtral-tiny");
}

TEST(RealModelGolden, SmolLM2MatchesTransformers) {
  const char* path = std::getenv("VOSTI_DEFAULT_MODEL");
  if (!path || !*path) GTEST_SKIP() << "VOSTI_DEFAULT_MODEL is not set (scripts/test sets it; run scripts/fetch-model)";
  const auto golden = read_json(kGoldenDir + "/data/smollm2-135m-instruct-q4_1.json");
  auto model = Model::load(path);
  ASSERT_TRUE(model.ok()) << model.status().to_string();
  const int64_t vocab = (*model)->config().vocab_size;
  const auto sampled = golden["sampled_ids"].get<std::vector<int64_t>>();
  ThreadPool pool(2);
  auto kernels = make_cpu_backend(&pool);
  double worst = 0;
  for (const auto& prompt : golden["prompts"]) {
    const auto tokens = prompt["tokens"].get<std::vector<int32_t>>();
    SingleSequence seq(**model, *kernels, static_cast<int64_t>(tokens.size()));
    const std::vector<float> logits = seq.append(tokens, /*all_logits=*/true);
    for (size_t p = 0; p < tokens.size(); ++p) {
      const auto& pos = prompt["positions"][p];
      const float* row = logits.data() + static_cast<int64_t>(p) * vocab;
      std::vector<double> out, ref;
      const auto top_ids = pos["top_ids"].get<std::vector<int64_t>>();
      const auto top_values = pos["top_values"].get<std::vector<double>>();
      const auto sampled_values = pos["sampled_values"].get<std::vector<double>>();
      for (size_t i = 0; i < top_ids.size(); ++i) {
        out.push_back(row[top_ids[i]]);
        ref.push_back(top_values[i]);
      }
      for (size_t i = 0; i < sampled.size(); ++i) {
        out.push_back(row[sampled[i]]);
        ref.push_back(sampled_values[i]);
      }
      const double err = rel_error(out, ref);
      worst = std::max(worst, err);
      EXPECT_LT(err, 2e-4) << "position " << p;
      EXPECT_EQ(argmax(row, vocab), pos["argmax"].get<int64_t>()) << "position " << p;
    }
  }
  std::printf("[ golden ] SmolLM2-135M-Instruct cpu worst relative error %.3g\n", worst);
}

}  // namespace
}  // namespace vosti
