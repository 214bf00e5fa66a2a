// Serving-benchmark metrics: what `vosti bench` measures of each request (RequestRecord) and the
// summary it reports (BenchMetrics), computed as vLLM's `bench serve` and SGLang's bench_serving
// define them, so numbers compare across tools:
//   TTFT  time to first token: first output delivery - send time;
//   TPOT  time per output token, the first excluded: (last delivery - first delivery) / (n - 1),
//         for requests with n >= 2 output tokens;
//   ITL   inter-token latency: the gaps between consecutive deliveries (stream chunks) of a
//         request; a delivery carrying k > 1 tokens is one gap, as both tools count it;
//   E2E   end-to-end latency: end of the response - send time.
// Percentiles interpolate linearly between order statistics (numpy's default, vLLM's choice).
// Throughputs divide the successful requests' totals by the run's duration.
// Thread safety: value types and pure functions.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace vosti::bench {

// What a response carried token by token, for --check-determinism (whatever the target returns).
struct ResponseContent {
  std::vector<int32_t> token_ids;         // [num tokens] when the target reports ids
  std::vector<std::string> token_pieces;  // [num tokens] when it reports only token text (logprobs)
  std::vector<double> logprobs;           // [num tokens] when it reports logprobs
  std::vector<std::string> digests;       // [num tokens] 32-hex-digit logits digests (Vosti only)
};

// One request as measured. Times are seconds on the run's clock (0 = the run's start).
struct RequestRecord {
  int64_t index = -1;  // in the workload
  bool sent = false;
  bool success = false;
  std::string error;  // why it failed (empty on success)
  double send_s = 0;
  std::vector<double> delivery_s;  // [deliveries] arrival of each chunk carrying >= 1 output token
  double end_s = 0;                // the response completed (or failed)
  int64_t num_prompt_tokens = 0;
  int64_t num_output_tokens = 0;
  int64_t num_cached_tokens = -1;  // prompt tokens served from a prefix cache; -1: not reported
  std::string finish_reason;
  uint64_t seed = 0;  // the sampling seed the target reported (0: none)
  ResponseContent content;
};

// mean, median, p90, p99 (and count, std, min, max) of one latency, in milliseconds.
struct Distribution {
  int64_t count = 0;
  double mean = 0, median = 0, p90 = 0, p99 = 0, std = 0, min = 0, max = 0;
};

struct BenchMetrics {
  int64_t num_requests = 0;  // in the workload
  int64_t num_completed = 0;
  int64_t num_failed = 0;  // sent and failed
  int64_t num_not_sent = 0;
  double duration_s = 0;
  int64_t total_input_tokens = 0;  // of completed requests
  int64_t total_output_tokens = 0;
  double request_throughput = 0;  // completed requests / s
  double input_throughput = 0;    // input tokens / s
  double output_throughput = 0;   // output tokens / s
  double total_throughput = 0;    // (input + output) tokens / s
  // Prompt tokens the responses reported as cached / all their prompt tokens; nullopt if none reported.
  std::optional<double> cached_token_fraction;
  Distribution ttft_ms, tpot_ms, itl_ms, e2e_ms;
};

// The p-th percentile (p in [0, 100]) of `sorted` (ascending, non-empty), by linear
// interpolation between the closest ranks: rank = p / 100 * (n - 1).
double percentile(std::span<const double> sorted, double p);

// Summary of `values` (any order); all zero when empty.
Distribution summarize(std::vector<double> values);

// Per-request latencies in seconds; nullopt where the request does not define them (failed,
// no output token, or TPOT with fewer than two output tokens).
std::optional<double> ttft_s(const RequestRecord& r);
std::optional<double> tpot_s(const RequestRecord& r);
std::optional<double> e2e_s(const RequestRecord& r);
std::vector<double> itl_s(const RequestRecord& r);  // [deliveries - 1]

// The wall time the sent requests span: the first send to the last end (> 0: at least 1 ns).
double records_span_s(std::span<const RequestRecord> records);

// The run's summary. REQUIRES: duration_s > 0 (the run's wall time, first send to last response).
BenchMetrics compute_metrics(std::span<const RequestRecord> records, double duration_s);

}  // namespace vosti::bench
