// ServerMetrics: the server's own counters and latency histograms, and the
// Prometheus text exposition of them plus the engine's stats (GET /metrics).
//
// Histograms have fixed bucket bounds (seconds); observations are cumulative.
// Thread safety: every method may be called from any thread (one mutex).
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "runner/model_runner.h"
#include "server/engine_loop.h"

namespace vosti {

class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds) : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {}
  void observe(double value);
  // Appends `name_bucket{le=...}`, `name_sum`, `name_count` lines.
  void append_to(std::string& out, const std::string& name, const std::string& help) const;

 private:
  std::vector<double> bounds_;    // ascending upper bounds
  std::vector<uint64_t> counts_;  // [bounds + 1]: per bucket, the last one is +Inf
  double sum_ = 0;
  uint64_t count_ = 0;
};

class ServerMetrics {
 public:
  ServerMetrics();
  void observe_http_status(int status);
  void observe_ttft(double seconds);
  void observe_tpot(double seconds);
  void observe_e2e(double seconds);
  void add_tokens(int64_t prompt_tokens, int64_t generation_tokens);
  void observe_finish(const char* reason);
  // The Prometheus text format (version 0.0.4) of everything, with `engine` stats.
  // `runner` (may be null) adds the device and the KV pool it holds; `config` (may be null) the
  // scheduling limits a client needs to know what chunking its requests induce (the step token
  // budget, the block size, the sequence cap, the context, whether prefix caching is on).
  std::string render(const EngineLoopStats& engine, int64_t num_connections, int64_t num_active_requests,
                     const RunnerInfo* runner = nullptr, const EngineConfig* config = nullptr) const;

 private:
  mutable std::mutex mu_;
  Histogram ttft_;
  Histogram tpot_;
  Histogram e2e_;
  std::map<int, uint64_t> http_status_;     // status -> responses
  std::map<std::string, uint64_t> finish_;  // finish reason -> sequences
  int64_t prompt_tokens_ = 0;
  int64_t generation_tokens_ = 0;
};

}  // namespace vosti
