// tools/bench/paper_workloads.h on the default model, in-process, at a few tokens: the
// multi-session replay builds each turn from the previous prompt, its output and new tokens, waits
// the think time, and finds the shared prefix and earlier turns in the prefix cache; the aligned
// phases find exactly their cached context.
#include "tools/bench/paper_workloads.h"

#include <gtest/gtest.h>

#include <cstdlib>

#include "tools/bench/engine_target.h"

namespace vosti::bench {
namespace {

std::unique_ptr<EngineTarget> open(const RunClock* clock) {
  const char* path = std::getenv("VOSTI_DEFAULT_MODEL");
  if (!path || !*path) return nullptr;
  EngineConfig config;
  config.num_threads = 2;
  config.max_num_seqs = 4;
  auto t = EngineTarget::create(path, config, clock);
  EXPECT_TRUE(t.ok()) << t.status().to_string();
  return t.ok() ? std::move(t).value() : nullptr;
}

TEST(PaperWorkloads, SessionsGrowTurnByTurnAndHitTheirPrefixes) {
  RunClock clock;
  auto target = open(&clock);
  if (!target) GTEST_SKIP() << "VOSTI_DEFAULT_MODEL is not set (scripts/test sets it)";
  SessionsConfig c;
  c.num_sessions = 2;
  c.num_turns = 3;
  c.shared_len = 40;
  c.distinct_len = 24;
  c.append_len = 8;
  c.think_s = 0.05;
  PaperRunOptions o;
  o.output_len = 4;
  o.request_rate = 0;  // every first turn at once
  const PaperRunResult run = run_sessions(*target, clock, *target->tokenizer(), c, o);
  ASSERT_TRUE(run.stopped_early.empty()) << run.stopped_early;
  ASSERT_EQ(run.groups.size(), 3u);
  for (size_t t = 0; t < 3; ++t) {
    const GroupResult& g = run.groups[t];
    EXPECT_EQ(g.label, "turn " + std::to_string(t + 1));
    ASSERT_EQ(g.metrics.num_completed, 2);
    for (const RequestRecord& r : g.records) {
      EXPECT_EQ(r.num_prompt_tokens, 64 + static_cast<int64_t>(t) * (4 + 8));
      EXPECT_EQ(r.num_output_tokens, 4);
      // Turn 1 finds the shared prefix (its donor ran first): 2 blocks of 16. A later turn finds
      // the previous turn's full blocks: its prompt and the outputs fed back (all but the last).
      const int64_t previous_computed = 64 + (static_cast<int64_t>(t) - 1) * 12 + 3;
      EXPECT_EQ(r.num_cached_tokens, t == 0 ? 32 : previous_computed / 16 * 16);
    }
  }
  for (int s = 0; s < 2; ++s)  // a turn waits for its predecessor and the think time
    for (size_t t = 1; t < 3; ++t)
      EXPECT_GE(run.groups[t].records[static_cast<size_t>(s)].send_s,
                run.groups[t - 1].records[static_cast<size_t>(s)].end_s + 0.05 - 1e-9);
  EXPECT_GT(*run.groups[1].metrics.cached_token_fraction, 0.5);
  EXPECT_EQ(run.overall.num_completed, 6);
}

TEST(PaperWorkloads, PhasesFindExactlyTheirCachedContext) {
  RunClock clock;
  auto target = open(&clock);
  if (!target) GTEST_SKIP() << "VOSTI_DEFAULT_MODEL is not set (scripts/test sets it)";
  PhasesConfig c;
  c.batch = 2;
  c.cached_contexts = {0, 32};
  c.new_tokens = 8;
  PaperRunOptions o;
  o.output_len = 4;
  const PaperRunResult run = run_phases(*target, clock, *target->tokenizer(), c, o);
  ASSERT_TRUE(run.stopped_early.empty()) << run.stopped_early;
  ASSERT_EQ(run.groups.size(), 2u);
  for (size_t k = 0; k < 2; ++k) {
    const int64_t cached = k == 0 ? 0 : 32;
    EXPECT_EQ(run.groups[k].label, "cached " + std::to_string(cached));
    for (const RequestRecord& r : run.groups[k].records) {
      EXPECT_TRUE(r.success) << r.error;
      EXPECT_EQ(r.num_prompt_tokens, cached + 8);
      EXPECT_EQ(r.num_cached_tokens, cached);
      EXPECT_EQ(r.num_output_tokens, 4);
    }
    EXPECT_GT(run.groups[k].prefill_tok_s, 0);
    EXPECT_GT(run.groups[k].decode_tok_s, 0);
  }
  const nlohmann::ordered_json j = paper_run_json(run);
  EXPECT_EQ(j["groups"][1]["metrics"]["prefix_cache_hit_rate"], 32.0 / 40.0);
}

}  // namespace
}  // namespace vosti::bench
