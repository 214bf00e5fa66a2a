// EngineLoop: drives one Engine on its own thread for the server.
//
// The thread runs step() while the engine has work and otherwise sleeps on a
// condition variable that add_request() and abort() signal (no lost wake-ups: the
// thread snapshots a wake-up counter before it drains the work). Output callbacks run
// on this thread; the server's callbacks only post to a connection's strand.
// After every step it snapshots Engine::stats() for /metrics.
// Thread safety: every public method may be called from any thread.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "engine/engine.h"
#include "runner/device_model.h"

namespace vosti {

struct EngineLoopStats {
  EngineStats engine;
  double generation_tokens_per_second = 0;  // over the last few seconds of work; 0 when idle
  bool busy = false;
};

class EngineLoop {
 public:
  // Starts the engine thread. REQUIRES: engine != nullptr.
  explicit EngineLoop(std::unique_ptr<Engine> engine);
  ~EngineLoop();
  EngineLoop(const EngineLoop&) = delete;
  EngineLoop& operator=(const EngineLoop&) = delete;

  // Engine::add_request, then wakes the engine thread.
  Result<RequestId> add_request(RequestSpec spec, OutputCallback callback);
  struct Submission {
    RequestSpec spec;
    OutputCallback callback;
  };
  // Adds every submission, in order, then wakes the engine thread once: an idle engine admits
  // them together, in its next step (a batched completion's prompts share that step). All or
  // none: on a rejection the ones added are aborted and the error returned.
  Result<std::vector<RequestId>> add_requests(std::vector<Submission> submissions);
  // Engine::abort, then wakes the engine thread (the final kAbort output comes from a step).
  void abort(RequestId id);
  // Engine::reset_prefix_cache, then wakes the engine thread (which applies it before admitting
  // anything added later).
  void reset_prefix_cache();
  // The snapshot taken after the latest step.
  EngineLoopStats stats() const;
  const EngineConfig& config() const { return engine_->config(); }
  const DeviceModel& model() const { return engine_->model(); }
  const RunnerInfo& runner_info() const { return engine_->runner_info(); }
  // Stops the thread after the current step; requests left are dropped. Idempotent.
  void stop();

 private:
  void run();
  void wake();
  void snapshot(bool busy);

  std::unique_ptr<Engine> engine_;
  std::mutex mu_;
  std::condition_variable cv_;
  uint64_t num_wakeups_ = 0;  // guarded by mu_
  bool stop_ = false;         // guarded by mu_
  mutable std::mutex stats_mu_;
  EngineLoopStats stats_;  // guarded by stats_mu_
  // Rate window, engine thread only.
  std::chrono::steady_clock::time_point window_start_{};
  int64_t window_tokens_ = 0;
  std::thread thread_;
};

}  // namespace vosti
