#include "server/server_metrics.h"

#include <algorithm>
#include <cstdio>

namespace vosti {
namespace {

std::string number(double v) {
  char buf[40];
  std::snprintf(buf, sizeof(buf), "%.17g", v);
  return buf;
}

void append_metric(std::string& out, const char* name, const char* type, const char* help, double value) {
  out += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
  out += std::string(name) + " " + number(value) + "\n";
}

}  // namespace

void Histogram::observe(double value) {
  size_t i = 0;
  while (i < bounds_.size() && value > bounds_[i]) ++i;
  ++counts_[i];
  sum_ += value;
  ++count_;
}

void Histogram::append_to(std::string& out, const std::string& name, const std::string& help) const {
  out += "# HELP " + name + " " + help + "\n# TYPE " + name + " histogram\n";
  uint64_t cumulative = 0;
  for (size_t i = 0; i < counts_.size(); ++i) {
    cumulative += counts_[i];
    const std::string le = i < bounds_.size() ? number(bounds_[i]) : "+Inf";
    out += name + "_bucket{le=\"" + le + "\"} " + std::to_string(cumulative) + "\n";
  }
  out += name + "_sum " + number(sum_) + "\n" + name + "_count " + std::to_string(count_) + "\n";
}

ServerMetrics::ServerMetrics()
    : ttft_({0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}),
      tpot_({0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 1, 2.5}),
      e2e_({0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120}) {}

void ServerMetrics::observe_http_status(int status) {
  std::lock_guard<std::mutex> lock(mu_);
  ++http_status_[status];
}
void ServerMetrics::observe_ttft(double seconds) {
  std::lock_guard<std::mutex> lock(mu_);
  ttft_.observe(seconds);
}
void ServerMetrics::observe_tpot(double seconds) {
  std::lock_guard<std::mutex> lock(mu_);
  tpot_.observe(seconds);
}
void ServerMetrics::observe_e2e(double seconds) {
  std::lock_guard<std::mutex> lock(mu_);
  e2e_.observe(seconds);
}
void ServerMetrics::add_tokens(int64_t prompt_tokens, int64_t generation_tokens) {
  std::lock_guard<std::mutex> lock(mu_);
  prompt_tokens_ += prompt_tokens;
  generation_tokens_ += generation_tokens;
}
void ServerMetrics::observe_finish(const char* reason) {
  std::lock_guard<std::mutex> lock(mu_);
  ++finish_[reason];
}

std::string ServerMetrics::render(const EngineLoopStats& engine, int64_t num_connections, int64_t num_active_requests,
                                  const RunnerInfo* runner, const EngineConfig* config) const {
  const EngineStats& s = engine.engine;
  std::string out;
  if (runner != nullptr) {
    std::string device = runner->device;
    std::replace(device.begin(), device.end(), '"', '\'');
    out += "# HELP vosti_runner_info The device the engine runs on and its KV cache (labels).\n";
    out += "# TYPE vosti_runner_info gauge\n";
    out += "vosti_runner_info{device=\"" + device + "\",kv_cache_dtype=\"" + runner->kv_cache_dtype +
           "\",block_size=\"" + std::to_string(runner->block_size) + "\"} 1\n";
    append_metric(out, "vosti_kv_cache_bytes", "gauge", "Bytes of the KV cache pool (on the engine's device).",
                  static_cast<double>(runner->kv_cache_bytes));
    append_metric(out, "vosti_weight_bytes", "gauge", "Bytes of model weights on the engine's device.",
                  static_cast<double>(runner->weight_bytes));
  }
  if (config != nullptr) {
    append_metric(out, "vosti_max_num_batched_tokens", "gauge",
                  "The step token budget: tokens one engine step computes at most (longer prompts run in chunks).",
                  static_cast<double>(config->max_num_batched_tokens));
    append_metric(out, "vosti_max_num_seqs", "gauge", "Sequences one engine step runs at most.",
                  static_cast<double>(config->max_num_seqs));
    append_metric(out, "vosti_block_size", "gauge", "Tokens per KV block (prefix-cache hits are whole blocks).",
                  static_cast<double>(config->block_size));
    append_metric(out, "vosti_max_model_len", "gauge", "The context: prompt and output tokens of a sequence at most.",
                  static_cast<double>(config->max_model_len));
    append_metric(out, "vosti_prefix_caching_enabled", "gauge", "1 when the prefix cache is on.",
                  config->enable_prefix_caching ? 1.0 : 0.0);
  }
  append_metric(out, "vosti_num_requests_running", "gauge", "Sequences in the engine's running set.",
                static_cast<double>(s.num_running));
  append_metric(out, "vosti_num_requests_waiting", "gauge", "Sequences waiting to be scheduled.",
                static_cast<double>(s.num_waiting));
  append_metric(out, "vosti_kv_blocks_used", "gauge", "KV cache blocks held by requests.",
                static_cast<double>(s.num_blocks_used));
  append_metric(out, "vosti_kv_blocks_total", "gauge", "KV cache blocks in the pool.",
                static_cast<double>(s.num_blocks_total));
  append_metric(out, "vosti_kv_cache_usage_ratio", "gauge", "Fraction of KV blocks held by requests.",
                s.num_blocks_total > 0 ? static_cast<double>(s.num_blocks_used) / s.num_blocks_total : 0.0);
  append_metric(out, "vosti_kv_window_blocks_used", "gauge",
                "Window-local KV: sliding-window layers' blocks held by requests (0 without it).",
                static_cast<double>(s.num_window_blocks_used));
  append_metric(out, "vosti_kv_window_blocks_total", "gauge",
                "Window-local KV: blocks in the sliding-window layers' pool (0 without it).",
                static_cast<double>(s.num_window_blocks_total));
  append_metric(out, "vosti_num_preemptions_total", "counter", "Requests preempted (recomputed later).",
                static_cast<double>(s.num_preemptions));
  append_metric(out, "vosti_prefix_cache_queries_total", "counter", "Prompt tokens looked up in the prefix cache.",
                static_cast<double>(s.num_prefix_queries));
  append_metric(out, "vosti_prefix_cache_hits_total", "counter", "Prompt tokens served from the prefix cache.",
                static_cast<double>(s.num_prefix_hits));
  append_metric(out, "vosti_prefix_cache_hit_rate", "gauge", "Prefix cache hits / queries since start.",
                s.num_prefix_queries > 0 ? static_cast<double>(s.num_prefix_hits) / s.num_prefix_queries : 0.0);
  append_metric(out, "vosti_spec_decode_num_drafts_total", "counter",
                "Speculative decoding: verify chunks run (a request's draft tokens verified in a step).",
                static_cast<double>(s.num_drafts));
  append_metric(out, "vosti_spec_decode_num_draft_tokens_total", "counter",
                "Speculative decoding: draft tokens verified.", static_cast<double>(s.num_draft_tokens));
  append_metric(out, "vosti_spec_decode_num_accepted_tokens_total", "counter",
                "Speculative decoding: draft tokens accepted (equal to the token sampled there).",
                static_cast<double>(s.num_accepted_tokens));
  append_metric(out, "vosti_spec_decode_acceptance_rate", "gauge",
                "Speculative decoding: accepted / draft tokens since start (0 with none).",
                s.num_draft_tokens > 0 ? static_cast<double>(s.num_accepted_tokens) / s.num_draft_tokens : 0.0);
  append_metric(out, "vosti_engine_steps_total", "counter", "Engine steps run.", static_cast<double>(s.num_steps));
  append_metric(out, "vosti_engine_generation_tokens_total", "counter", "Tokens sampled by the engine.",
                static_cast<double>(s.num_generated_tokens));
  append_metric(out, "vosti_generation_tokens_per_second", "gauge",
                "Output tokens per second over the last few seconds of work.", engine.generation_tokens_per_second);
  append_metric(out, "vosti_http_connections_open", "gauge", "Open HTTP connections.",
                static_cast<double>(num_connections));
  append_metric(out, "vosti_http_requests_active", "gauge", "Generation requests being served.",
                static_cast<double>(num_active_requests));
  std::lock_guard<std::mutex> lock(mu_);
  append_metric(out, "vosti_prompt_tokens_total", "counter", "Prompt tokens of finished sequences.",
                static_cast<double>(prompt_tokens_));
  append_metric(out, "vosti_generation_tokens_total", "counter", "Output tokens of finished sequences.",
                static_cast<double>(generation_tokens_));
  out +=
      "# HELP vosti_http_responses_total HTTP responses by status code.\n# TYPE vosti_http_responses_total counter\n";
  for (const auto& [code, n] : http_status_) {
    out += "vosti_http_responses_total{code=\"" + std::to_string(code) + "\"} " + std::to_string(n) + "\n";
  }
  out +=
      "# HELP vosti_request_finished_total Sequences finished, by reason.\n# TYPE vosti_request_finished_total "
      "counter\n";
  for (const auto& [reason, n] : finish_) {
    out += "vosti_request_finished_total{finished_reason=\"" + reason + "\"} " + std::to_string(n) + "\n";
  }
  ttft_.append_to(out, "vosti_time_to_first_token_seconds", "Time from arrival to the first output token.");
  tpot_.append_to(out, "vosti_time_per_output_token_seconds", "Mean time between output tokens of a sequence.");
  e2e_.append_to(out, "vosti_e2e_request_latency_seconds", "Time from arrival to the last output token.");
  return out;
}

}  // namespace vosti
