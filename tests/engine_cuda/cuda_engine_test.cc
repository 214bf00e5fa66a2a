// The engine on the GPU (runner/cuda): the determinism harness's whole matrix on the tiny
// golden families with the device sampler checked against the host sampler on every sampled
// row the GPU produced; the same request among many others gives the digests it gets alone;
// the KV pool sized from the memory fraction; requests the pool cannot hold get a clear error;
// the mixture-of-experts families (Qwen3-MoE, Mixtral) in the harness, their routed experts
// returned for every position and compared with the CPU engine's; speculative decoding (replayed,
// n-gram and draft-model drafts) equal to plain decode.
// GPU only (skips with "no CUDA device").
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "engine/engine.h"
#include "engine/replay_drafter.h"
#include "runner/cuda/device_rows.h"
#include "runner/load_device_model.h"
#include "sample/sampler.h"
#include "tests/kernels_cuda/cuda_test_util.h"
#include "tests/support/planted.h"
#include "tests/test_paths.h"
#include "tools/verify/verify_harness.h"

namespace vosti {
namespace {

const std::string kModels = vosti::testing::source_dir() + "/tests/golden/models";

EngineConfig cuda_reference() {
  EngineConfig c;
  c.device = "cuda";
  c.block_size = 16;
  c.max_model_len = 128;
  c.num_blocks = 64;
  c.check_invariants = true;
  c.check_device_sampler = true;
  // Splits of 64 positions: the harness's contexts (up to 128) then run the attention's split
  // states, folded in one CTA and merged across CTAs.
  c.attention_split = 64;
  return c;
}

class CudaHarness : public ::testing::TestWithParam<std::string> {};

TEST_P(CudaHarness, EveryVariationIsBitwiseIdentical) {
  VOSTI_SKIP_WITHOUT_CUDA();
  auto model = load_device_model(kModels + "/" + GetParam(), "cuda");
  ASSERT_TRUE(model.ok()) << model.status().to_string();
  const EngineConfig ref = cuda_reference();
  auto report = run_determinism_harness(*model, make_harness_requests((*model)->config(), false, 7), ref,
                                        make_variations(ref, false));
  ASSERT_TRUE(report.ok()) << report.status().to_string();
  std::printf("%s", format_report_table({*report}).c_str());
  bool preempted = false, hit = false;
  for (const auto& r : report->results) {
    EXPECT_TRUE(r.identical) << r.name << ": " << r.first_difference;
    EXPECT_GT(r.num_positions, 0) << r.name;
    preempted |= r.num_preemptions > 0;
    hit |= r.num_prefix_hit_tokens > 0;
  }
  EXPECT_TRUE(preempted) << "no variation preempted a request";
  EXPECT_TRUE(hit) << "no variation hit the prefix cache";
}

INSTANTIATE_TEST_SUITE_P(Families, CudaHarness,
                         ::testing::Values("llama-tiny", "llama3-tiny-tied-sharded", "qwen2-tiny-bf16", "qwen3-tiny",
                                           "mistral-tiny-window", "gemma3-tiny", "gemma3-tiny-mm-bf16-softcap",
                                           "qwen3-moe-tiny", "mixtral-tiny", "qwen3-moe-tiny-dense1-bf16"),
                         [](const auto& info) {
                           std::string s = info.param;
                           for (auto& ch : s)
                             if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           return s;
                         });

// The routing the GPU returns (RequestSpec::routed_experts): one record per computed position, every
// MoE layer's top_k experts ascending and in range, the prompt positions' records equal the CPU
// engine's but where a near-tied router flips under the bf16 policy (the tiny models' random
// routers; a record taken from the wrong token row would agree at chance level, ~1/4 here).
TEST(CudaEngine, RoutedExpertsComeBackForEveryPositionAsTheCpuRoutes) {
  VOSTI_SKIP_WITHOUT_CUDA();
  for (const std::string name : {"qwen3-moe-tiny", "mixtral-tiny"}) {
    RequestSpec probe;
    probe.prompt = {3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8, 9, 7, 9, 3, 2, 3, 8, 4};
    probe.max_tokens = 12;
    probe.ignore_eos = true;
    probe.sampling.temperature = 0.0f;
    probe.routed_experts = true;
    const auto routed_on = [&](const std::string& device) {
      auto model = load_device_model(kModels + "/" + name, device);
      EXPECT_TRUE(model.ok()) << model.status().to_string();
      EngineConfig c = device == "cuda" ? cuda_reference() : EngineConfig{};
      c.device = device;
      c.num_blocks = 64;
      c.max_model_len = 128;
      c.max_num_batched_tokens = 7;  // the prompt in chunks
      auto engine = Engine::create(*model, c);
      EXPECT_TRUE(engine.ok()) << engine.status().to_string();
      RoutedExperts routed;
      std::string error;
      EXPECT_TRUE((*engine)
                      ->add_request(probe,
                                    [&](const RequestOutput& o) {
                                      if (!o.finished) return;
                                      routed = o.routed_experts;
                                      error = o.error;
                                    })
                      .ok());
      while ((*engine)->has_work()) (*engine)->step();
      EXPECT_EQ(error, "") << device;
      return routed;
    };
    const RoutedExperts gpu = routed_on("cuda"), cpu = routed_on("cpu");
    ASSERT_EQ(gpu.num_positions(), static_cast<int64_t>(probe.prompt.size() + probe.max_tokens - 1)) << name;
    ASSERT_EQ(gpu.num_layers, cpu.num_layers) << name;
    ASSERT_EQ(gpu.top_k, cpu.top_k) << name;
    const size_t per = static_cast<size_t>(gpu.num_layers * gpu.top_k), k = static_cast<size_t>(gpu.top_k);
    for (size_t i = 0; i < gpu.ids.size(); ++i) {
      ASSERT_GE(gpu.ids[i], 0) << name << " entry " << i;
      if (i % k > 0) {
        ASSERT_LT(gpu.ids[i - 1], gpu.ids[i]) << name << ": not ascending at entry " << i;
      }
    }
    size_t same = 0;
    const size_t prompt_entries = probe.prompt.size() * per;
    for (size_t i = 0; i < prompt_entries; ++i) same += gpu.ids[i] == cpu.ids[i] ? 1 : 0;
    EXPECT_GE(same * 10, prompt_entries * 9)
        << name << ": " << same << " of " << prompt_entries << " prompt entries route as on the CPU";
    std::printf("[ routed ] %s: %zu of %zu prompt entries as on the CPU\n", name.c_str(), same, prompt_entries);
  }
}

// One request, then the same request among 24 others (random prompts, sampled, staggered):
// the same tokens and the same digest at every position.
TEST(CudaEngine, TheSameRequestInACrowdGetsTheDigestsItGetsAlone) {
  VOSTI_SKIP_WITHOUT_CUDA();
  auto model = load_device_model(kModels + "/qwen3-tiny", "cuda");
  ASSERT_TRUE(model.ok()) << model.status().to_string();
  EngineConfig c = cuda_reference();
  c.num_blocks = 256;
  c.max_num_batched_tokens = 96;
  RequestSpec probe;
  probe.prompt = {5, 17, 99, 3, 250, 7, 7, 1};
  probe.max_tokens = 20;
  probe.ignore_eos = true;
  probe.sampling.temperature = 0.8f;
  probe.sampling.top_p = 0.9f;
  probe.sampling.seed = 42;
  probe.sampling.num_top_logprobs = 3;
  probe.logits_digests = true;
  const auto run = [&](int others) {
    auto engine = Engine::create(*model, c);
    EXPECT_TRUE(engine.ok()) << engine.status().to_string();
    std::vector<RequestOutput> seen;
    std::mt19937 rng(static_cast<uint32_t>(others));
    for (int i = 0; i < others; ++i) {
      RequestSpec s;
      for (int k = 0; k < 3 + static_cast<int>(rng() % 30); ++k) s.prompt.push_back(static_cast<int32_t>(rng() % 320));
      s.max_tokens = 5 + static_cast<int32_t>(rng() % 30);
      s.sampling.temperature = 1.0f;
      s.sampling.seed = rng();
      s.logits_digests = i % 2 == 0;
      EXPECT_TRUE((*engine)->add_request(s, nullptr).ok());
      if (i == others / 2) (*engine)->step();
    }
    std::vector<LogitsDigest> digests;
    std::vector<int32_t> tokens;
    bool done = false;
    EXPECT_TRUE((*engine)
                    ->add_request(probe,
                                  [&](const RequestOutput& o) {
                                    digests.insert(digests.end(), o.new_digests.begin(), o.new_digests.end());
                                    tokens.insert(tokens.end(), o.new_tokens.begin(), o.new_tokens.end());
                                    done |= o.finished;
                                  })
                    .ok());
    while ((*engine)->has_work()) (*engine)->step();
    EXPECT_TRUE(done);
    return std::make_pair(tokens, digests);
  };
  const auto alone = run(0);
  ASSERT_EQ(alone.first.size(), 20u);
  ASSERT_EQ(alone.second.size(), 20u);
  for (int others : {1, 7, 24}) {
    const auto crowd = run(others);
    EXPECT_EQ(crowd.first, alone.first) << others << " neighbours";
    EXPECT_EQ(crowd.second, alone.second) << others << " neighbours";
  }
}

// The probe's outputs from a new engine under `c`, beside a 3-token neighbour that keeps decode
// steps in CUDA graphs; also the probe's tokens, in order.
std::vector<RequestOutput> run_beside_a_neighbour(const std::shared_ptr<const DeviceModel>& model,
                                                  const EngineConfig& c, const RequestSpec& probe) {
  auto engine = Engine::create(model, c);
  EXPECT_TRUE(engine.ok()) << engine.status().to_string();
  if (!engine.ok()) return {};
  RequestSpec other = probe;
  other.prompt = {9, 9, 4};
  other.return_logits = false;
  other.sampling_masks = false;
  EXPECT_TRUE((*engine)->add_request(other, nullptr).ok());
  std::vector<RequestOutput> outs;
  EXPECT_TRUE((*engine)->add_request(probe, [&](const RequestOutput& o) { outs.push_back(o); }).ok());
  while ((*engine)->has_work()) (*engine)->step();
  return outs;
}

// A qwen3-tiny probe that samples with top-k and top-p and returns its rows.
RequestSpec sampling_probe(uint64_t seed) {
  RequestSpec probe;
  probe.prompt = {5, 17, 99, 3, 250, 7, 7, 1};
  probe.max_tokens = 16;
  probe.ignore_eos = true;
  probe.return_logits = true;
  probe.sampling.temperature = 0.8f;
  probe.sampling.top_k = 40;
  probe.sampling.top_p = 0.9f;
  probe.sampling.repetition_penalty = 1.2f;
  probe.sampling.seed = seed;
  probe.sampling.num_top_logprobs = 5;
  return probe;
}

struct ProbeRun {
  std::vector<int32_t> tokens;
  std::vector<ScoredToken> scored;
  std::vector<std::vector<float>> rows;
  std::vector<SamplingSupport> masks;
};

ProbeRun gather(const std::vector<RequestOutput>& outs) {
  ProbeRun g;
  for (const RequestOutput& o : outs) {
    g.tokens.insert(g.tokens.end(), o.new_tokens.begin(), o.new_tokens.end());
    g.scored.insert(g.scored.end(), o.new_logprobs.begin(), o.new_logprobs.end());
    g.rows.insert(g.rows.end(), o.new_logits.begin(), o.new_logits.end());
    g.masks.insert(g.masks.end(), o.new_sampling_masks.begin(), o.new_sampling_masks.end());
  }
  return g;
}

// logprobs_mode on the GPU: raw_logits from the device's values, the processed modes from the host
// sampler on the copied row; in every mode the same tokens and rows, and each position's values
// equal the host sampler's definition applied to the row the engine returned.
TEST(CudaEngine, EveryLogprobsModeReportsTheHostDefinitionOnTheRowsItReturned) {
  VOSTI_SKIP_WITHOUT_CUDA();
  auto model = load_device_model(kModels + "/qwen3-tiny", "cuda");
  ASSERT_TRUE(model.ok()) << model.status().to_string();
  const RequestSpec probe = sampling_probe(9);
  const auto run = [&](const char* mode) {
    EngineConfig c = cuda_reference();
    c.logprobs_mode = mode;
    return gather(run_beside_a_neighbour(*model, c, probe));
  };
  const ProbeRun raw = run("raw_logprobs");
  ASSERT_EQ(raw.tokens.size(), 16u);
  for (const char* name : {"raw_logprobs", "raw_logits", "processed_logprobs", "processed_logits"}) {
    SCOPED_TRACE(name);
    LogprobsMode mode{};
    ASSERT_TRUE(parse_logprobs_mode(name, mode));
    const ProbeRun g = run(name);
    ASSERT_EQ(g.tokens, raw.tokens);
    ASSERT_EQ(g.rows.size(), raw.rows.size());
    SamplerScratch scratch;
    for (size_t i = 0; i < g.rows.size(); ++i) {
      ASSERT_EQ(std::memcmp(g.rows[i].data(), raw.rows[i].data(), g.rows[i].size() * sizeof(float)), 0) << i;
      const std::span<const int32_t> before(raw.tokens.data(), i);
      const ScoredToken want =
          sample_token(g.rows[i], probe.sampling, 9, static_cast<int64_t>(i), probe.prompt, before, scratch, mode);
      EXPECT_EQ(g.scored[i].token, want.token) << i;
      EXPECT_EQ(std::memcmp(&g.scored[i].logprob, &want.logprob, sizeof(float)), 0) << i;
      ASSERT_EQ(g.scored[i].top.size(), want.top.size()) << i;
      for (size_t k = 0; k < want.top.size(); ++k) {
        EXPECT_EQ(g.scored[i].top[k].token, want.top[k].token) << i;
        EXPECT_EQ(std::memcmp(&g.scored[i].top[k].logprob, &want.top[k].logprob, sizeof(float)), 0) << i;
      }
    }
  }
}

// Sampling masks on the GPU: such rows are finished by the host sampler from the copied row, so
// each position's support is the host's on the row the engine returned; the tokens are those of
// the same request without masks.
TEST(CudaEngine, SamplingMasksAreTheHostSupportOnTheReturnedRows) {
  VOSTI_SKIP_WITHOUT_CUDA();
  auto model = load_device_model(kModels + "/qwen3-tiny", "cuda");
  ASSERT_TRUE(model.ok()) << model.status().to_string();
  RequestSpec probe = sampling_probe(21);
  const ProbeRun plain = gather(run_beside_a_neighbour(*model, cuda_reference(), probe));
  probe.sampling_masks = true;
  const ProbeRun g = gather(run_beside_a_neighbour(*model, cuda_reference(), probe));
  ASSERT_EQ(g.tokens, plain.tokens);
  ASSERT_EQ(g.masks.size(), 16u);
  ASSERT_EQ(g.rows.size(), 16u);
  SamplerScratch scratch;
  for (size_t i = 0; i < g.masks.size(); ++i) {
    SamplingSupport want;
    const std::span<const int32_t> before(g.tokens.data(), i);
    (void)sample_token(g.rows[i], probe.sampling, 21, static_cast<int64_t>(i), probe.prompt, before, scratch,
                       LogprobsMode::kRawLogprobs, &want);
    EXPECT_EQ(g.masks[i], want) << i;
    EXPECT_FALSE(g.masks[i].every_token) << i;
  }
}

// The planted violation of the attention's split rule (the split follows the step's sequence
// count) makes the harness report a difference: the matrix can see a batch-dependent split.
TEST(CudaEngine, TheHarnessCatchesASplitThatFollowsTheBatch) {
  VOSTI_SKIP_WITHOUT_CUDA();
  auto model = load_device_model(kModels + "/qwen3-tiny", "cuda");
  ASSERT_TRUE(model.ok()) << model.status().to_string();
  const EngineConfig ref = cuda_reference();
  const std::shared_ptr<const DeviceModel> planted = planted_cuda_device_model(*model);
  ASSERT_NE(planted, nullptr);
  auto report = run_determinism_harness(planted, make_harness_requests((*model)->config(), false, 7), ref,
                                        make_variations(ref, false));
  ASSERT_TRUE(report.ok()) << report.status().to_string();
  int differing = 0;
  for (const auto& r : report->results) differing += r.identical ? 0 : 1;
  std::printf("[ cuda engine ] planted batch-dependent split: %d of %zu variations differ\n", differing,
              report->results.size());
  EXPECT_GT(differing, 0) << "the harness did not see a split that follows the batch";
}

// What one request produced under speculation or without it.
struct SpecRecord {
  std::vector<int32_t> tokens;
  std::vector<ScoredToken> logprobs;
  std::vector<LogitsDigest> digests;
  std::string error;
};

// Runs the specs together in one engine on the GPU; returns their records and the engine's stats.
std::pair<std::vector<SpecRecord>, EngineStats> run_specs(const std::shared_ptr<const DeviceModel>& model,
                                                          const std::vector<RequestSpec>& specs, const EngineConfig& c,
                                                          std::shared_ptr<const Drafter> drafter = nullptr) {
  auto engine = Engine::create(model, c, nullptr, std::move(drafter));
  EXPECT_TRUE(engine.ok()) << engine.status().to_string();
  if (!engine.ok()) return {};
  std::vector<SpecRecord> records(specs.size());
  for (size_t i = 0; i < specs.size(); ++i) {
    SpecRecord& r = records[i];
    EXPECT_TRUE((*engine)
                    ->add_request(specs[i],
                                  [&r](const RequestOutput& o) {
                                    r.tokens.insert(r.tokens.end(), o.new_tokens.begin(), o.new_tokens.end());
                                    r.logprobs.insert(r.logprobs.end(), o.new_logprobs.begin(), o.new_logprobs.end());
                                    r.digests.insert(r.digests.end(), o.new_digests.begin(), o.new_digests.end());
                                    if (o.finished) r.error = o.error;
                                  })
                    .ok());
  }
  while ((*engine)->has_work()) (*engine)->step();
  const EngineStats stats = (*engine)->stats();
  EXPECT_EQ(stats.num_blocks_used, 0) << "a finished request left KV blocks behind";
  return {std::move(records), stats};
}

// Speculative decoding on the GPU: a verify chunk's k + 1 rows are sampled on the device (checked
// against the host sampler), and drafts always right, always wrong, n-gram and a draft model (on
// the GPU too) all give every token, logprob and digest of plain decode, greedy and seeded.
TEST(CudaEngine, SpeculationGivesEveryTokenAndDigestOfPlainDecode) {
  VOSTI_SKIP_WITHOUT_CUDA();
  const std::string target = kModels + "/qwen3-tiny";
  auto model = load_device_model(target, "cuda");
  ASSERT_TRUE(model.ok()) << model.status().to_string();
  std::vector<RequestSpec> specs;
  std::vector<int32_t> pattern;
  for (int i = 0; i < 30; ++i) pattern.push_back((i % 7) * 13 + 5);
  for (const std::vector<int32_t>& prompt : {pattern, std::vector<int32_t>{3, 1, 4, 1, 5, 9, 2, 6}}) {
    for (const bool seeded : {false, true}) {
      RequestSpec s;
      s.prompt = prompt;
      s.max_tokens = 40;
      s.ignore_eos = true;
      s.sampling.temperature = seeded ? 0.8f : 0.0f;
      s.sampling.top_p = seeded ? 0.9f : 1.0f;
      s.sampling.seed = seeded ? 77 : 0;
      s.sampling.num_top_logprobs = 2;
      s.logits_digests = true;
      specs.push_back(std::move(s));
    }
  }
  EngineConfig c = cuda_reference();
  c.block_size = 4;  // drafts cross blocks; roll-backs free them
  c.num_blocks = 128;
  c.max_num_batched_tokens = 61;
  const auto [plain, plain_stats] = run_specs(*model, specs, c);
  const auto expect_plain = [&](const std::vector<SpecRecord>& got, const std::string& what) {
    ASSERT_EQ(got.size(), plain.size());
    for (size_t r = 0; r < got.size(); ++r) {
      EXPECT_EQ(got[r].error, "") << what << ", request " << r;
      EXPECT_EQ(got[r].tokens, plain[r].tokens) << what << ", request " << r;
      EXPECT_EQ(got[r].digests, plain[r].digests) << what << ", request " << r;
      ASSERT_EQ(got[r].logprobs.size(), plain[r].logprobs.size()) << what;
      for (size_t p = 0; p < got[r].logprobs.size(); ++p)
        EXPECT_TRUE(same_scored(got[r].logprobs[p], plain[r].logprobs[p])) << what << ", request " << r << " at " << p;
    }
  };
  std::vector<std::pair<std::vector<int32_t>, std::vector<int32_t>>> known;
  for (size_t i = 0; i < specs.size(); ++i) known.push_back({specs[i].prompt, plain[i].tokens});
  const int32_t vocab = static_cast<int32_t>((*model)->config().vocab_size);
  c.speculative_config = R"({"method": "ngram", "num_speculative_tokens": 4})";
  const auto [right, right_stats] = run_specs(*model, specs, c, std::make_shared<ReplayDrafter>(known, false, vocab));
  expect_plain(right, "drafts always right");
  EXPECT_GT(right_stats.num_draft_tokens, 0);
  EXPECT_EQ(right_stats.num_accepted_tokens, right_stats.num_draft_tokens);
  EXPECT_LT(right_stats.num_steps * 3, plain_stats.num_steps) << "k = 4 right drafts should take ~5x fewer steps";
  const auto [wrong, wrong_stats] = run_specs(*model, specs, c, std::make_shared<ReplayDrafter>(known, true, vocab));
  expect_plain(wrong, "drafts always wrong");
  EXPECT_EQ(wrong_stats.num_accepted_tokens, 0);
  for (const int k : {1, 3, 8}) {
    c.speculative_config = R"({"method": "ngram", "num_speculative_tokens": )" + std::to_string(k) +
                           R"(, "prompt_lookup_min": 1, "prompt_lookup_max": 3})";
    const auto [ngram, ngram_stats] = run_specs(*model, specs, c);
    expect_plain(ngram, "ngram k = " + std::to_string(k));
    EXPECT_GT(ngram_stats.num_draft_tokens, 0) << k;
  }
  // The draft model: the target itself, on the GPU (its greedy drafts are right for the greedy requests).
  c.speculative_config = R"({"model": ")" + target + R"(", "num_speculative_tokens": 4})";
  const auto [drafted, drafted_stats] = run_specs(*model, specs, c);
  expect_plain(drafted, "draft model");
  EXPECT_GT(drafted_stats.num_accepted_tokens * 4, drafted_stats.num_draft_tokens);
  std::printf(
      "[ speculation on cuda ] steps: plain %lld, right %lld, wrong %lld, draft model %lld (%lld of %lld accepted)\n",
      static_cast<long long>(plain_stats.num_steps), static_cast<long long>(right_stats.num_steps),
      static_cast<long long>(wrong_stats.num_steps), static_cast<long long>(drafted_stats.num_steps),
      static_cast<long long>(drafted_stats.num_accepted_tokens),
      static_cast<long long>(drafted_stats.num_draft_tokens));
}

TEST(CudaEngine, ThePoolIsSizedFromTheMemoryFraction) {
  VOSTI_SKIP_WITHOUT_CUDA();
  auto model = load_device_model(kModels + "/llama-tiny", "cuda");
  ASSERT_TRUE(model.ok()) << model.status().to_string();
  EngineConfig c;
  c.device = "cuda";
  c.gpu_memory_utilization = 0.2;
  c.max_model_len = 512;
  auto engine = Engine::create(*model, c);
  ASSERT_TRUE(engine.ok()) << engine.status().to_string();
  const RunnerInfo& info = (*engine)->runner_info();
  size_t free_bytes = 0, total = 0;
  ASSERT_EQ(cudaMemGetInfo(&free_bytes, &total), cudaSuccess);
  EXPECT_GT(info.num_blocks, 1000);
  EXPECT_LE(info.kv_cache_bytes, static_cast<int64_t>(0.2 * static_cast<double>(total)));
  EXPECT_EQ(info.kv_cache_dtype, "bf16");
  std::printf("[ cuda engine ] %s: %lld blocks, %.2f GiB of KV at utilization 0.2\n", info.device.c_str(),
              static_cast<long long>(info.num_blocks), static_cast<double>(info.kv_cache_bytes) / (1u << 30));
  EngineConfig bad = c;
  bad.gpu_memory_utilization = 1.5;
  EXPECT_EQ(Engine::create(*model, bad).status().code(), StatusCode::kInvalidArgument);
  bad = c;
  bad.kv_cache_dtype = "fp8";
  EXPECT_EQ(Engine::create(*model, bad).status().code(), StatusCode::kInvalidArgument);
}

TEST(CudaEngine, ARequestLargerThanThePoolIsAClearErrorAndDisturbsNoOther) {
  VOSTI_SKIP_WITHOUT_CUDA();
  auto model = load_device_model(kModels + "/llama-tiny", "cuda");
  ASSERT_TRUE(model.ok()) << model.status().to_string();
  EngineConfig c = cuda_reference();
  c.num_blocks = 8;  // 128 tokens
  auto engine = Engine::create(*model, c);
  ASSERT_TRUE(engine.ok()) << engine.status().to_string();
  RequestSpec big;
  big.prompt.assign(200, 3);
  const auto r = (*engine)->add_request(big, nullptr);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("maximum context length"), std::string::npos) << r.status().to_string();
  RequestSpec ok;
  ok.prompt = {1, 2, 3};
  ok.max_tokens = 4;
  int produced = 0;
  ASSERT_TRUE((*engine)->add_request(ok, [&](const RequestOutput& o) { produced += o.new_tokens.size(); }).ok());
  while ((*engine)->has_work()) (*engine)->step();
  EXPECT_EQ(produced, 4);
  // A deployment that asks for more context than its pool holds is refused at creation.
  EngineConfig too_long = c;
  too_long.max_model_len = 1000;
  const auto e2 = Engine::create(*model, too_long);
  EXPECT_EQ(e2.status().code(), StatusCode::kInvalidArgument) << e2.status().to_string();
}

}  // namespace
}  // namespace vosti
