#include "server/engine_loop.h"

#include <chrono>

#include "runner/device_model.h"

namespace vosti {
namespace {

const Engine& required(const std::unique_ptr<Engine>& engine) {
  VOSTI_CHECK(engine != nullptr, "EngineLoop needs an engine");
  return *engine;
}

}  // namespace

EngineLoop::EngineLoop(std::unique_ptr<Engine> engine, std::shared_ptr<const DeploymentInfo> deployment)
    : engine_(std::move(engine)),
      model_config_(required(engine_).model().config()),
      model_path_(engine_->model().path()),
      deployment_(std::move(deployment)) {
  VOSTI_CHECK(deployment_ != nullptr, "EngineLoop needs the deployment it serves");
  snapshot(false);
  thread_ = std::thread([this] { run(); });
}

EngineLoop::~EngineLoop() { stop(); }

Admission EngineLoop::admit_locked(std::vector<Submission>& submissions, const std::string& pin) {
  Admission a;
  a.deployment = deployment_;
  if (const int level = engine_->sleep_level(); level != 0) {
    a.refusal = AdmissionRefusal::kAsleep;
    a.message = "the engine is asleep (level " + std::to_string(level) + "): POST /wake_up before sending requests";
    return a;
  }
  if (!pin.empty() && pin != deployment_->deployment_id) {
    a.refusal = AdmissionRefusal::kDeploymentMismatch;
    a.message = "the request pins deployment " + pin + ", but this server now serves deployment " +
                deployment_->deployment_id + " (weights " + deployment_->weights_id + ", version " +
                std::to_string(deployment_->weights_version) + "); re-read GET /deployment and re-pin";
    return a;
  }
  a.ids.reserve(submissions.size());
  for (Submission& s : submissions) {
    auto id = engine_->add_request(std::move(s.spec), std::move(s.callback));
    if (!id.ok()) {
      for (RequestId added : a.ids) engine_->abort(added);
      a.ids.clear();
      a.refusal = AdmissionRefusal::kInvalid;
      a.message = id.status().message();
      return a;
    }
    a.ids.push_back(*id);
  }
  return a;
}

void EngineLoop::submit(std::vector<Submission> submissions, std::string pin, AdmissionCallback done) {
  Admission a;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!admission_open_locked()) {
      held_.push_back(Held{std::move(submissions), std::move(pin), std::move(done)});
      return;
    }
    a = admit_locked(submissions, pin);
  }
  // One wake for all: an idle engine admits every sequence of the batch in the same step.
  wake();
  done(std::move(a));
}

void EngineLoop::reset_prefix_cache() {
  engine_->reset_prefix_cache();
  wake();
}

void EngineLoop::abort(RequestId id) {
  engine_->abort(id);
  wake();
}

void EngineLoop::queue_op(PendingOp op) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    ops_.push_back(std::move(op));
  }
  wake();
}

void EngineLoop::run_when_idle(ControlOp op) { queue_op(PendingOp{std::move(op), /*needs_idle=*/true}); }

void EngineLoop::set_deployment(std::shared_ptr<const DeploymentInfo> deployment) {
  VOSTI_CHECK(deployment != nullptr, "set_deployment needs a deployment");
  std::lock_guard<std::mutex> lock(mu_);
  deployment_ = std::move(deployment);
}

std::shared_ptr<const DeploymentInfo> EngineLoop::deployment() const {
  std::lock_guard<std::mutex> lock(mu_);
  return deployment_;
}

void EngineLoop::pause(PauseMode mode, std::function<void()> done) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    paused_ = true;
    frozen_ = mode == PauseMode::kKeep;
  }
  queue_op(PendingOp{[done = std::move(done)](Engine&) { done(); }, /*needs_idle=*/mode != PauseMode::kKeep});
}

bool EngineLoop::resume() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!paused_) return false;
    paused_ = false;
    frozen_ = false;
  }
  wake();
  return true;
}

bool EngineLoop::paused() const {
  std::lock_guard<std::mutex> lock(mu_);
  return paused_;
}

int64_t EngineLoop::num_held() const {
  std::lock_guard<std::mutex> lock(mu_);
  int64_t n = 0;
  for (const Held& h : held_) n += static_cast<int64_t>(h.submissions.size());
  return n;
}

void EngineLoop::drop_held() {
  std::deque<Held> held;
  {
    std::lock_guard<std::mutex> lock(mu_);
    held.swap(held_);
  }
  for (Held& h : held) {
    Admission a;
    a.refusal = AdmissionRefusal::kShuttingDown;
    a.message = "the server is shutting down";
    h.done(std::move(a));
  }
}

EngineLoopStats EngineLoop::stats() const {
  std::lock_guard<std::mutex> lock(stats_mu_);
  return stats_;
}

void EngineLoop::stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void EngineLoop::wake() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++num_wakeups_;
  }
  cv_.notify_one();
}

void EngineLoop::snapshot(bool busy) {
  using Clock = std::chrono::steady_clock;
  EngineStats s = engine_->stats();
  RunnerInfo runner = engine_->runner_info();  // engine thread (or the constructor): no op runs
  const auto now = Clock::now();
  std::lock_guard<std::mutex> lock(stats_mu_);
  const double elapsed = std::chrono::duration<double>(now - window_start_).count();
  if (!busy) {
    stats_.generation_tokens_per_second = 0;
    window_start_ = now;
    window_tokens_ = s.num_generated_tokens;
  } else if (elapsed >= 2.0) {
    stats_.generation_tokens_per_second = static_cast<double>(s.num_generated_tokens - window_tokens_) / elapsed;
    window_start_ = now;
    window_tokens_ = s.num_generated_tokens;
  }
  stats_.engine = s;
  stats_.runner = std::move(runner);
  stats_.busy = busy;
}

void EngineLoop::run_ops() {
  while (true) {
    ControlOp op;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (ops_.empty()) break;
      // An op that needs the engine idle waits for the requests in flight, unless they are kept.
      if (ops_.front().needs_idle && !frozen_ && engine_->has_work()) return;
      op = ops_.front().op;  // stays queued (admission closed) until it returned
    }
    op(*engine_);
    {
      std::lock_guard<std::mutex> lock(mu_);
      ops_.pop_front();
    }
    snapshot(false);
  }
  std::vector<std::pair<AdmissionCallback, Admission>> admitted;
  {
    std::lock_guard<std::mutex> lock(mu_);
    while (admission_open_locked() && !held_.empty()) {
      Held h = std::move(held_.front());
      held_.pop_front();
      Admission a = admit_locked(h.submissions, h.pin);
      admitted.emplace_back(std::move(h.done), std::move(a));
    }
  }
  for (auto& [done, a] : admitted) done(std::move(a));
}

void EngineLoop::run() {
  uint64_t seen = 0;
  while (true) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stop_ || num_wakeups_ != seen; });
      if (stop_) return;
      seen = num_wakeups_;
    }
    while (true) {
      run_ops();
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (stop_) return;
        if (frozen_) break;
      }
      if (!engine_->has_work()) break;
      engine_->step();
      snapshot(true);
    }
    snapshot(false);
  }
}

}  // namespace vosti
