// The paper's determinism protocol (tools/verify/paper_*.h): its plan is the artifact's (the
// counts, Python's draws, the compositions, cuts that keep prefixes), every comparison is
// identical in-process on the tiny families, and each planted engine variant is reported in the
// relation it breaks and in no other.
#include <gtest/gtest.h>

#include <cstdlib>
#include <map>

#include "model/model.h"
#include "runner/device_model.h"
#include "runner/load_device_model.h"
#include "tests/support/planted.h"
#include "tests/test_paths.h"
#include "tools/verify/engine_backend.h"
#include "tools/verify/paper_runner.h"
#include "tools/verify/python_random.h"

namespace vosti {
namespace {

const std::string kModels = vosti::testing::source_dir() + "/tests/golden/models";
constexpr uint64_t kSeed = 0x5EED2026;

TokenDomain llama3_domain() {
  TokenDomain d;
  d.vocab_size = 128256;
  d.bos_token_id = 128000;
  d.eos_token_ids = {128001, 128009};
  d.special_token_ids = {128000, 128001, 128009};
  return d;
}

TEST(PythonRandom, DrawsWhatCPythonDraws) {
  PythonRandom r(kSeed);  // random.Random(0x5EED2026).getrandbits(32), three times
  EXPECT_EQ(r.next_u32(), 2582792244u);
  EXPECT_EQ(r.next_u32(), 2596698250u);
  EXPECT_EQ(r.next_u32(), 2741275151u);
  PythonRandom s(kSeed);  // randrange(320)
  std::vector<uint32_t> got;
  for (int i = 0; i < 8; ++i) got.push_back(s.below(320));
  EXPECT_EQ(got, (std::vector<uint32_t>{307, 309, 26, 234, 317, 25, 81, 109}));
  PythonRandom big((uint64_t{1} << 40) + 5);  // a seed of two 32-bit words
  EXPECT_EQ(big.below(128256), 66110u);
  EXPECT_EQ(big.below(128256), 67753u);
}

TEST(PaperPlan, CountsArmsAndLengthsAreTheArtifacts) {
  auto plan = make_paper_plan(paper_protocol_spec(), llama3_domain(), 0, 33024);
  ASSERT_TRUE(plan.ok()) << plan.status().to_string();
  EXPECT_EQ(plan->expected(Relation::kBatch), 296);
  EXPECT_EQ(plan->expected(Relation::kChunk), 90);
  EXPECT_EQ(plan->expected(Relation::kPrefillDecode), 384);
  EXPECT_EQ(plan->expected(Relation::kPrefixReuse), 14);
  EXPECT_TRUE(plan->cuts.empty());  // the paper's context: nothing cut
  EXPECT_EQ(plan->batch_groups.size(), 84u);
  EXPECT_EQ(plan->chunk_prompts.size(), 18u);
  EXPECT_EQ(plan->chunk_prompts.front().size(), 63u);
  EXPECT_EQ(plan->chunk_prompts.back().size(), 32768u);
  EXPECT_EQ(plan->full_budget, 32768);
  EXPECT_EQ(plan->pd_prompts[2].size(), 32768u);
  EXPECT_EQ(plan->batch_prompts[31].size(), 8193u);
  EXPECT_EQ(plan->longest_sequence(), 32768 + 127 + 2);  // the longest teacher prompt, and its output
  std::vector<std::string> labels;
  for (const PrefixCase& c : plan->prefix_cases) labels.push_back(c.label);
  EXPECT_EQ(labels, (std::vector<std::string>{"partial-15", "partial-16", "partial-17", "partial-127", "partial-128",
                                              "partial-129", "partial-1023", "partial-1024", "partial-1025",
                                              "partial-8192", "full-129", "full-1025", "divergent-suffix"}));
  EXPECT_EQ(plan->prefix_cases[3].query.size(), 127u + 128u);
  EXPECT_EQ(plan->prefix_cases[3].donor.size(), 127u);
  // A model's sliding window adds its edges: Gemma3's 1,024 changes nothing; a window of 24 adds
  // three chunk prompts and moves three donors (the artifact's rule).
  auto gemma = make_paper_plan(paper_protocol_spec(), llama3_domain(), 1024, 33024);
  ASSERT_TRUE(gemma.ok());
  EXPECT_EQ(gemma->expected(Relation::kChunk), 90);
  EXPECT_EQ(gemma->expected(Relation::kPrefixReuse), 14);
  auto windowed = make_paper_plan(paper_protocol_spec(), llama3_domain(), 24, 33024);
  ASSERT_TRUE(windowed.ok());
  EXPECT_EQ(windowed->expected(Relation::kChunk), 105);
  EXPECT_EQ(windowed->prefix_cases[3].label, "partial-23");
}

TEST(PaperPlan, PromptsAndCompositionsAreTheArtifacts) {
  TokenDomain tiny;
  tiny.vocab_size = 320;
  tiny.bos_token_id = 1;
  tiny.special_token_ids = {1, 2};
  // deterministic_prompt(length=12, seed=0x5EED2026 + 3) of the artifact, computed with CPython.
  EXPECT_EQ(paper_prompt(tiny, 12, kSeed + 3),
            (std::vector<int32_t>{1, 182, 308, 168, 258, 280, 266, 75, 279, 243, 29, 113}));
  EXPECT_EQ(paper_prompt(llama3_domain(), 5, kSeed + 2001),
            (std::vector<int32_t>{128000, 36537, 120007, 34149, 99557}));
  auto plan = make_paper_plan(paper_protocol_spec(), tiny, 0, 33024);
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(std::vector<int32_t>(plan->batch_prompts[3].begin(), plan->batch_prompts[3].begin() + 12),
            paper_prompt(tiny, 12, kSeed + 3));  // batch prompt 3: seed + 3, 33 tokens
  // Pairs of the shuffled order (random.Random(seed + 9000).shuffle(range(32)) = [16, 17, 29, 7, ...]).
  EXPECT_EQ(plan->batch_groups[0], (std::vector<int32_t>{0, 1}));
  EXPECT_EQ(plan->batch_groups[16], (std::vector<int32_t>{31, 30}));
  EXPECT_EQ(plan->batch_groups[32], (std::vector<int32_t>{16, 17}));
  EXPECT_EQ(plan->batch_groups[33], (std::vector<int32_t>{29, 7}));
  EXPECT_EQ(plan->batch_groups[83].size(), 8u);
}

TEST(PaperPlan, AShortContextCutsLengthsToPrefixesAndSaysSo) {
  const int32_t context = 1280;
  auto plan = make_paper_plan(paper_protocol_spec(), llama3_domain(), 0, context);
  ASSERT_TRUE(plan.ok());
  for (Relation r : kRelations) EXPECT_EQ(plan->expected(r), (std::vector<int64_t>{296, 90, 384, 14})[size_t(r)]);
  EXPECT_FALSE(plan->cuts.empty());
  for (const auto& p : plan->batch_prompts) EXPECT_LE(static_cast<int32_t>(p.size()) + 2, context);
  for (const auto& p : plan->pd_prompts) EXPECT_LE(static_cast<int32_t>(p.size()) + 127 + 2, context);
  EXPECT_EQ(plan->prefix_cases[8].donor.size(), 1025u);  // the block and tile edges fit: kept
  const std::vector<int32_t> paper = paper_prompt(llama3_domain(), 8193, kSeed + 31);
  ASSERT_EQ(plan->batch_prompts[31].size(), 1278u);
  EXPECT_TRUE(std::equal(plan->batch_prompts[31].begin(), plan->batch_prompts[31].end(), paper.begin()));
  EXPECT_FALSE(make_paper_plan(paper_protocol_spec(), llama3_domain(), 0, 400).ok());
}

// The protocol in this process on `device` (a tiny model), requests up to `context` tokens.
ProtocolReport run_protocol(const std::shared_ptr<const DeviceModel>& device, int32_t context) {
  const ModelConfig& mc = device->config();
  auto plan = make_paper_plan(paper_protocol_spec(), token_domain(mc, nullptr), static_cast<int32_t>(mc.sliding_window),
                              context);
  EXPECT_TRUE(plan.ok()) << plan.status().to_string();
  EngineConfig d;
  d.block_size = 16;
  d.max_model_len = context;
  d.num_blocks = 8 * (context / 16 + 1) + 16;
  d.num_threads = 2;
  d.check_invariants = true;
  EngineBackend backend(device, d);
  ProtocolReport report = run_paper_protocol(*plan, backend);
  report.model = mc.name;
  report.mode = "cpu";
  std::printf("%s", format_protocol_table({report}).c_str());
  return report;
}

std::shared_ptr<const Model> load(const std::string& name) {
  auto model = Model::load(kModels + "/" + name);
  EXPECT_TRUE(model.ok()) << model.status().to_string();
  return *model;
}

std::map<Relation, std::string> statuses(const ProtocolReport& report) {
  std::map<Relation, std::string> s;
  for (const RelationResult& r : report.relations) s[r.relation] = r.status();
  return s;
}

// A family and the context its run may reach: 1,280 tokens keep every block and tile edge of the
// protocol (1,023-1,025 and 128 more); 768 (the paper's longer prompts cut further) costs a third.
struct TinyRun {
  const char* model;
  int32_t context;
};

class PaperProtocolTiny : public ::testing::TestWithParam<TinyRun> {};

TEST_P(PaperProtocolTiny, EveryComparisonIsIdentical) {
  const ProtocolReport report = run_protocol(cpu_device_model(load(GetParam().model)), GetParam().context);
  ASSERT_EQ(report.relations.size(), 4u);
  for (const RelationResult& r : report.relations) {
    EXPECT_EQ(r.status(), "pass") << relation_name(r.relation) << ": " << r.first_difference() << r.error;
    EXPECT_EQ(r.num_identical(), r.expected) << relation_name(r.relation);
  }
  EXPECT_EQ(report.relations[0].expected + report.relations[1].expected + report.relations[2].expected +
                report.relations[3].expected,
            report.plan.window == 24 ? 799 : 784);  // mistral-tiny-window: the window's edges add 15
  // Every chunk call took the steps its budget implies.
  int64_t chunked = 0;
  for (const Witness& w : report.relations[1].witnesses) chunked += w.label.ends_with(": chunked") ? 1 : 0;
  EXPECT_EQ(chunked, report.relations[1].expected + static_cast<int64_t>(report.plan.chunk_prompts.size()));
  int64_t warm_hits = 0;
  for (const Witness& w : report.relations[3].witnesses) warm_hits += w.label.ends_with("warm hit") ? 1 : 0;
  EXPECT_EQ(warm_hits, 14);  // every prefix case witnessed its hit (or, below a block, its miss)
  EXPECT_TRUE(report.passed());
}

INSTANTIATE_TEST_SUITE_P(Families, PaperProtocolTiny,
                         ::testing::Values(TinyRun{"llama-tiny", 1280}, TinyRun{"qwen2-tiny-bf16", 768},
                                           TinyRun{"qwen3-tiny", 768}, TinyRun{"mistral-tiny-window", 1280},
                                           TinyRun{"qwen3-moe-tiny", 768}, TinyRun{"mixtral-tiny", 768}),
                         [](const auto& info) {
                           std::string s = info.param.model;
                           for (auto& ch : s)
                             if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           return s;
                         });

TEST(PaperProtocol, AnAttentionSplitThatFollowsTheBatchIsReportedInBatchComposition) {
  const ProtocolReport report = run_protocol(planted_batch_split_cpu_device_model(load("llama-tiny")), 640);
  auto s = statuses(report);
  EXPECT_EQ(s[Relation::kBatch], "MISMATCH");
  EXPECT_EQ(s[Relation::kChunk], "pass");
  EXPECT_EQ(s[Relation::kPrefillDecode], "pass");
  EXPECT_EQ(s[Relation::kPrefixReuse], "pass");
  EXPECT_FALSE(report.passed());
  EXPECT_GT(report.relations[0].num_tested() - report.relations[0].num_identical(), 200);
}

TEST(PaperProtocol, AHitOnKvComputedUnderAnotherChunkingIsReportedInPrefixReuse) {
  const ProtocolReport report = run_protocol(planted_hit_chunking_cpu_device_model(load("llama-tiny")), 640);
  auto s = statuses(report);
  EXPECT_EQ(s[Relation::kBatch], "pass");
  EXPECT_EQ(s[Relation::kChunk], "pass");
  EXPECT_EQ(s[Relation::kPrefillDecode], "pass");
  EXPECT_EQ(s[Relation::kPrefixReuse], "MISMATCH");
  // Every case that hit the cache differs; the one donor shorter than a block (15 tokens) hits
  // nothing and stays identical.
  EXPECT_EQ(report.relations[3].num_identical(), 1);
  EXPECT_FALSE(report.passed());
}

}  // namespace
}  // namespace vosti
