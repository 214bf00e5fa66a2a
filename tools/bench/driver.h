// The benchmark driver: sends a workload's requests to a target at their arrival times, under
// an optional cap on requests in flight (fixed concurrency), collects every record, shows a
// progress bar, and stops early, with what was measured so far, when the user interrupts or
// the server becomes unreachable. Never waits without bound: a stop gives the requests in
// flight RunOptions::abort_grace_s to come back, then reports them failed.
// Thread safety: run_workload runs on the caller's thread; `interrupted` may be set from any.
#pragma once

#include <atomic>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "tools/bench/arrivals.h"
#include "tools/bench/metrics.h"
#include "tools/bench/target.h"
#include "tools/bench/workload.h"

namespace vosti::bench {

struct RunOptions {
  std::string label;            // "main", "concurrency 8", "determinism pass 2", ...
  int64_t max_concurrency = 0;  // requests in flight at most; 0: no cap
  ArrivalConfig arrivals;
  SamplingOptions sampling;
  bool reverse_order = false;  // send the workload last request first
  bool progress = false;       // a progress bar on stderr
  const std::atomic<bool>* interrupted = nullptr;
  double abort_grace_s = 30;  // after a stop, how long requests in flight get to come back
};

struct RunResult {
  RunOptions options;
  std::vector<RequestRecord> records;  // [requests] by workload index (unsent ones: sent == false)
  double duration_s = 0;               // first send to the last response (or the stop)
  std::string stopped_early;           // why the run stopped before every request was answered
  TargetCounters before, after;        // target counters around the run
  BenchMetrics metrics;
};

// Runs `requests` (indices 0..n-1) on `target`; `clock` is restarted at the first send.
RunResult run_workload(Target& target, RunClock& clock, std::span<const BenchRequest> requests,
                       const RunOptions& options);

// One line of the progress bar (no newline): done/total, running, output tokens, tok/s, time.
std::string progress_line(int64_t done, int64_t total, int64_t running, int64_t output_tokens, double elapsed_s);

}  // namespace vosti::bench
