// tools/bench/workload.h, arrivals.h, determinism.h and bench_config.h.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "tests/test_paths.h"
#include "tokenizer/tokenizer.h"
#include "tools/bench/arrivals.h"
#include "tools/bench/bench_config.h"
#include "tools/bench/determinism.h"
#include "tools/bench/driver.h"
#include "tools/bench/workload.h"

namespace vosti::bench {
namespace {

std::shared_ptr<const Tokenizer> tiny_tokenizer() {
  auto t = Tokenizer::load_for_model(vosti::testing::source_dir() + "/tests/tokenizer/data/bpe_llama3");
  EXPECT_TRUE(t.ok()) << t.status().to_string();
  return t.ok() ? *t : nullptr;
}

std::string write_temp(const std::string& name, const std::string& text) {
  const auto path = std::filesystem::temp_directory_path() / ("vosti_bench_" + name);
  std::ofstream(path) << text;
  return path.string();
}

TEST(LengthRange, ParsesFixedAndRangedLengths) {
  EXPECT_EQ(parse_length_range("128", "--input-len")->min, 128);
  auto r = parse_length_range("64:256", "--input-len");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->min, 64);
  EXPECT_EQ(r->max, 256);
  for (const char* bad : {"0", "-3", "x", "10:5", "5:", "1.5", ""}) {
    auto e = parse_length_range(bad, "--input-len");
    EXPECT_FALSE(e.ok()) << bad;
    if (!e.ok()) {
      EXPECT_NE(e.status().message().find("--input-len"), std::string::npos);
    }
  }
}

TEST(Workload, RandomPromptsAreSeededAndWithinTheRanges) {
  auto tok = tiny_tokenizer();
  ASSERT_TRUE(tok);
  WorkloadConfig c;
  c.num_prompts = 20;
  c.input_len = {4, 9};
  c.output_len = {2, 3};
  c.seed = 5;
  auto a = make_workload(c, tok.get());
  auto b = make_workload(c, tok.get());
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_EQ(a->size(), 20u);
  for (size_t i = 0; i < a->size(); ++i) {
    const BenchRequest& r = (*a)[i];
    EXPECT_EQ(r.prompt_ids, (*b)[i].prompt_ids);
    EXPECT_GE(r.prompt_ids.size(), 4u);
    EXPECT_LE(r.prompt_ids.size(), 9u);
    EXPECT_GE(r.max_tokens, 2);
    EXPECT_LE(r.max_tokens, 3);
    for (int32_t id : r.prompt_ids) {
      EXPECT_LT(id, tok->vocab_size());
      EXPECT_FALSE(tok->is_special(id));
    }
  }
  c.seed = 6;
  EXPECT_NE(make_workload(c, tok.get())->front().prompt_ids, a->front().prompt_ids);
  EXPECT_FALSE(make_workload(c, nullptr).ok());  // random ids need a vocabulary
}

TEST(Workload, SharedPrefixGroupsShareTheirSystemPrompt) {
  auto tok = tiny_tokenizer();
  ASSERT_TRUE(tok);
  WorkloadConfig c;
  c.kind = "shared-prefix";
  c.num_groups = 3;
  c.prompts_per_group = 4;
  c.system_prompt_len = 16;
  c.question_len = {5, 5};
  auto w = make_workload(c, tok.get());
  ASSERT_TRUE(w.ok());
  ASSERT_EQ(w->size(), 12u);
  std::map<std::vector<int32_t>, int> prefixes;
  for (const BenchRequest& r : *w) {
    ASSERT_EQ(r.prompt_ids.size(), 21u);
    prefixes[std::vector<int32_t>(r.prompt_ids.begin(), r.prompt_ids.begin() + 16)]++;
  }
  ASSERT_EQ(prefixes.size(), 3u);
  for (const auto& [p, n] : prefixes) EXPECT_EQ(n, 4);
  // Interleaved: the first four requests are not all of one group.
  std::set<std::vector<int32_t>> first;
  for (int i = 0; i < 4; ++i)
    first.insert(std::vector<int32_t>((*w)[i].prompt_ids.begin(), (*w)[i].prompt_ids.begin() + 16));
  EXPECT_GT(first.size(), 1u);
}

TEST(Workload, PromptsFileOfEveryKind) {
  const std::string path = write_temp("prompts.jsonl",
                                      "{\"prompt\": \"Hello there\", \"max_tokens\": 7}\n"
                                      "\n"
                                      "{\"prompt\": [1, 2, 3]}\n"
                                      "{\"messages\": [{\"role\": \"user\", \"content\": \"Hi\"}], \"output_len\": 4}\n"
                                      "{\"conversations\": [{\"from\": \"human\", \"value\": \"Q?\"}, "
                                      "{\"from\": \"gpt\", \"value\": \"a b c\"}]}\n");
  WorkloadConfig c;
  c.kind = "file";
  c.file = path;
  c.num_prompts = 0;
  c.output_len = {9, 9};
  auto tok = tiny_tokenizer();
  auto w = make_workload(c, tok.get());
  ASSERT_TRUE(w.ok()) << w.status().to_string();
  ASSERT_EQ(w->size(), 4u);
  EXPECT_EQ((*w)[0].kind, PromptKind::kText);
  EXPECT_EQ((*w)[0].max_tokens, 7);
  EXPECT_EQ((*w)[1].kind, PromptKind::kTokenIds);
  EXPECT_EQ((*w)[1].max_tokens, 9);  // no length in the entry: --output-len
  EXPECT_EQ((*w)[2].kind, PromptKind::kChat);
  EXPECT_EQ((*w)[2].max_tokens, 4);
  EXPECT_EQ((*w)[3].messages.size(), 1u);
  EXPECT_EQ((*w)[3].messages[0].role, "user");
  EXPECT_EQ((*w)[3].max_tokens, static_cast<int32_t>(tok->encode("a b c", false)->size()));
  c.output_len_given = true;  // --output-len overrides the file's lengths
  EXPECT_EQ(make_workload(c, tok.get())->at(0).max_tokens, 9);
  c.num_prompts = 2;
  EXPECT_EQ(make_workload(c, tok.get())->size(), 2u);
}

TEST(Workload, BadFilesNameTheLine) {
  WorkloadConfig c;
  c.kind = "file";
  c.file = write_temp("bad.jsonl", "{\"prompt\": \"ok\"}\n{\"prompt\": 5}\n");
  auto w = make_workload(c, nullptr);
  ASSERT_FALSE(w.ok());
  EXPECT_NE(w.status().message().find("bad.jsonl:2"), std::string::npos);
  c.file = write_temp("bad2.jsonl", "{not json\n");
  EXPECT_NE(make_workload(c, nullptr).status().message().find(":1: not valid JSON"), std::string::npos);
  c.file = "/nonexistent/prompts.jsonl";
  EXPECT_EQ(make_workload(c, nullptr).status().code(), StatusCode::kNotFound);
}

TEST(Arrivals, AllAtOnceOrSeededPoisson) {
  ArrivalConfig all;
  for (double t : arrival_times(5, all)) EXPECT_EQ(t, 0);
  ArrivalConfig poisson;
  poisson.request_rate = 4;
  poisson.seed = 3;
  const auto a = arrival_times(4000, poisson);
  EXPECT_EQ(a, arrival_times(4000, poisson));
  EXPECT_EQ(a[0], 0);
  for (size_t i = 1; i < a.size(); ++i) EXPECT_GE(a[i], a[i - 1]);
  EXPECT_NEAR(a.back() / 3999, 0.25, 0.02);  // mean gap 1 / rate
  poisson.burstiness = 0.5;
  const auto b = arrival_times(4000, poisson);
  EXPECT_NEAR(b.back() / 3999, 0.25, 0.03);  // the same mean, burstier
}

RequestRecord answered(int64_t index, std::vector<int32_t> ids, std::vector<std::string> digests) {
  RequestRecord r;
  r.index = index;
  r.sent = r.success = true;
  r.num_output_tokens = static_cast<int64_t>(ids.size());
  r.content.token_ids = std::move(ids);
  r.content.digests = std::move(digests);
  return r;
}

TEST(Determinism, IdenticalRunsAndEveryMismatch) {
  std::vector<RequestRecord> a = {answered(0, {1, 2, 3}, {"a", "b", "c"}), answered(1, {4, 5}, {"d", "e"})};
  std::vector<RequestRecord> b = a;
  DeterminismReport same = compare_runs(a, b);
  EXPECT_TRUE(same.identical());
  EXPECT_EQ(same.num_requests_compared, 2);
  EXPECT_EQ(same.num_positions_compared, 5);
  EXPECT_FALSE(same.weaker_than_digests);
  b[0].content.digests[1] = "x";  // logits differ, token the same
  b[1] = answered(1, {4, 6, 7}, {"d", "f", "g"});
  DeterminismReport diff = compare_runs(a, b);
  EXPECT_FALSE(diff.identical());
  EXPECT_EQ(diff.num_requests_differing, 2);
  ASSERT_EQ(diff.mismatches.size(), 3u);
  EXPECT_EQ(diff.mismatches[0], "request 0 position 1: logits digest b vs x");
  EXPECT_EQ(diff.mismatches[1], "request 1: 2 vs 3 output tokens");
  EXPECT_EQ(diff.mismatches[2], "request 1 position 1: token 5 vs 6");
}

TEST(Determinism, PeersWithoutDigestsAreComparedOnTextAndLogprobs) {
  RequestRecord a;
  a.index = 0;
  a.sent = a.success = true;
  a.num_output_tokens = 2;
  a.content.token_pieces = {"Hel", "lo"};
  a.content.logprobs = {-0.5, -1.25};
  RequestRecord b = a;
  b.content.logprobs[1] = -1.2500001;
  const std::vector<RequestRecord> ra = {a}, rb = {b};
  DeterminismReport r = compare_runs(ra, rb);
  EXPECT_TRUE(r.weaker_than_digests);
  EXPECT_NE(r.compared.find("token text and logprobs"), std::string::npos);
  ASSERT_EQ(r.mismatches.size(), 1u);
  EXPECT_NE(r.mismatches[0].find("position 1: logprob"), std::string::npos);
  RequestRecord failed = a;
  failed.success = false;
  const std::vector<RequestRecord> rf = {failed};
  EXPECT_FALSE(compare_runs(ra, rf).identical());  // a failed request is not a pass
}

TEST(Config, PresetsAndBadCombinationsAreNamed) {
  EXPECT_FALSE(find_preset("nope").ok());
  EXPECT_NE(find_preset("nope").status().message().find("cpu-small"), std::string::npos);
  for (const BenchPreset& p : bench_presets()) {
    BenchConfig c;
    p.apply(c);
    EXPECT_TRUE(finalize_config(c).ok()) << p.name;
  }
  BenchConfig sweep;
  sweep.sweep_concurrency = {1, 4};
  sweep.max_concurrency = 2;
  EXPECT_NE(finalize_config(sweep).message().find("--sweep-concurrency"), std::string::npos);
  BenchConfig rate;
  rate.request_rate = -1;
  EXPECT_NE(finalize_config(rate).message().find("--request-rate"), std::string::npos);
  BenchConfig file;
  file.workload.kind = "file";
  EXPECT_NE(finalize_config(file).message().find("--prompts-file"), std::string::npos);
  BenchConfig len;
  len.output_len = "9:3";
  EXPECT_NE(finalize_config(len).message().find("--output-len"), std::string::npos);
}

TEST(Progress, TheBarSaysWhereTheRunIs) {
  const std::string line = progress_line(5, 10, 3, 200, 4.0);
  EXPECT_NE(line.find("[###############               ]"), std::string::npos);
  EXPECT_NE(line.find("5/10 done, 3 running, 200 output tokens, 50.0 tok/s, 4.0 s"), std::string::npos);
}

}  // namespace
}  // namespace vosti::bench
