// The CPU engine's bit-exactness gate (issue 22): XXH3-128 digests of every position's logits,
// recorded (tests/model/data/logits_digests.json) from the engine as it stood before its
// weights stayed quantised in memory (commit e2987cc: every weight dequantised to f32 at
// load, f32 lane-8 matmul). The engine must reproduce each digest bit for bit
// - on the default model (SmolLM2-135M-Instruct Q4_1) and on a tiny model of every weight
//   type the loader accepts (tests/model/quant_models.h writes them byte for byte),
// - with the cpu backend at 1, 2 and 3 threads and (tiny models) the scalar ref backend,
// - for a prompt computed whole, one token at a time, in chunks, and batched with others.
// VOSTI_RECORD_DIGESTS=1 rewrites the fixture from the whole-prompt runs (cpu at 1 thread, ref).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/thread_pool.h"
#include "kernels/kernel_backend.h"
#include "model/model.h"
#include "runner/single_sequence.h"
#include "sample/logits_digest.h"
#include "tests/model/quant_models.h"
#include "tests/test_paths.h"

namespace vosti {
namespace {

const std::string kFixture = vosti::testing::source_dir() + "/tests/model/data/logits_digests.json";

bool recording() {
  const char* v = std::getenv("VOSTI_RECORD_DIGESTS");
  return v != nullptr && *v == '1';
}

std::string hex(const LogitsDigest& d) {
  char buf[40];
  std::snprintf(buf, sizeof(buf), "%016llx%016llx", static_cast<unsigned long long>(d[1]),
                static_cast<unsigned long long>(d[0]));
  return buf;
}

// Digests of logits [num_rows, vocab], one per row (all finite: a digest of NaNs would prove little).
std::vector<std::string> row_digests(const std::vector<float>& logits, int64_t vocab) {
  EXPECT_TRUE(std::all_of(logits.begin(), logits.end(), [](float v) { return std::isfinite(v); }));
  std::vector<std::string> out;
  for (size_t r = 0; r * static_cast<size_t>(vocab) < logits.size(); ++r)
    out.push_back(hex(logits_digest(std::span<const float>(logits.data() + r * vocab, static_cast<size_t>(vocab)))));
  return out;
}

using Prompts = std::vector<std::vector<int32_t>>;
using Digests = std::vector<std::vector<std::string>>;  // [prompt][position]

// How a prompt's positions are computed.
enum class Mode { kWhole, kOneByOne, kChunks13, kBatched };
const char* mode_name(Mode m) {
  switch (m) {
    case Mode::kWhole:
      return "whole prompt";
    case Mode::kOneByOne:
      return "one token at a time";
    case Mode::kChunks13:
      return "chunks of 13";
    case Mode::kBatched:
      return "all prompts in one batch";
  }
  return "?";
}

// Every prompt in one forward: each prompt its own sequence with its own blocks.
Digests batched_digests(const Model& model, KernelBackend& kernels, const Prompts& prompts) {
  const int block = 16;
  int64_t num_blocks = 0;
  for (const auto& p : prompts) num_blocks += (static_cast<int64_t>(p.size()) + block - 1) / block;
  KvStorage kv(model.config(), num_blocks, block);
  StepPlan plan;  // every prompt a sequence of its own, blocks 0, 1, ... in prompt order
  int32_t next = 0;
  for (const auto& p : prompts) {
    ScheduledRequest& r = plan.requests.emplace_back();
    r.num_new_tokens = static_cast<int32_t>(p.size());
    r.token_ids = p;
    for (size_t b = 0; b * block < p.size(); ++b) r.block_table.push_back(next++);
    plan.num_batched_tokens += r.num_new_tokens;
  }
  const std::vector<RequestLogitsTask> tasks(prompts.size());
  StepBatch step;
  build_step_batch(plan, tasks, block, StepBatchOptions{}, step);
  std::vector<int32_t> rows(static_cast<size_t>(step.num_tokens()));  // every row's logits
  for (size_t i = 0; i < rows.size(); ++i) rows[i] = static_cast<int32_t>(i);
  const ForwardBatch batch = forward_batch(step, rows);
  const int64_t vocab = model.config().vocab_size;
  std::vector<float> logits(batch.logit_rows.size() * static_cast<size_t>(vocab));
  ForwardScratch scratch;
  model.forward(batch, kv, kernels, logits.data(), scratch);
  const std::vector<std::string> all = row_digests(logits, vocab);
  Digests out;
  size_t row = 0;
  for (const auto& p : prompts) {
    out.emplace_back(all.begin() + static_cast<std::ptrdiff_t>(row),
                     all.begin() + static_cast<std::ptrdiff_t>(row + p.size()));
    row += p.size();
  }
  return out;
}

Digests compute_digests(const Model& model, KernelBackend& kernels, const Prompts& prompts, Mode mode) {
  if (mode == Mode::kBatched) return batched_digests(model, kernels, prompts);
  const int64_t vocab = model.config().vocab_size;
  Digests out;
  for (const auto& p : prompts) {
    SingleSequence seq(model, kernels, static_cast<int64_t>(p.size()));
    std::vector<float> logits;
    const size_t step = mode == Mode::kWhole ? p.size() : mode == Mode::kOneByOne ? 1 : 13;
    for (size_t i = 0; i < p.size(); i += step) {
      const size_t n = std::min(step, p.size() - i);
      const std::vector<float> part = seq.append(std::span<const int32_t>(p.data() + i, n), /*all_logits=*/true);
      logits.insert(logits.end(), part.begin(), part.end());
    }
    out.push_back(row_digests(logits, vocab));
  }
  return out;
}

// First (prompt, position) where got differs from want, or "" when identical.
std::string first_difference(const Digests& got, const Digests& want) {
  if (got.size() != want.size()) return "prompt count";
  for (size_t s = 0; s < want.size(); ++s) {
    if (got[s].size() != want[s].size()) return "prompt " + std::to_string(s) + " length";
    for (size_t p = 0; p < want[s].size(); ++p)
      if (got[s][p] != want[s][p]) return "prompt " + std::to_string(s) + " position " + std::to_string(p);
  }
  return "";
}

Prompts random_prompts(const std::vector<size_t>& lengths, int64_t vocab, uint64_t seed) {
  testing::SplitMix64 rng(seed);
  Prompts out;
  for (size_t len : lengths) {
    out.emplace_back();
    for (size_t i = 0; i < len; ++i)
      out.back().push_back(static_cast<int32_t>(rng.next() % static_cast<uint64_t>(vocab)));
  }
  return out;
}

nlohmann::json load_fixture() {
  std::ifstream in(kFixture);
  if (!in.good()) return nlohmann::json::object();
  return nlohmann::json::parse(in);
}

void save_fixture(const nlohmann::json& j) {
  std::filesystem::create_directories(std::filesystem::path(kFixture).parent_path());
  std::ofstream out(kFixture);
  out << j.dump(1) << "\n";
}

struct DigestRun {
  const char* backend;  // "cpu" or "ref"
  int threads;
  Mode mode;
};

// Checks every run against the fixture's digests under `key` (or records them).
void check_model(const Model& model, const Prompts& prompts, const std::string& key,
                 const std::vector<DigestRun>& runs) {
  nlohmann::json fixture = load_fixture();
  if (recording()) {
    ThreadPool pool(1);
    auto cpu = make_cpu_backend(&pool);
    fixture[key]["prompts"] = prompts;
    fixture[key]["cpu"] = compute_digests(model, *cpu, prompts, Mode::kWhole);
    for (const DigestRun& r : runs) {
      if (std::string(r.backend) != "ref") continue;
      fixture[key]["ref"] = compute_digests(model, *make_ref_backend(), prompts, Mode::kWhole);
      break;
    }
    save_fixture(fixture);
    std::printf("[ digests ] recorded %s\n", key.c_str());
  }
  ASSERT_TRUE(fixture.contains(key)) << kFixture << " has no entry " << key << " (VOSTI_RECORD_DIGESTS=1 records it)";
  ASSERT_EQ(fixture[key]["prompts"].get<Prompts>(), prompts) << key << ": the fixture's prompts changed";
  for (const DigestRun& r : runs) {
    ASSERT_TRUE(fixture[key].contains(r.backend)) << key << ": no " << r.backend << " digests in the fixture";
    const auto want = fixture[key][r.backend].get<Digests>();
    ThreadPool pool(r.threads);
    auto kernels = std::string(r.backend) == "ref" ? make_ref_backend() : make_cpu_backend(&pool);
    const std::string diff = first_difference(compute_digests(model, *kernels, prompts, r.mode), want);
    EXPECT_EQ(diff, "") << key << ", " << r.backend << " backend, " << r.threads << " threads, " << mode_name(r.mode)
                        << ": logits differ from the recorded digests at " << diff;
  }
}

TEST(LogitsDigests, DefaultModelIsBitIdenticalToTheRecordedEngine) {
  const std::string path = testing::default_model();
  if (path.empty()) GTEST_SKIP() << "VOSTI_DEFAULT_MODEL is not set (scripts/test sets it; run scripts/fetch-model)";
  auto model = Model::load(path);
  ASSERT_TRUE(model.ok()) << model.status().to_string();
  // Lengths cross the KV tiles (32) and the matmul's row blocks (4) and column chunks.
  const Prompts prompts = random_prompts({7, 33, 70}, (*model)->config().vocab_size, 22);
  check_model(**model, prompts, "SmolLM2-135M-Instruct.Q4_1",
              {{"cpu", 1, Mode::kWhole},
               {"cpu", 2, Mode::kWhole},
               {"cpu", 3, Mode::kWhole},
               {"cpu", 1, Mode::kOneByOne},
               {"cpu", 2, Mode::kOneByOne},
               {"cpu", 2, Mode::kChunks13},
               {"cpu", 1, Mode::kBatched},
               {"cpu", 2, Mode::kBatched}});
}

class QuantTypeDigests : public ::testing::TestWithParam<WeightType> {};

TEST_P(QuantTypeDigests, TinyModelIsBitIdenticalToTheRecordedEngine) {
  const WeightType type = GetParam();
  testing::ScratchDir dir;
  const std::string name(weight_type_traits(static_cast<uint32_t>(type))->name);
  const std::string path = dir.file("tiny-" + name + ".gguf");
  testing::write_file(path, testing::tiny_quant_model(type, 100 + static_cast<uint64_t>(type)));
  auto model = Model::load(path);
  ASSERT_TRUE(model.ok()) << model.status().to_string();
  const Prompts prompts = random_prompts({5, 40}, (*model)->config().vocab_size, 7);
  std::vector<DigestRun> runs;
  for (int threads : {1, 2, 3})
    for (Mode mode : {Mode::kWhole, Mode::kOneByOne, Mode::kChunks13, Mode::kBatched})
      runs.push_back({"cpu", threads, mode});
  runs.push_back({"ref", 1, Mode::kWhole});
  runs.push_back({"ref", 1, Mode::kOneByOne});
  check_model(**model, prompts, "tiny-" + name, runs);
  // The same file loaded with f32 copies of every weight (the pre-issue-22 loader): same bits.
  auto f32_model = Model::load(path, f32_load_options());
  ASSERT_TRUE(f32_model.ok()) << f32_model.status().to_string();
  EXPECT_NE((*f32_model)->weights().layers[0].wqkv.data, nullptr);
  EXPECT_EQ((*model)->weights().layers[0].wqkv.data, nullptr) << "a matrix was copied to f32 at load";
  ThreadPool pool(2);
  auto cpu = make_cpu_backend(&pool);
  const std::string diff = first_difference(compute_digests(**f32_model, *cpu, prompts, Mode::kWhole),
                                            load_fixture()["tiny-" + name]["cpu"].get<Digests>());
  EXPECT_EQ(diff, "") << "f32_weights load differs at " << diff;
}

INSTANTIATE_TEST_SUITE_P(EveryType, QuantTypeDigests, ::testing::ValuesIn(testing::loadable_weight_types()),
                         [](const auto& info) {
                           return std::string(weight_type_traits(static_cast<uint32_t>(info.param))->name);
                         });

}  // namespace
}  // namespace vosti
