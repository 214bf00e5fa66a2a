#include "tools/bench/driver.h"

#include <unistd.h>

#include <cstdio>

namespace vosti::bench {
namespace {

// The progress bar: redrawn on stderr at most every 100 ms, cleared at the end.
class ProgressBar {
 public:
  explicit ProgressBar(bool on) : on_(on && isatty(STDERR_FILENO)) {}
  void update(double now_s, int64_t done, int64_t total, int64_t running, int64_t tokens) {
    if (!on_ || now_s - last_s_ < 0.1) return;
    last_s_ = now_s;
    std::fprintf(stderr, "\r\033[K%s", progress_line(done, total, running, tokens, now_s).c_str());
    std::fflush(stderr);
  }
  ~ProgressBar() {
    if (on_) std::fprintf(stderr, "\r\033[K");
  }

 private:
  bool on_;
  double last_s_ = -1;
};

}  // namespace

std::string progress_line(int64_t done, int64_t total, int64_t running, int64_t output_tokens, double elapsed_s) {
  constexpr int kWidth = 30;
  const int filled = total > 0 ? static_cast<int>(kWidth * done / total) : 0;
  char buf[256];
  std::snprintf(buf, sizeof buf, "[%.*s%*s] %lld/%lld done, %lld running, %lld output tokens, %.1f tok/s, %.1f s",
                filled, "##############################", kWidth - filled, "", static_cast<long long>(done),
                static_cast<long long>(total), static_cast<long long>(running), static_cast<long long>(output_tokens),
                elapsed_s > 0 ? static_cast<double>(output_tokens) / elapsed_s : 0.0, elapsed_s);
  return buf;
}

RunResult run_workload(Target& target, RunClock& clock, std::span<const BenchRequest> requests,
                       const RunOptions& options) {
  RunResult result;
  result.options = options;
  const int64_t n = static_cast<int64_t>(requests.size());
  result.records.resize(requests.size());
  for (int64_t i = 0; i < n; ++i) result.records[static_cast<size_t>(i)].index = i;
  const std::vector<double> times = arrival_times(n, options.arrivals);
  result.before = target.counters();
  ProgressBar bar(options.progress);
  clock.restart();
  int64_t next = 0, in_flight = 0, done = 0, done_tokens = 0;
  double stop_s = 0;
  const auto cap_allows = [&] { return options.max_concurrency <= 0 || in_flight < options.max_concurrency; };
  const auto stop = [&](const std::string& why) {
    result.stopped_early = why;
    stop_s = clock.now_s();
    target.abort_all(why);
  };
  while (next < n || in_flight > 0) {
    if (result.stopped_early.empty()) {
      if (options.interrupted && options.interrupted->load()) {
        stop("interrupted (Ctrl-C)");
      } else if (auto why = target.unreachable()) {
        stop("the server is unreachable or unresponsive: " + *why);
      }
    }
    const bool stopping = !result.stopped_early.empty();
    if (stopping && (in_flight == 0 || clock.now_s() - stop_s > options.abort_grace_s)) break;
    while (!stopping && next < n && times[static_cast<size_t>(next)] <= clock.now_s() && cap_allows()) {
      const size_t i = static_cast<size_t>(options.reverse_order ? n - 1 - next : next);
      result.records[i].sent = true;
      result.records[i].send_s = clock.now_s();
      target.submit(requests[i], options.sampling, result.records[i].send_s);
      ++next;
      ++in_flight;
    }
    const bool can_send_later = !stopping && next < n && cap_allows();
    const double deadline = can_send_later ? times[static_cast<size_t>(next)] : clock.now_s() + 0.1;
    for (RequestRecord& r : target.wait(deadline)) {
      const size_t i = static_cast<size_t>(r.index);
      if (r.index < 0 || r.index >= n || !result.records[i].sent) continue;  // not this run's
      done_tokens += r.success ? r.num_output_tokens : 0;
      result.records[i] = std::move(r);
      --in_flight;
      ++done;
    }
    bar.update(clock.now_s(), done, n, in_flight, done_tokens + target.num_output_tokens_in_flight());
  }
  result.duration_s = std::max(clock.now_s(), 1e-9);
  for (RequestRecord& r : result.records) {
    if (r.sent && !r.success && r.error.empty()) {
      r.error = "no response within " + std::to_string(options.abort_grace_s) + " s of the stop";
    }
  }
  result.after = target.counters();
  result.metrics = compute_metrics(result.records, result.duration_s);
  return result;
}

}  // namespace vosti::bench
