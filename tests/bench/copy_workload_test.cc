// tools/bench/copy_workload.h, the cpu-copy and copy presets, and the outputs digest that
// compares two runs of them (determinism.h).
#include "tools/bench/copy_workload.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <set>

#include "tokenizer/tokenizer.h"
#include "tools/bench/bench_config.h"
#include "tools/bench/determinism.h"
#include "tools/bench/driver.h"
#include "tools/bench/engine_target.h"

namespace vosti::bench {
namespace {

TEST(CopyWorkload, TheTableIsSmallVariedAndComplete) {
  std::set<std::string> names, fences;
  size_t bytes = 0;
  for (const CopyDocument& d : copy_documents()) {
    EXPECT_TRUE(names.insert(d.name).second) << "duplicate document " << d.name;
    fences.insert(d.fence);
    EXPECT_GE(std::string(d.text).size(), 200u) << d.name;  // long enough to copy spans of
    EXPECT_FALSE(d.instructions.empty()) << d.name;
    bytes += std::string(d.text).size();
  }
  EXPECT_GE(names.size(), 10u);
  EXPECT_GE(fences.size(), 6u);  // code in several languages, prose and logs, JSON, CSV
  EXPECT_LT(bytes, 16384u);      // a few KB
  EXPECT_EQ(num_copy_prompts(), 33);
}

TEST(CopyWorkload, RequestsAreSeededChatTurnsThatHoldTheirDocument) {
  WorkloadConfig c;
  c.kind = "copy";
  c.num_prompts = 40;  // past the 33 pairs: they repeat
  c.output_len = {100, 200};
  c.seed = 3;
  auto a = make_workload(c, nullptr);  // built in: no tokenizer needed
  auto b = make_workload(c, nullptr);
  ASSERT_TRUE(a.ok()) << a.status().to_string();
  ASSERT_EQ(a->size(), 40u);
  std::set<std::string> prompts, first_documents;
  const int64_t num_documents = static_cast<int64_t>(copy_documents().size());
  for (const BenchRequest& r : *a) {
    EXPECT_EQ(r.kind, PromptKind::kChat);
    ASSERT_EQ(r.messages.size(), 1u);
    EXPECT_EQ(r.messages[0].role, "user");
    EXPECT_EQ(r.messages[0].content, (*b)[static_cast<size_t>(r.index)].messages[0].content);
    EXPECT_GE(r.max_tokens, 100);
    EXPECT_LE(r.max_tokens, 200);
    EXPECT_EQ(r.seed, request_seed(3, r.index));
    prompts.insert(r.messages[0].content);
    for (const CopyDocument& d : copy_documents()) {
      if (r.messages[0].content.find(d.text) == std::string::npos) continue;
      if (r.index < num_documents) first_documents.insert(d.name);
    }
  }
  EXPECT_EQ(static_cast<int64_t>(prompts.size()), num_copy_prompts());     // every pair, then repeats
  EXPECT_EQ(static_cast<int64_t>(first_documents.size()), num_documents);  // the first round covers all
  c.seed = 4;
  auto other = make_workload(c, nullptr);
  bool same_order = true;
  for (size_t i = 0; i < other->size(); ++i)
    same_order = same_order && (*other)[i].messages[0].content == (*a)[i].messages[0].content;
  EXPECT_FALSE(same_order);
  c.num_prompts = 0;
  EXPECT_FALSE(make_workload(c, nullptr).ok());
}

TEST(CopyWorkload, ThePresetsParseGreedyOneAtATime) {
  for (const char* name : {"cpu-copy", "copy"}) {
    auto p = find_preset(name);
    ASSERT_TRUE(p.ok()) << name;
    BenchConfig c;
    (*p)->apply(c);
    ASSERT_TRUE(finalize_config(c).ok()) << name;
    EXPECT_EQ(c.workload.kind, "copy");
    EXPECT_EQ(c.temperature, 0);
    EXPECT_EQ(c.max_concurrency, 1);
    EXPECT_FALSE(c.ignore_eos);
    auto requests = make_workload(c.workload, nullptr);
    ASSERT_TRUE(requests.ok()) << name;
    EXPECT_EQ(static_cast<int64_t>(requests->size()), c.workload.num_prompts);
    EXPECT_LE(c.workload.num_prompts, num_copy_prompts()) << "a preset's prompts are distinct";
  }
}

TEST(OutputsDigest, EqualIffEveryAnsweredRequestHasTheSameTokens) {
  RequestRecord a;
  a.index = 0;
  a.success = true;
  a.num_output_tokens = 3;
  a.content.token_ids = {5, 6, 7};
  RequestRecord b = a;
  b.index = 1;
  b.content.token_ids = {8, 9, 10};
  const std::vector<RequestRecord> run1 = {a, b};
  auto d1 = outputs_digest(run1);
  ASSERT_TRUE(d1.has_value());
  EXPECT_EQ(d1->hex.size(), 16u);
  EXPECT_EQ(d1->num_requests, 2);
  EXPECT_EQ(d1->num_tokens, 6);
  EXPECT_EQ(output_digest(a).size(), 16u);
  std::vector<RequestRecord> run2 = run1;
  EXPECT_EQ(outputs_digest(run2)->hex, d1->hex);
  run2[1].content.token_ids[2] = 11;
  EXPECT_NE(outputs_digest(run2)->hex, d1->hex);
  EXPECT_NE(output_digest(run2[1]), output_digest(b));
  run2 = run1;
  std::swap(run2[0].content.token_ids, run2[1].content.token_ids);  // the same tokens, other requests
  EXPECT_NE(outputs_digest(run2)->hex, d1->hex);
  run2 = run1;
  run2[1].content.token_ids.pop_back();  // an id missing: the target did not report them all
  EXPECT_FALSE(outputs_digest(run2).has_value());
  EXPECT_EQ(output_digest(run2[1]), "");
  run2[1].success = false;  // failed requests are left out
  EXPECT_EQ(outputs_digest(run2)->num_requests, 1);
}

// The preset's prompts through the default model's chat template, as `vosti bench` sends them.
TEST(CopyWorkload, PromptsRenderThroughTheDefaultModelsChatTemplate) {
  const char* path = std::getenv("VOSTI_DEFAULT_MODEL");
  if (!path || !*path) GTEST_SKIP() << "VOSTI_DEFAULT_MODEL is not set (scripts/test sets it)";
  BenchConfig c;
  (*find_preset("cpu-copy"))->apply(c);
  ASSERT_TRUE(finalize_config(c).ok());
  c.workload.num_prompts = 2;
  c.workload.output_len = {2, 2};
  auto requests = make_workload(c.workload, nullptr);
  ASSERT_TRUE(requests.ok());
  RunClock clock;
  EngineConfig engine;
  engine.num_threads = 2;
  auto target = EngineTarget::create(path, engine, &clock);
  ASSERT_TRUE(target.ok()) << target.status().to_string();
  RunOptions o;
  o.sampling.want_token_ids = true;
  const RunResult r = run_workload(**target, clock, *requests, o);
  ASSERT_EQ(r.metrics.num_completed, 2);
  for (const RequestRecord& rec : r.records) {
    const ChatMessage& turn = (*requests)[static_cast<size_t>(rec.index)].messages[0];
    auto bare = (*target)->tokenizer()->encode(turn.content, /*add_special_tokens=*/false);
    ASSERT_TRUE(bare.ok());
    EXPECT_GT(rec.num_prompt_tokens, static_cast<int64_t>(bare->size()));  // the template's markers added
    EXPECT_LE(rec.num_output_tokens, 2);
  }
  EXPECT_TRUE(outputs_digest(r.records).has_value());
}

}  // namespace
}  // namespace vosti::bench
