// The determinism harness as a CTest suite: every logit of every output position is
// bitwise identical to the reference F_D under the whole (CI-sized) variation matrix,
// for random-weight Llama, Qwen2, Qwen3, Mistral, Gemma 3, Qwen3-MoE and Mixtral models and the
// real default model; and deliberately broken kernels (a matmul, an expert GEMM) make it fail.
#include <gtest/gtest.h>

#include <cstdlib>

#include "engine/engine.h"
#include "model/model.h"
#include "model/model_file.h"
#include "runner/load_device_model.h"
#include "tests/support/planted.h"
#include "tests/test_paths.h"
#include "tokenizer/tokenizer.h"
#include "tools/verify/verify_harness.h"

namespace vosti {
namespace {

const std::string kModels = vosti::testing::source_dir() + "/tests/golden/models";

EngineConfig reference_config() {
  EngineConfig c;
  c.block_size = 16;
  c.max_model_len = 128;
  c.num_blocks = 64;
  c.num_threads = 2;
  c.check_invariants = true;  // the cache and scheduler invariants after every step of every run
  return c;
}

// The harness on the model at `path`, its cpu runners' kernels the product's or, planted, a
// matmul whose reduction reads the row count (tests/support/planted.h).
enum class Planted {
  kNone,
  kMatmul,
  kExpertMatmul,
  kStaleWindow,
  kPageKeyedWindow,
  kVerifyPlan,
  kBatchMask,
  kWorkerMask,  // the engine's grammar pool, through EngineHooks (the runners are the product's)
};

// With `tokenizer`, the set gains structured-output requests (verify_harness.h).
HarnessReport run(const std::string& path, Planted planted = Planted::kNone,
                  std::shared_ptr<const Tokenizer> tokenizer = nullptr) {
  auto model = Model::load(path);
  EXPECT_TRUE(model.ok()) << model.status().to_string();
  const EngineConfig ref = reference_config();
  const std::shared_ptr<const DeviceModel> device =
      planted == Planted::kMatmul            ? planted_cpu_device_model(*model)
      : planted == Planted::kExpertMatmul    ? planted_moe_cpu_device_model(*model)
      : planted == Planted::kStaleWindow     ? planted_stale_window_cpu_device_model(*model)
      : planted == Planted::kPageKeyedWindow ? planted_page_keyed_window_cpu_device_model(*model)
      : planted == Planted::kVerifyPlan      ? planted_verify_plan_cpu_device_model(*model)
      : planted == Planted::kBatchMask       ? planted_batch_mask_cpu_device_model(*model)
                                             : cpu_device_model(*model);
  std::vector<HarnessRequest> requests = make_harness_requests((*model)->config(), false, 7);
  if (tokenizer) add_structured_requests(requests);
  const EngineHooks hooks = planted == Planted::kWorkerMask ? planted_worker_dependent_mask_hooks() : EngineHooks{};
  auto report = run_determinism_harness(device, requests, ref, make_variations(ref, false), {}, tokenizer, hooks);
  EXPECT_TRUE(report.ok()) << report.status().to_string();
  std::printf("%s", format_report_table({*report}).c_str());
  return std::move(report).value();
}

class TinyModels : public ::testing::TestWithParam<std::string> {};

TEST_P(TinyModels, EveryVariationIsBitwiseIdentical) {
  const HarnessReport report = run(kModels + "/" + GetParam());
  ASSERT_FALSE(report.results.empty());
  for (const auto& r : report.results) {
    EXPECT_TRUE(r.identical) << r.name << ": " << r.first_difference;
    EXPECT_GT(r.num_positions, 0) << r.name;
  }
  // The matrix really exercised what it claims.
  bool preempted = false, hit = false;
  for (const auto& r : report.results) {
    preempted |= r.num_preemptions > 0;
    hit |= r.num_prefix_hit_tokens > 0;
  }
  EXPECT_TRUE(preempted) << "no variation preempted a request";
  EXPECT_TRUE(hit) << "no variation hit the prefix cache";
  // Every speculation variation verified drafts (n-gram on the outputs' repeats): k = 1, 3, 8, and
  // k = 3, 8 with window-local KV.
  int64_t num_speculating = 0;
  for (const auto& r : report.results) {
    if (r.name.find("ngram") == std::string::npos) continue;
    ++num_speculating;
    EXPECT_GT(r.num_draft_tokens, 0) << r.name << ": nothing was drafted";
  }
  EXPECT_EQ(num_speculating, 5);
}

INSTANTIATE_TEST_SUITE_P(Families, TinyModels,
                         ::testing::Values("llama-tiny", "qwen2-tiny-bf16", "qwen3-tiny", "mistral-tiny-window",
                                           "gemma3-tiny", "qwen3-moe-tiny", "mixtral-tiny"),
                         [](const auto& info) {
                           std::string s = info.param;
                           for (auto& ch : s)
                             if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           return s;
                         });

TEST(Determinism, DefaultModelEveryVariationIsBitwiseIdentical) {
  const char* path = std::getenv("VOSTI_DEFAULT_MODEL");
  if (!path || !*path) GTEST_SKIP() << "VOSTI_DEFAULT_MODEL is not set (scripts/test sets it; run scripts/fetch-model)";
  // With its tokenizer: structured-output requests (JSON schema, regex, choice) join the set.
  auto tokenizer = Tokenizer::load_for_model(path);
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status().to_string();
  const HarnessReport report = run(path, Planted::kNone, *tokenizer);
  for (const auto& r : report.results) EXPECT_TRUE(r.identical) << r.name << ": " << r.first_difference;
}

// A structured-output mask whose fill follows the batch (-1e30 beside other sequences, -inf alone):
// the tokens do not move, but the masked rows' digests do, and the harness says where.
TEST(Determinism, APlantedBatchDependentGrammarMaskIsCaught) {
  const char* path = std::getenv("VOSTI_DEFAULT_MODEL");
  if (!path || !*path) GTEST_SKIP() << "VOSTI_DEFAULT_MODEL is not set (scripts/test sets it; run scripts/fetch-model)";
  auto tokenizer = Tokenizer::load_for_model(path);
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status().to_string();
  const HarnessReport report = run(path, Planted::kBatchMask, *tokenizer);
  EXPECT_FALSE(report.all_identical()) << "the harness missed a grammar mask that depends on the batch";
  int64_t caught = 0;
  for (const auto& r : report.results) {
    if (r.identical) continue;
    ++caught;
    EXPECT_FALSE(r.first_difference.empty()) << r.name;
  }
  std::printf("planted batch-dependent mask caught by %lld of %zu variations\n", static_cast<long long>(caught),
              report.results.size());
}

// A grammar pool whose masks depend on the worker that filled them: only the variation that sends the
// set's few constrained requests through the pool (grammar_pool) can see it, and it must.
TEST(Determinism, APlantedWorkerDependentGrammarMaskIsCaught) {
  const char* path = std::getenv("VOSTI_DEFAULT_MODEL");
  if (!path || !*path) GTEST_SKIP() << "VOSTI_DEFAULT_MODEL is not set (scripts/test sets it; run scripts/fetch-model)";
  auto tokenizer = Tokenizer::load_for_model(path);
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status().to_string();
  const HarnessReport report = run(path, Planted::kWorkerMask, *tokenizer);
  bool pool_seen = false;
  for (const auto& r : report.results) {
    if (r.name == "grammar_pool") {
      pool_seen = true;
      EXPECT_FALSE(r.identical) << "the harness missed a grammar mask that depends on the pool worker";
      EXPECT_FALSE(r.first_difference.empty());
    } else {
      EXPECT_TRUE(r.identical) << r.name << ": " << r.first_difference << " (the pool is off there)";
    }
  }
  EXPECT_TRUE(pool_seen) << "the matrix has no grammar_pool variation";
}

TEST(Determinism, APlantedBatchVariantKernelIsCaught) {
  const HarnessReport report = run(kModels + "/llama-tiny", Planted::kMatmul);
  EXPECT_FALSE(report.all_identical()) << "the harness missed a kernel whose reduction depends on the row count";
  int64_t caught = 0;
  for (const auto& r : report.results) caught += r.identical ? 0 : 1;
  std::printf("planted bug caught by %lld of %zu variations\n", static_cast<long long>(caught), report.results.size());
}

// Only the steps that verify draft tokens compute with another matmul plan (split k): every
// variation without speculation stays identical, and the speculation variations catch it.
TEST(Determinism, AVerifyChunkWithItsOwnKernelPlanIsCaught) {
  const HarnessReport report = run(kModels + "/llama-tiny", Planted::kVerifyPlan);
  int64_t caught = 0;
  for (const auto& r : report.results) {
    const bool speculating = r.name.find("ngram") != std::string::npos;
    if (!speculating) {
      EXPECT_TRUE(r.identical) << r.name << ": " << r.first_difference;
    }
    caught += r.identical ? 0 : 1;
  }
  EXPECT_GT(caught, 0) << "the harness missed a verify chunk computed with another kernel plan than decode";
  std::printf("planted verify plan caught by %lld of %zu variations\n", static_cast<long long>(caught),
              report.results.size());
}

// Only the experts' GEMMs are broken (blocked by how many tokens an expert got): the routing, the
// router GEMM and every dense matmul are the product's, so this shows the harness sees an MoE
// layer that depends on the batch.
TEST(Determinism, APlantedTokenCountExpertGemmIsCaught) {
  for (const char* name : {"qwen3-moe-tiny", "mixtral-tiny"}) {
    const HarnessReport report = run(kModels + "/" + name, Planted::kExpertMatmul);
    EXPECT_FALSE(report.all_identical()) << name << ": the harness missed an expert GEMM blocked by its token count";
    int64_t caught = 0;
    for (const auto& r : report.results) caught += r.identical ? 0 : 1;
    std::printf("%s: planted expert GEMM caught by %lld of %zu variations\n", name, static_cast<long long>(caught),
                report.results.size());
  }
}

// Expert load skewed to the extreme: every router zeroed, so every token's router probabilities
// tie and every token of every layer goes to experts 0..k-1 (ties to the lowest index): each of
// those experts gets all the step's tokens, the others none. The matrix stays identical, and the
// routed requests report exactly those experts.
TEST(Determinism, AllTokensOnTheSameExpertsIsBitwiseIdentical) {
  for (const char* name : {"qwen3-moe-tiny", "mixtral-tiny"}) {
    auto file = ModelFile::open(kModels + "/" + name);
    ASSERT_TRUE(file.ok()) << file.status().to_string();
    const ModelConfig& c = (*file)->config();
    const MoeSpec moe = c.moe();
    const std::vector<float> zeros(static_cast<size_t>(moe.num_experts * c.hidden_size), 0.0f);
    std::vector<ReplacementTensor> routers;
    for (const TensorSlot& slot : (*file)->tensor_slots()) {
      if (slot.role != WeightRole::kRouter) continue;
      ReplacementTensor t;
      t.name = (*file)->tensor_name(slot.role, slot.layer);
      t.shape = {moe.num_experts, c.hidden_size};
      t.data = reinterpret_cast<const uint8_t*>(zeros.data());
      t.num_bytes = zeros.size() * sizeof(float);
      routers.push_back(t);
    }
    ASSERT_FALSE(routers.empty());
    auto skewed = ModelFile::with_replaced(*file, routers);
    ASSERT_TRUE(skewed.ok()) << skewed.status().to_string();
    auto model = Model::load(**skewed);
    ASSERT_TRUE(model.ok()) << model.status().to_string();
    const EngineConfig ref = reference_config();
    const auto requests = make_harness_requests(c, false, 7);
    auto report = run_determinism_harness(cpu_device_model(*model), requests, ref, make_variations(ref, false));
    ASSERT_TRUE(report.ok()) << report.status().to_string();
    for (const auto& r : report->results)
      EXPECT_TRUE(r.identical) << name << " " << r.name << ": " << r.first_difference;
    // The skew is real: a routed request's every entry is experts 0..k-1.
    auto engine = Engine::create(cpu_device_model(*model), ref);
    ASSERT_TRUE(engine.ok());
    RequestSpec spec = requests[1].spec;
    spec.routed_experts = true;
    RoutedExperts routed;
    ASSERT_TRUE((*engine)
                    ->add_request(spec,
                                  [&](const RequestOutput& o) {
                                    if (o.finished) routed = o.routed_experts;
                                  })
                    .ok());
    while ((*engine)->has_work()) (*engine)->step();
    ASSERT_GT(routed.num_positions(), 0);
    for (size_t i = 0; i < routed.ids.size(); ++i)
      ASSERT_EQ(routed.ids[i], static_cast<int32_t>(i % static_cast<size_t>(moe.top_k))) << name << " entry " << i;
    std::printf("%s: every token on experts 0..%lld, %zu variations identical\n", name,
                static_cast<long long>(moe.top_k - 1), report->results.size());
  }
}

// Planted window-local KV bugs: only the window_kv variations can see them, and they must.
class PlantedWindowBugs : public ::testing::TestWithParam<Planted> {};

TEST_P(PlantedWindowBugs, AreCaughtByTheWindowVariationsOnly) {
  for (const char* name : {"gemma3-tiny", "mistral-tiny-window"}) {
    const HarnessReport report = run(kModels + "/" + name, GetParam());
    int64_t caught = 0;
    for (const auto& r : report.results) {
      caught += r.identical ? 0 : 1;
      if (r.name.rfind("window_kv", 0) != 0) {
        EXPECT_TRUE(r.identical) << name << ": " << r.name;
      }
    }
    EXPECT_GT(caught, 0) << name << ": the harness missed a window block read where rule 5 forbids";
    std::printf("%s: planted window bug %d caught by %lld of %zu variations\n", name, static_cast<int>(GetParam()),
                static_cast<long long>(caught), report.results.size());
  }
}

// Window-local KV that releases a block its window still reads and keeps reading it through its
// old id; window blocks keyed by their physical page (tests/support/planted.h).
INSTANTIATE_TEST_SUITE_P(Window, PlantedWindowBugs, ::testing::Values(Planted::kStaleWindow, Planted::kPageKeyedWindow),
                         [](const auto& info) {
                           return std::string(info.param == Planted::kStaleWindow ? "StaleBlock" : "PageKeyed");
                         });

}  // namespace
}  // namespace vosti
