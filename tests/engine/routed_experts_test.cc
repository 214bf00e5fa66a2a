// Routed experts (RequestSpec::routed_experts, vLLM's return_routed_experts): through the engine
// the experts each computed position chose equal transformers' router choices (the golden data)
// whatever the chunking and the neighbours, survive preemption and recomputation unchanged, are
// refused on a dense model, and are returned only when asked.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "engine/engine.h"
#include "engine/live_request.h"
#include "model/model.h"
#include "tests/test_paths.h"

namespace vosti {
namespace {

const std::string kGolden = vosti::testing::source_dir() + "/tests/golden";

std::shared_ptr<const Model> load(const std::string& name) {
  auto model = Model::load(kGolden + "/models/" + name);
  EXPECT_TRUE(model.ok()) << model.status().to_string();
  return model.ok() ? *model : nullptr;
}

std::unique_ptr<Engine> make_engine(std::shared_ptr<const Model> model, EngineConfig c) {
  if (c.num_blocks == 0) c.num_blocks = 64;
  if (c.max_model_len == 0) c.max_model_len = 128;
  c.block_size = 4;
  c.num_threads = 2;
  c.check_invariants = true;
  auto e = Engine::create(std::move(model), c);
  EXPECT_TRUE(e.ok()) << e.status().to_string();
  return e.ok() ? std::move(e).value() : nullptr;
}

struct Finished {
  std::vector<int32_t> tokens;
  RoutedExperts routed;
  FinishReason reason = FinishReason::kNone;
  std::string error;
};

OutputCallback collect(Finished& f) {
  return [&f](const RequestOutput& out) {
    f.tokens.insert(f.tokens.end(), out.new_tokens.begin(), out.new_tokens.end());
    if (!out.finished) {
      EXPECT_TRUE(out.routed_experts.ids.empty()) << "routed experts before the final output";
      return;
    }
    f.routed = out.routed_experts;
    f.reason = out.finish_reason;
    f.error = out.error;
  };
}

void run(Engine& e) {
  for (int i = 0; i < 100000 && e.has_work(); ++i) e.step();
  EXPECT_FALSE(e.has_work());
}

RequestSpec routed_request(std::vector<int32_t> prompt, int32_t max_tokens, uint64_t seed) {
  RequestSpec s;
  s.prompt = std::move(prompt);
  s.max_tokens = max_tokens;
  s.ignore_eos = true;
  s.sampling.temperature = 0.8f;
  s.sampling.seed = seed;
  s.routed_experts = true;
  return s;
}

class RoutedGolden : public ::testing::TestWithParam<std::string> {};

// Each golden prompt, prefilled 3 tokens a step beside a neighbour that generates: the routing of
// every prompt position equals transformers' router choices, position by position.
TEST_P(RoutedGolden, PromptPositionsRouteAsTransformers) {
  std::ifstream in(kGolden + "/data/" + GetParam() + ".json");
  ASSERT_TRUE(in.good());
  const nlohmann::json golden = nlohmann::json::parse(in);
  auto model = load(GetParam());
  ASSERT_NE(model, nullptr);
  EngineConfig c;
  c.max_num_batched_tokens = 3;
  auto engine = make_engine(model, c);
  ASSERT_NE(engine, nullptr);
  int64_t compared = 0;
  for (const auto& prompt : golden["prompts"]) {
    ASSERT_TRUE(prompt.contains("routed_experts"));
    std::vector<int32_t> want;
    int32_t layers = 0, k = 0;
    for (const auto& position : prompt["routed_experts"]) {
      layers = static_cast<int32_t>(position.size());
      for (const auto& layer : position) {
        k = static_cast<int32_t>(layer.size());
        for (const auto& e : layer) want.push_back(e.get<int32_t>());
      }
    }
    Finished neighbour, probe;
    RequestSpec n = routed_request({7, 8, 9, 10, 11}, 12, 5);
    n.routed_experts = false;
    ASSERT_TRUE(engine->add_request(n, collect(neighbour)).ok());
    engine->step();
    // One output token: every prompt position is computed, none of the outputs.
    ASSERT_TRUE(
        engine->add_request(routed_request(prompt["tokens"].get<std::vector<int32_t>>(), 1, 3), collect(probe)).ok());
    run(*engine);
    ASSERT_EQ(probe.reason, FinishReason::kLength) << probe.error;
    EXPECT_EQ(probe.routed.num_layers, layers);
    EXPECT_EQ(probe.routed.top_k, k);
    EXPECT_EQ(probe.routed.ids, want);
    EXPECT_TRUE(neighbour.routed.ids.empty()) << "routing returned to a request that did not ask";
    compared += static_cast<int64_t>(want.size());
  }
  std::printf("[ routed ] %s: %lld router choices as transformers' through the engine\n", GetParam().c_str(),
              static_cast<long long>(compared));
}

INSTANTIATE_TEST_SUITE_P(MoeFamilies, RoutedGolden,
                         ::testing::Values("qwen3-moe-tiny", "qwen3-moe-tiny-dense1-bf16", "mixtral-tiny"),
                         [](const auto& info) {
                           std::string s = info.param;
                           for (auto& ch : s)
                             if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           return s;
                         });

// A generating request's routing covers prompt + outputs - 1 positions, and is the same alone, in
// a crowd that preempts it (its recomputed positions are checked against the first computation),
// and under another token budget.
TEST(RoutedExperts, CrowdAndPreemptionRouteAsAlone) {
  auto model = load("qwen3-moe-tiny");
  ASSERT_NE(model, nullptr);
  const RequestSpec probe = routed_request({3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5}, 20, 42);
  const auto alone = [&] {
    auto engine = make_engine(model, EngineConfig{});
    Finished f;
    EXPECT_TRUE(engine->add_request(probe, collect(f)).ok());
    run(*engine);
    return f;
  }();
  ASSERT_EQ(alone.tokens.size(), 20u);
  ASSERT_EQ(alone.routed.num_positions(), static_cast<int64_t>(probe.prompt.size() + alone.tokens.size() - 1));

  EngineConfig tight;
  tight.num_blocks = 12;  // 48 slots: five requests of 31 tokens cannot all stay resident
  tight.max_model_len = 40;
  tight.max_num_batched_tokens = 5;
  auto engine = make_engine(model, tight);
  std::vector<Finished> others(4);
  for (size_t i = 0; i < others.size(); ++i) {
    RequestSpec s = routed_request({static_cast<int32_t>(i + 20), 2, 3, 4, 5, 6, 7}, 24, 100 + i);
    s.routed_experts = i % 2 == 0;
    ASSERT_TRUE(engine->add_request(s, collect(others[i])).ok());
  }
  Finished crowd;
  ASSERT_TRUE(engine->add_request(probe, collect(crowd)).ok());
  run(*engine);
  EXPECT_GT(engine->stats().num_preemptions, 0) << "the crowd preempted nobody: the test lost its point";
  ASSERT_EQ(crowd.reason, FinishReason::kLength) << crowd.error;
  EXPECT_EQ(crowd.tokens, alone.tokens);
  EXPECT_EQ(crowd.routed.ids, alone.routed.ids);
  for (const Finished& o : others) EXPECT_EQ(o.reason, FinishReason::kLength) << o.error;
}

// Speculative decoding (n-gram drafts on a prompt that repeats itself): a rejected draft's position
// is computed again with the target's token, and only what stays is reported -- the same routing,
// tokens and length as without speculation.
TEST(RoutedExperts, SpeculationReportsWhatPlainDecodingDoes) {
  auto model = load("qwen3-moe-tiny");
  ASSERT_NE(model, nullptr);
  RequestSpec probe = routed_request({5, 6, 7, 8, 5, 6, 7, 8, 5, 6, 7, 8, 5, 6}, 24, 9);
  probe.sampling.temperature = 0.0f;
  const auto run_with = [&](const std::string& speculative) {
    EngineConfig c;
    c.speculative_config = speculative;
    auto engine = make_engine(model, c);
    Finished f;
    EXPECT_TRUE(engine->add_request(probe, collect(f)).ok());
    run(*engine);
    return std::make_pair(f, engine->stats());
  };
  const auto [plain, plain_stats] = run_with("");
  const auto [spec, spec_stats] =
      run_with(R"({"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_min": 1, "prompt_lookup_max": 3})");
  ASSERT_EQ(spec.reason, FinishReason::kLength) << spec.error;
  EXPECT_EQ(spec.tokens, plain.tokens);
  EXPECT_EQ(spec.routed.ids, plain.routed.ids);
  EXPECT_EQ(spec.routed.num_positions(), static_cast<int64_t>(probe.prompt.size() + plain.tokens.size() - 1));
  EXPECT_GT(spec_stats.num_draft_tokens, 0) << "no drafts: the test lost its point";
}

// A dense model has no experts to report: the request is refused, naming why.
TEST(RoutedExperts, ADenseModelRefusesTheRequest) {
  auto model = load("qwen3-tiny");
  ASSERT_NE(model, nullptr);
  auto engine = make_engine(model, EngineConfig{});
  auto id = engine->add_request(routed_request({1, 2, 3}, 2, 1), nullptr);
  ASSERT_FALSE(id.ok());
  EXPECT_NE(id.status().message().find("mixture-of-experts"), std::string::npos) << id.status().to_string();
}

// Unasked, nothing comes back; asked, the prompt's positions skip the prefix cache (none cached).
TEST(RoutedExperts, OnlyWhenAskedAndNeverFromTheCache) {
  auto model = load("mixtral-tiny");
  ASSERT_NE(model, nullptr);
  EngineConfig c;
  c.enable_prefix_caching = true;
  auto engine = make_engine(model, c);
  const std::vector<int32_t> prompt = {9, 8, 7, 6, 5, 4, 3, 2, 1, 9, 8, 7};
  Finished plain, warm, routed;
  RequestSpec s = routed_request(prompt, 4, 7);
  s.routed_experts = false;
  ASSERT_TRUE(engine->add_request(s, collect(plain)).ok());
  run(*engine);
  EXPECT_TRUE(plain.routed.ids.empty());
  std::vector<int32_t> cached;
  ASSERT_TRUE(engine
                  ->add_request(s,
                                [&](const RequestOutput& out) {
                                  cached.push_back(out.num_cached_prompt_tokens);
                                  collect(warm)(out);
                                })
                  .ok());
  run(*engine);
  ASSERT_FALSE(cached.empty());
  EXPECT_GT(cached.back(), 0) << "the plain request's prompt was not cached: the test lost its point";
  s.routed_experts = true;
  int32_t routed_cached = -1;
  ASSERT_TRUE(engine
                  ->add_request(s,
                                [&](const RequestOutput& out) {
                                  routed_cached = out.num_cached_prompt_tokens;
                                  collect(routed)(out);
                                })
                  .ok());
  run(*engine);
  EXPECT_EQ(routed_cached, 0);
  EXPECT_EQ(routed.tokens, plain.tokens);
  EXPECT_EQ(routed.routed.num_positions(), static_cast<int64_t>(prompt.size() + routed.tokens.size() - 1));
}

// The check a preempted request's recomputation passes through: a recomputed position must route
// as it did the first time; a different expert, or positions arriving past a gap, fail loudly.
TEST(RoutedExperts, ARecomputedPositionMustRouteAsBefore) {
  RequestSpec spec = routed_request({1, 2, 3}, 4, 1);
  LiveRequest r(7, spec, StopConditions{}, nullptr, nullptr);
  const std::vector<int32_t> first = {0, 1, 2, 3, 1, 3, 0, 2};  // 2 positions x 2 layers x top-2
  ASSERT_TRUE(r.record_routed(0, first, 2, 2).ok());
  EXPECT_TRUE(r.record_routed(0, first, 2, 2).ok()) << "the same routing recomputed";
  ASSERT_TRUE(r.record_routed(1, std::vector<int32_t>{1, 3, 0, 2, 4, 5, 6, 7}, 2, 2).ok()) << "overlap + new";
  const Status changed = r.record_routed(1, std::vector<int32_t>{1, 3, 0, 3}, 2, 2);
  ASSERT_FALSE(changed.ok());
  EXPECT_NE(changed.message().find("position 1"), std::string::npos) << changed.to_string();
  EXPECT_NE(changed.message().find("MoE layer 1"), std::string::npos) << changed.to_string();
  EXPECT_FALSE(r.record_routed(5, std::vector<int32_t>{0, 1, 2, 3}, 2, 2).ok()) << "a gap";
}

}  // namespace
}  // namespace vosti
