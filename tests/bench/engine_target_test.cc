// tools/bench/engine_target.h on the default model: every output token is one delivery, the
// records carry the engine's counts, content (ids, logprobs, digests) when asked, and an
// abort comes back as a failed record naming why.
#include "tools/bench/engine_target.h"

#include <gtest/gtest.h>

#include <cstdlib>

#include "tools/bench/driver.h"

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

std::vector<BenchRequest> three_requests() {
  std::vector<BenchRequest> rs(3);
  for (int i = 0; i < 3; ++i) {
    rs[i].index = i;
    rs[i].prompt_ids = {1, 504, 3458 + i, 28, 253};
    rs[i].max_tokens = 4 + i;
    rs[i].seed = 11 + static_cast<uint64_t>(i);
  }
  return rs;
}

TEST(EngineTarget, OneDeliveryPerTokenAndTheEnginesCounts) {
  RunClock clock;
  auto target = open(&clock);
  if (!target) GTEST_SKIP() << "VOSTI_DEFAULT_MODEL is not set (scripts/test sets it)";
  RunOptions o;
  o.sampling.ignore_eos = true;
  o.sampling.want_content = true;
  o.sampling.temperature = 0.7;
  const auto requests = three_requests();
  const RunResult r = run_workload(*target, clock, requests, o);
  ASSERT_EQ(r.metrics.num_completed, 3);
  for (const RequestRecord& rec : r.records) {
    const int64_t n = 4 + rec.index;
    EXPECT_EQ(rec.num_output_tokens, n);
    EXPECT_EQ(rec.num_prompt_tokens, 5);
    EXPECT_EQ(static_cast<int64_t>(rec.delivery_s.size()), n);  // one token per engine step
    EXPECT_EQ(static_cast<int64_t>(rec.content.token_ids.size()), n);
    EXPECT_EQ(static_cast<int64_t>(rec.content.digests.size()), n);
    EXPECT_EQ(static_cast<int64_t>(rec.content.logprobs.size()), n);
    EXPECT_EQ(rec.seed, 11u + static_cast<uint64_t>(rec.index));
    EXPECT_EQ(rec.finish_reason, "length");
    EXPECT_GT(*ttft_s(rec), 0);
    EXPECT_GE(rec.end_s, rec.delivery_s.back());
  }
  EXPECT_EQ(r.metrics.total_output_tokens, 4 + 5 + 6);
  ASSERT_TRUE(r.after.prefix_cache_queries.has_value());
  EXPECT_EQ(*r.after.prefix_cache_queries - *r.before.prefix_cache_queries, 15);
  // The same requests again, last first and one at a time: the same tokens and digests.
  o.reverse_order = true;
  o.max_concurrency = 1;
  const RunResult again = run_workload(*target, clock, requests, o);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(again.records[i].content.token_ids, r.records[i].content.token_ids);
    EXPECT_EQ(again.records[i].content.digests, r.records[i].content.digests);
  }
}

TEST(EngineTarget, AnAbortComesBackAsAFailedRecord) {
  RunClock clock;
  auto target = open(&clock);
  if (!target) GTEST_SKIP() << "VOSTI_DEFAULT_MODEL is not set (scripts/test sets it)";
  BenchRequest r;
  r.prompt_ids = {1, 504, 3458};
  r.max_tokens = 1000;
  SamplingOptions o;
  o.ignore_eos = true;
  target->submit(r, o, clock.now_s());
  std::vector<RequestRecord> done;
  for (int i = 0; i < 3 && done.empty(); ++i) done = target->wait(clock.now_s() + 1);
  EXPECT_TRUE(done.empty());
  target->abort_all("test stop");
  for (int i = 0; i < 50 && done.empty(); ++i) done = target->wait(clock.now_s() + 1);
  ASSERT_EQ(done.size(), 1u);
  EXPECT_FALSE(done[0].success);
  EXPECT_EQ(done[0].error, "aborted: test stop");
  BenchRequest too_long;
  too_long.index = 1;
  too_long.prompt_ids.assign(100000, 5);
  too_long.max_tokens = 1;
  target->submit(too_long, o, clock.now_s());
  done = target->wait(clock.now_s() + 1);
  ASSERT_EQ(done.size(), 1u);
  EXPECT_FALSE(done[0].success);
  EXPECT_FALSE(done[0].error.empty());
}

}  // namespace
}  // namespace vosti::bench
