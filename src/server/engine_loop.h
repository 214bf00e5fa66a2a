// EngineLoop: drives one Engine on its own thread for the server, and gates what reaches it.
//
// The thread runs step() while the engine has work and otherwise sleeps on a condition
// variable that submit(), abort() and the control calls signal (no lost wake-ups: the thread
// snapshots a wake-up counter before it drains the work). Output callbacks run on this thread;
// the server's callbacks only post to a connection's strand. After every step it snapshots
// Engine::stats() and the runner's info for /metrics.
//
// Admission and control (the RL trainers' protocol: weight updates, pause/resume, sleep/wake):
// - Admission is open unless the loop is paused or a control operation is pending. While it is
//   closed, submissions are held, in order, and added to the engine when it opens again. A
//   submission is added to the engine under mu_ together with the deployment it will run on.
// - run_when_idle(op): closes admission, lets the engine finish everything already in flight,
//   then runs `op` on the engine thread between steps (e.g. Engine::replace_model), then opens
//   admission again. So a request either runs entirely before the op or entirely after it: no
//   response mixes two weights. While paused with kKeep the op runs at the next step boundary
//   with the kept requests still in the engine (an op that needs none must refuse: the engine's
//   replace_model and sleep do).
// - pause(kWait | kAbort) closes admission and reports once nothing is in flight (for kAbort the
//   caller aborts the requests first); pause(kKeep) also stops stepping at the next step
//   boundary, leaving requests where they are. resume() reopens admission and steps again.
// Invariants: ops run one at a time, in the order queued, on the engine thread; deployment_
// changes only inside an op; a held submission is added before any submission made later.
// Thread safety: every public method may be called from any thread. Lock order: mu_, then
// the engine's own lock (add_request), then stats_mu_.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "engine/engine.h"
#include "model/model_config.h"
#include "offline/weights_identity.h"
#include "runner/model_runner.h"

namespace vosti {

struct EngineLoopStats {
  EngineStats engine;
  RunnerInfo runner;                        // after the latest step or control operation (bytes released while asleep)
  double generation_tokens_per_second = 0;  // over the last few seconds of work; 0 when idle
  bool busy = false;
};

// Why a submission was not added to the engine.
enum class AdmissionRefusal : uint8_t {
  kNone,                // admitted
  kInvalid,             // the engine rejected a request (Engine::add_request's message)
  kAsleep,              // the engine sleeps (POST /wake_up first)
  kDeploymentMismatch,  // the pinned deployment id is not the one served
  kShuttingDown,        // dropped while held, at shutdown
};

// The outcome of submit(): the engine ids and the deployment they run on, or a refusal.
struct Admission {
  AdmissionRefusal refusal = AdmissionRefusal::kNone;
  std::string message;                               // the refusal, named
  std::vector<RequestId> ids;                        // [submissions] when admitted
  std::shared_ptr<const DeploymentInfo> deployment;  // the deployment served at admission
};

enum class PauseMode : uint8_t { kAbort, kWait, kKeep };

class EngineLoop {
 public:
  // Starts the engine thread. REQUIRES: engine != nullptr, deployment != nullptr.
  EngineLoop(std::unique_ptr<Engine> engine, std::shared_ptr<const DeploymentInfo> deployment);
  ~EngineLoop();
  EngineLoop(const EngineLoop&) = delete;
  EngineLoop& operator=(const EngineLoop&) = delete;

  struct Submission {
    RequestSpec spec;
    OutputCallback callback;
  };
  using AdmissionCallback = std::function<void(Admission)>;
  // Adds every submission, in order, all or none, then wakes the engine thread once: an idle
  // engine admits them together, in its next step. With admission open, `done` runs before this
  // returns; closed, the submissions are held and `done` runs on the engine thread when they are
  // added. `pin`, when not empty, must equal the deployment id at admission (else kDeploymentMismatch).
  void submit(std::vector<Submission> submissions, std::string pin, AdmissionCallback done);
  // Engine::abort, then wakes the engine thread (the final kAbort output comes from a step).
  void abort(RequestId id);
  // Engine::reset_prefix_cache, then wakes the engine thread (which applies it before admitting
  // anything added later).
  void reset_prefix_cache();

  using ControlOp = std::function<void(Engine& engine)>;
  // Runs `op` on the engine thread once nothing is in flight (see the header comment).
  void run_when_idle(ControlOp op);
  // Sets the deployment later admissions run on. REQUIRES: called from inside a ControlOp.
  void set_deployment(std::shared_ptr<const DeploymentInfo> deployment);
  std::shared_ptr<const DeploymentInfo> deployment() const;
  // Snapshots the engine's stats and runner info for stats() now (an op that changed them,
  // before it replies). REQUIRES: called from inside a ControlOp.
  void refresh_stats() { snapshot(false); }

  // Pauses (see the header comment); `done` runs on the engine thread once paused. Pausing a
  // paused loop changes its mode (kKeep freezes, the others let kept requests run to the end).
  void pause(PauseMode mode, std::function<void()> done);
  // Reopens admission (adding the held submissions) and steps kept requests. False if not paused.
  bool resume();
  bool paused() const;
  // Submissions held while admission is closed.
  int64_t num_held() const;
  // Refuses every held submission with kShuttingDown (their callbacks run now, on this thread).
  void drop_held();
  // 0 awake, else the level of the engine's sleep.
  int sleep_level() const { return engine_->sleep_level(); }

  // The snapshot taken after the latest step.
  EngineLoopStats stats() const;
  const EngineConfig& config() const { return engine_->config(); }
  // The served model's architecture (weight updates keep it) and path at start.
  const ModelConfig& model_config() const { return model_config_; }
  const std::string& model_path() const { return model_path_; }
  // Stops the thread after the current step; requests left are dropped. Idempotent.
  void stop();

 private:
  struct Held {
    std::vector<Submission> submissions;
    std::string pin;
    AdmissionCallback done;
  };
  struct PendingOp {
    ControlOp op;
    bool needs_idle = true;  // false: runs at the next step boundary
  };
  // Adds one submission batch to the engine. REQUIRES: mu_ held.
  Admission admit_locked(std::vector<Submission>& submissions, const std::string& pin);
  bool admission_open_locked() const { return !paused_ && ops_.empty(); }
  void queue_op(PendingOp op);
  // Engine thread: runs the ops that can run now; then, if admission opened, adds the held.
  void run_ops();
  void run();
  void wake();
  void snapshot(bool busy);

  std::unique_ptr<Engine> engine_;
  const ModelConfig model_config_;
  const std::string model_path_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  uint64_t num_wakeups_ = 0;                          // guarded by mu_
  bool stop_ = false;                                 // guarded by mu_
  bool paused_ = false;                               // guarded by mu_
  bool frozen_ = false;                               // guarded by mu_: paused with kKeep, not stepping
  std::deque<PendingOp> ops_;                         // guarded by mu_; the front runs, then pops
  std::deque<Held> held_;                             // guarded by mu_
  std::shared_ptr<const DeploymentInfo> deployment_;  // guarded by mu_
  mutable std::mutex stats_mu_;
  EngineLoopStats stats_;  // guarded by stats_mu_
  // Rate window, engine thread only.
  std::chrono::steady_clock::time_point window_start_{};
  int64_t window_tokens_ = 0;
  std::thread thread_;
};

}  // namespace vosti
