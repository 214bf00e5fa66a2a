// Target: what `vosti bench` drives, the engine in this process (EngineTarget) or an
// OpenAI-compatible server over HTTP (HttpTarget). The driver (driver.h) submits requests at
// their arrival times and collects their records; a target never decides when to send.
//
// Every time is a reading of the RunClock the target was made with.
// Thread safety: every method is called from the driver's one thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "tools/bench/metrics.h"
#include "tools/bench/workload.h"

namespace vosti::bench {

// The run's clock: seconds since restart(), the same for the driver and its target.
class RunClock {
 public:
  void restart() { start_ = std::chrono::steady_clock::now(); }
  double now_s() const { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count(); }

 private:
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};

// Engine or server counters at one moment; nullopt where the target does not report one.
struct TargetCounters {
  std::optional<int64_t> prefix_cache_queries;  // prompt tokens looked up in the prefix cache
  std::optional<int64_t> prefix_cache_hits;     // of which served from it
  std::optional<double> prefix_cache_hit_rate;  // when only a rate is reported (SGLang)
  std::optional<int64_t> preemptions;
  // Speculative decoding: draft tokens verified, and of them accepted.
  std::optional<int64_t> draft_tokens, accepted_tokens;
  // The engine's own clock (in-process only): wall seconds inside its steps, of which in the model
  // forward and in sampling (the rest: scheduling, cache bookkeeping, batch building, postprocess).
  std::optional<double> step_s, forward_s, sampling_s;
  std::string source;  // "engine", "server /metrics (vllm)", ... or "" (none)
};

// What one sent request asks for besides the workload's fields.
struct SamplingOptions {
  double temperature = 0;
  bool ignore_eos = false;
  bool want_content = false;    // token ids / logprobs / digests for --check-determinism
  bool want_token_ids = false;  // the output's token ids (a session's next turn is built from them)
};

class Target {
 public:
  virtual ~Target() = default;
  // Sends `request` now; `send_s` is the run clock's reading. Its record comes out of a later wait().
  virtual void submit(const BenchRequest& request, const SamplingOptions& options, double send_s) = 0;
  // Makes progress until a request finishes or the run clock reaches deadline_s (returns at
  // least every 100 ms); returns the records of the requests that finished meanwhile.
  virtual std::vector<RequestRecord> wait(double deadline_s) = 0;
  // Stops every request in flight; each still comes out of wait(), failed with `why`.
  virtual void abort_all(const std::string& why) = 0;
  // Output tokens received so far by requests still in flight (the progress bar's count).
  virtual int64_t num_output_tokens_in_flight() const = 0;
  // Set when the server cannot be reached any more: the driver stops sending.
  virtual std::optional<std::string> unreachable() const = 0;
  virtual TargetCounters counters() = 0;
};

}  // namespace vosti::bench
