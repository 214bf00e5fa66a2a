// tools/bench/report.h: the counters' deltas over a run, the engine's step-time split included.
#include "tools/bench/report.h"

#include <gtest/gtest.h>

namespace vosti::bench {
namespace {

TargetCounters engine_counters(double step_s, double forward_s, double sampling_s, int64_t preemptions) {
  TargetCounters c;
  c.prefix_cache_queries = 100;
  c.prefix_cache_hits = 25;
  c.preemptions = preemptions;
  c.step_s = step_s;
  c.forward_s = forward_s;
  c.sampling_s = sampling_s;
  c.source = "engine";
  return c;
}

TEST(CounterDelta, SplitsTheEnginesStepTimeOverTheRun) {
  // Before the run (warm-ups): 1 s of steps; the run adds 10 s: 9 forward, 0.5 sampling, 0.5 the rest.
  const CounterDelta d = counter_delta(engine_counters(1.0, 0.8, 0.1, 2), engine_counters(11.0, 9.8, 0.6, 5));
  ASSERT_TRUE(d.step_s && d.forward_fraction && d.sampling_fraction && d.bookkeeping_fraction);
  EXPECT_DOUBLE_EQ(*d.step_s, 10.0);
  EXPECT_NEAR(*d.forward_fraction, 0.9, 1e-12);
  EXPECT_NEAR(*d.sampling_fraction, 0.05, 1e-12);
  EXPECT_NEAR(*d.bookkeeping_fraction, 0.05, 1e-12);
  EXPECT_EQ(d.preemptions, 3);
}

TEST(CounterDelta, NoStepTimeWhereTheTargetReportsNone) {
  TargetCounters server;  // an HTTP server: /metrics counters, no engine clock
  server.preemptions = 0;
  server.source = "server /metrics (vosti)";
  const CounterDelta d = counter_delta(server, server);
  EXPECT_FALSE(d.step_s);
  EXPECT_FALSE(d.bookkeeping_fraction);
  const CounterDelta idle = counter_delta(engine_counters(1, 1, 0, 0), engine_counters(1, 1, 0, 0));
  ASSERT_TRUE(idle.step_s);
  EXPECT_EQ(*idle.step_s, 0.0);
  EXPECT_FALSE(idle.forward_fraction);  // no step ran: no shares
}

}  // namespace
}  // namespace vosti::bench
