// The determinism harness as a CTest suite: every logit of every output position is
// bitwise identical to the reference F_D under the whole (CI-sized) variation matrix,
// for random-weight Llama, Qwen2, Qwen3, Mistral, Gemma 3, Qwen3-MoE and Mixtral models and the
// real default model; and deliberately broken kernels (a matmul, an expert GEMM) make it fail.
#include <gtest/gtest.h>

#include <cstdlib>

#include "model/model.h"
#include "runner/load_device_model.h"
#include "tests/support/planted.h"
#include "tests/test_paths.h"
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
enum class Planted { kNone, kMatmul, kExpertMatmul, kVerifyPlan };

HarnessReport run(const std::string& path, Planted planted = Planted::kNone) {
  auto model = Model::load(path);
  EXPECT_TRUE(model.ok()) << model.status().to_string();
  const EngineConfig ref = reference_config();
  const std::shared_ptr<const DeviceModel> device =
      planted == Planted::kMatmul         ? planted_cpu_device_model(*model)
      : planted == Planted::kExpertMatmul ? planted_moe_cpu_device_model(*model)
      : planted == Planted::kVerifyPlan   ? planted_verify_plan_cpu_device_model(*model)
                                          : cpu_device_model(*model);
  auto report = run_determinism_harness(device, make_harness_requests((*model)->config(), false, 7), ref,
                                        make_variations(ref, false));
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
  // Every speculation variation verified drafts (n-gram on the outputs' repeats).
  int64_t num_speculating = 0;
  for (const auto& r : report.results) {
    if (r.name.rfind("ngram", 0) != 0) continue;
    ++num_speculating;
    EXPECT_GT(r.num_draft_tokens, 0) << r.name << ": nothing was drafted";
  }
  EXPECT_EQ(num_speculating, 3);
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
  const HarnessReport report = run(path);
  for (const auto& r : report.results) EXPECT_TRUE(r.identical) << r.name << ": " << r.first_difference;
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
    const bool speculating = r.name.rfind("ngram", 0) == 0;
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

}  // namespace
}  // namespace vosti
