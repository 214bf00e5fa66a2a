// tools/bench/driver.h with a scripted target: arrival order, the concurrency cap, and the
// early stops (interrupt, unreachable server, a target that never answers) that must end a
// run with a partial report instead of a hang.
#include "tools/bench/driver.h"

#include <gtest/gtest.h>

#include <deque>
#include <thread>

namespace vosti::bench {
namespace {

// Answers each request `latency_s` after it was sent with `tokens` output tokens, unless it
// is told to hang; records what it saw.
class ScriptedTarget : public Target {
 public:
  explicit ScriptedTarget(const RunClock* clock) : clock_(clock) {}
  double latency_s = 0.01;
  int64_t tokens = 3;
  bool hang = false;  // never answer, even after abort_all
  int64_t unreachable_after = -1;
  std::vector<int64_t> order;
  int64_t max_in_flight = 0;
  std::string aborted_with;

  void submit(const BenchRequest& request, const SamplingOptions&, double send_s) override {
    order.push_back(request.index);
    pending_.push_back({request.index, send_s});
    max_in_flight = std::max<int64_t>(max_in_flight, static_cast<int64_t>(pending_.size()));
  }
  std::vector<RequestRecord> wait(double deadline_s) override {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    std::vector<RequestRecord> out;
    const double now = clock_->now_s();
    for (auto it = pending_.begin(); it != pending_.end();) {
      const bool due = !hang && (now - it->second >= latency_s || !aborted_with.empty());
      if (!due) {
        ++it;
        continue;
      }
      RequestRecord r;
      r.index = it->first;
      r.sent = true;
      r.send_s = it->second;
      r.end_s = now;
      r.success = aborted_with.empty();
      if (!r.success) r.error = "aborted: " + aborted_with;
      r.delivery_s = {now};
      r.num_output_tokens = tokens;
      r.num_prompt_tokens = 5;
      out.push_back(r);
      ++answered_;
      it = pending_.erase(it);
    }
    (void)deadline_s;
    return out;
  }
  void abort_all(const std::string& why) override { aborted_with = why; }
  int64_t num_output_tokens_in_flight() const override { return 0; }
  std::optional<std::string> unreachable() const override {
    if (unreachable_after >= 0 && answered_ >= unreachable_after) return "connection refused";
    return std::nullopt;
  }
  TargetCounters counters() override { return {}; }

 private:
  const RunClock* clock_;
  std::deque<std::pair<int64_t, double>> pending_;
  int64_t answered_ = 0;
};

std::vector<BenchRequest> requests(int n) {
  std::vector<BenchRequest> rs(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) rs[static_cast<size_t>(i)].index = i;
  return rs;
}

TEST(Driver, SendsEveryRequestUnderTheCapInOrderOrReversed) {
  RunClock clock;
  ScriptedTarget t(&clock);
  RunOptions o;
  o.max_concurrency = 3;
  const RunResult r = run_workload(t, clock, requests(10), o);
  EXPECT_TRUE(r.stopped_early.empty());
  EXPECT_EQ(r.metrics.num_completed, 10);
  EXPECT_EQ(r.metrics.total_output_tokens, 30);
  EXPECT_EQ(t.max_in_flight, 3);
  EXPECT_EQ(t.order, (std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}));
  ScriptedTarget back(&clock);
  o.reverse_order = true;
  o.max_concurrency = 0;
  run_workload(back, clock, requests(4), o);
  EXPECT_EQ(back.order, (std::vector<int64_t>{3, 2, 1, 0}));
  EXPECT_EQ(back.max_in_flight, 4);
}

TEST(Driver, PoissonArrivalsSpreadTheSends) {
  RunClock clock;
  ScriptedTarget t(&clock);
  RunOptions o;
  o.arrivals.request_rate = 200;
  const RunResult r = run_workload(t, clock, requests(20), o);
  EXPECT_EQ(r.metrics.num_completed, 20);
  const std::vector<double> expected = arrival_times(20, o.arrivals);
  for (size_t i = 0; i < 20; ++i) EXPECT_GE(r.records[i].send_s + 1e-9, expected[i]);
}

TEST(Driver, AnInterruptStopsWithAPartialReport) {
  RunClock clock;
  ScriptedTarget t(&clock);
  t.latency_s = 0.05;
  std::atomic<bool> interrupted{false};
  RunOptions o;
  o.max_concurrency = 1;
  o.interrupted = &interrupted;
  std::thread stopper([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(130));
    interrupted = true;
  });
  const RunResult r = run_workload(t, clock, requests(100), o);
  stopper.join();
  EXPECT_EQ(r.stopped_early, "interrupted (Ctrl-C)");
  EXPECT_GE(r.metrics.num_completed, 1);
  EXPECT_LT(r.metrics.num_completed, 100);
  EXPECT_GE(r.metrics.num_not_sent, 90);
  EXPECT_EQ(t.aborted_with, "interrupted (Ctrl-C)");
}

TEST(Driver, AnUnreachableServerStopsSending) {
  RunClock clock;
  ScriptedTarget t(&clock);
  t.unreachable_after = 2;
  RunOptions o;
  o.max_concurrency = 1;
  const RunResult r = run_workload(t, clock, requests(50), o);
  EXPECT_NE(r.stopped_early.find("unresponsive: connection refused"), std::string::npos);
  EXPECT_EQ(r.metrics.num_completed, 2);
  EXPECT_GE(r.metrics.num_not_sent, 47);
}

TEST(Driver, ATargetThatNeverAnswersAfterAStopDoesNotHang) {
  RunClock clock;
  ScriptedTarget t(&clock);
  t.hang = true;
  std::atomic<bool> interrupted{true};
  RunOptions o;
  o.interrupted = &interrupted;
  o.abort_grace_s = 0.2;
  o.max_concurrency = 2;
  const auto t0 = std::chrono::steady_clock::now();
  // The interrupt is already set: nothing is sent.
  RunResult r = run_workload(t, clock, requests(4), o);
  EXPECT_EQ(r.metrics.num_not_sent, 4);
  // Interrupted after two requests hang in flight: they come back failed after the grace.
  interrupted = false;
  std::thread stopper([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    interrupted = true;
  });
  r = run_workload(t, clock, requests(4), o);
  stopper.join();
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 5.0);
  EXPECT_EQ(r.metrics.num_failed, 2);
  EXPECT_NE(r.records[0].error.find("no response within"), std::string::npos);
}

}  // namespace
}  // namespace vosti::bench
