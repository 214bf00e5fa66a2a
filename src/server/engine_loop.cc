#include "server/engine_loop.h"

#include <chrono>

namespace vosti {

EngineLoop::EngineLoop(std::unique_ptr<Engine> engine) : engine_(std::move(engine)) {
  VOSTI_CHECK(engine_ != nullptr, "EngineLoop needs an engine");
  snapshot(false);
  thread_ = std::thread([this] { run(); });
}

EngineLoop::~EngineLoop() { stop(); }

Result<RequestId> EngineLoop::add_request(RequestSpec spec, OutputCallback callback) {
  auto id = engine_->add_request(std::move(spec), std::move(callback));
  if (id.ok()) wake();
  return id;
}

Result<std::vector<RequestId>> EngineLoop::add_requests(std::vector<Submission> submissions) {
  std::vector<RequestId> ids;
  ids.reserve(submissions.size());
  for (Submission& s : submissions) {
    auto id = engine_->add_request(std::move(s.spec), std::move(s.callback));
    if (!id.ok()) {
      for (RequestId added : ids) engine_->abort(added);
      wake();
      return id.status();
    }
    ids.push_back(*id);
  }
  wake();
  return ids;
}

void EngineLoop::reset_prefix_cache() {
  engine_->reset_prefix_cache();
  wake();
}

void EngineLoop::abort(RequestId id) {
  engine_->abort(id);
  wake();
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
  stats_.busy = busy;
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
    while (engine_->has_work()) {
      engine_->step();
      snapshot(true);
      std::lock_guard<std::mutex> lock(mu_);
      if (stop_) return;
    }
    snapshot(false);
  }
}

}  // namespace vosti
