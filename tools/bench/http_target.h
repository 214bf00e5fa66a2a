// HttpTarget: `vosti bench`'s HTTP target: any OpenAI-compatible server (Vosti, vLLM, SGLang,
// llama.cpp's llama-server). One thread and one connection per request in flight, streamed
// responses (SSE) timed chunk by chunk; the server's /metrics (Vosti's or vLLM's counter
// names, SGLang's hit-rate gauge) give prefix-cache hits and preemptions where it has them.
// A request that cannot connect, or that the server leaves silent for request_timeout_s, marks
// the server unreachable; the driver then stops sending.
// Thread safety: as Target (one driver thread); the request threads share only the finished
// queue (under mu_) and atomics.
#pragma once

#include <atomic>
#include <condition_variable>
#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "core/status.h"
#include "tools/bench/http_client.h"
#include "tools/bench/openai_stream.h"
#include "tools/bench/target.h"

namespace vosti::bench {

struct HttpTargetOptions {
  std::string base_url;  // http://HOST[:PORT][/PREFIX]
  std::string api_key;
  std::string model;               // the "model" field; empty: the first id of GET /v1/models
  double request_timeout_s = 600;  // the longest silence of a server within one request
};

class HttpTarget : public Target {
 public:
  // Checks the server answers GET /v1/models and learns the model id and the server kind.
  // Errors: kInvalidArgument for a bad URL, kFailedPrecondition for a server that does not answer.
  static Result<std::unique_ptr<HttpTarget>> create(const HttpTargetOptions& options, const RunClock* clock);
  ~HttpTarget() override;

  void submit(const BenchRequest& request, const SamplingOptions& options, double send_s) override;
  std::vector<RequestRecord> wait(double deadline_s) override;
  void abort_all(const std::string& why) override;
  int64_t num_output_tokens_in_flight() const override { return tokens_in_flight_.load(); }
  std::optional<std::string> unreachable() const override;
  TargetCounters counters() override;

  const std::string& model() const { return model_; }
  // "vosti", "vllm", "sglang", "llamacpp", or what /v1/models' owned_by said.
  const std::string& server_kind() const { return server_kind_; }
  const BaseUrl& url() const { return url_; }

 private:
  struct Worker {
    std::thread thread;
    std::atomic<bool> done{false};
  };
  HttpTarget(HttpTargetOptions options, BaseUrl url, const RunClock* clock);
  std::vector<std::pair<std::string, std::string>> auth_headers() const;
  // The request thread's body: sends, reads the stream, queues the record.
  void run_request(BenchRequest request, SamplingOptions options, double send_s, Worker* worker);
  void reap_workers();

  HttpTargetOptions options_;
  BaseUrl url_;
  const RunClock* clock_;
  std::string model_;
  std::string server_kind_;
  std::list<Worker> workers_;  // requests in flight (and finished, not joined yet)
  std::atomic<bool> cancel_{false};
  std::atomic<int64_t> tokens_in_flight_{0};
  mutable std::mutex mu_;
  std::condition_variable finished_cv_;
  std::vector<RequestRecord> finished_;     // guarded by mu_
  std::string abort_reason_;                // guarded by mu_
  std::optional<std::string> unreachable_;  // guarded by mu_
};

// Sums a Prometheus text exposition's samples by metric name (labels dropped).
std::map<std::string, double> parse_prometheus(std::string_view text);

}  // namespace vosti::bench
