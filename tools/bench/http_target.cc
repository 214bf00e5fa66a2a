#include "tools/bench/http_target.h"

#include <cstdlib>
#include <nlohmann/json.hpp>
#include <sstream>

namespace vosti::bench {
namespace {

using nlohmann::json;

// The counters /metrics may carry, by server: first name found wins.
constexpr const char* kPrefixQueries[] = {"vosti_prefix_cache_queries_total", "vllm:prefix_cache_queries_total",
                                          "vllm:gpu_prefix_cache_queries_total"};
constexpr const char* kPrefixHits[] = {"vosti_prefix_cache_hits_total", "vllm:prefix_cache_hits_total",
                                       "vllm:gpu_prefix_cache_hits_total"};
constexpr const char* kPreemptions[] = {"vosti_num_preemptions_total", "vllm:num_preemptions_total"};
constexpr const char* kDraftTokens[] = {"vosti_spec_decode_num_draft_tokens_total",
                                        "vllm:spec_decode_num_draft_tokens_total"};
constexpr const char* kAcceptedTokens[] = {"vosti_spec_decode_num_accepted_tokens_total",
                                           "vllm:spec_decode_num_accepted_tokens_total"};
constexpr const char* kHitRateGauges[] = {"sglang:cache_hit_rate"};

template <size_t N>
std::optional<double> first_of(const std::map<std::string, double>& m, const char* const (&names)[N]) {
  for (const char* n : names) {
    if (auto it = m.find(n); it != m.end()) return it->second;
  }
  return std::nullopt;
}

}  // namespace

std::map<std::string, double> parse_prometheus(std::string_view text) {
  std::map<std::string, double> out;
  std::istringstream in{std::string(text)};
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    size_t name_end = line.find_first_of("{ ");
    if (name_end == std::string::npos) continue;
    const std::string name = line.substr(0, name_end);
    size_t value_start = line[name_end] == '{' ? line.find('}', name_end) : name_end;
    if (value_start == std::string::npos) continue;
    value_start = line.find_first_not_of(' ', value_start + (line[value_start] == '}' ? 1 : 0));
    if (value_start == std::string::npos) continue;
    char* end = nullptr;
    const double v = std::strtod(line.c_str() + value_start, &end);
    if (end == line.c_str() + value_start) continue;
    out[name] += v;
  }
  return out;
}

Result<std::unique_ptr<HttpTarget>> HttpTarget::create(const HttpTargetOptions& options, const RunClock* clock) {
  VOSTI_ASSIGN_OR_RETURN(BaseUrl url, parse_base_url(options.base_url));
  std::unique_ptr<HttpTarget> t(new HttpTarget(options, url, clock));
  const double probe_timeout_s = std::min(30.0, options.request_timeout_s);
  VOSTI_ASSIGN_OR_RETURN(HttpReply models, http_get(url, "/v1/models", t->auth_headers(), probe_timeout_s));
  if (models.status != 200) {
    return failed_precondition("GET " + url.to_string() + "/v1/models: " + error_message(models.status, models.body) +
                               (models.status == 401 ? " (give --api-key)" : ""));
  }
  const json j = json::parse(models.body, nullptr, false);
  std::string first_id, owned_by;
  if (!j.is_discarded() && j.is_object() && j.contains("data") && j["data"].is_array() && !j["data"].empty() &&
      j["data"][0].is_object()) {
    first_id = j["data"][0].value("id", "");
    owned_by = j["data"][0].value("owned_by", "");
  }
  t->model_ = options.model.empty() ? first_id : options.model;
  if (t->model_.empty()) {
    return failed_precondition("GET " + url.to_string() + "/v1/models lists no model; give --served-model-name NAME");
  }
  t->server_kind_ = owned_by.empty() ? "unknown" : owned_by;
  return t;
}

HttpTarget::HttpTarget(HttpTargetOptions options, BaseUrl url, const RunClock* clock)
    : options_(std::move(options)), url_(std::move(url)), clock_(clock) {}

HttpTarget::~HttpTarget() {
  cancel_ = true;
  for (Worker& w : workers_) w.thread.join();
}

std::vector<std::pair<std::string, std::string>> HttpTarget::auth_headers() const {
  if (options_.api_key.empty()) return {};
  return {{"Authorization", "Bearer " + options_.api_key}};
}

void HttpTarget::submit(const BenchRequest& request, const SamplingOptions& options, double send_s) {
  Worker& w = workers_.emplace_back();
  w.thread = std::thread(&HttpTarget::run_request, this, request, options, send_s, &w);
}

void HttpTarget::run_request(BenchRequest request, SamplingOptions options, double send_s, Worker* worker) {
  RequestRecord r;
  r.index = request.index;
  r.sent = true;
  r.send_s = send_s;
  StreamReader reader(&r);
  HttpRequest http;
  http.method = "POST";
  http.path = endpoint_path(request);
  http.headers = auth_headers();
  http.headers.emplace_back("Content-Type", "application/json");
  http.body = request_body(request, options, model_, ServerDialect{server_kind_ == "vosti"});
  HttpExchangeOptions xo;
  xo.read_timeout_s = options_.request_timeout_s;
  xo.cancel = &cancel_;
  SseParser sse;
  std::string error_body;
  Status stream_error;
  int64_t counted = 0;
  const HttpOutcome outcome = http_exchange(url_, http, xo, [&](int status, std::string_view body) {
    if (status != 200) {
      error_body.append(body);
      return error_body.size() < (64 << 10);
    }
    for (const std::string& event : sse.feed(body)) {
      stream_error = reader.on_event(event, clock_->now_s());
      if (!stream_error.ok()) return false;
    }
    tokens_in_flight_ += reader.num_tokens_counted() - counted;
    counted = reader.num_tokens_counted();
    return !reader.done();
  });
  tokens_in_flight_ -= counted;
  r.end_s = clock_->now_s();
  if (!reader.saw_usage()) {  // a server without usage: what the stream and the prompt say
    r.num_output_tokens = reader.num_tokens_counted();
    if (request.kind == PromptKind::kTokenIds) r.num_prompt_tokens = static_cast<int64_t>(request.prompt_ids.size());
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (!outcome.transport_error.empty() && !reader.done()) {
    r.error = outcome.transport_error == "cancelled" ? "aborted: " + abort_reason_ : outcome.transport_error;
    // A server that refuses connections or stops answering gets no more requests.
    if (!outcome.connected && !cancel_) unreachable_ = outcome.transport_error;
    if (outcome.timed_out && !cancel_) unreachable_ = outcome.transport_error;
  } else if (outcome.status != 200) {
    r.error = error_message(outcome.status, error_body);
  } else if (!stream_error.ok()) {
    r.error = stream_error.message();
  } else if (!reader.done()) {
    r.error = "the stream ended without [DONE]";
  } else {
    r.success = true;
  }
  finished_.push_back(std::move(r));
  worker->done = true;
  finished_cv_.notify_all();
}

void HttpTarget::reap_workers() {
  for (auto it = workers_.begin(); it != workers_.end();) {
    if (it->done) {
      it->thread.join();
      it = workers_.erase(it);
    } else {
      ++it;
    }
  }
}

std::vector<RequestRecord> HttpTarget::wait(double deadline_s) {
  std::vector<RequestRecord> out;
  {
    std::unique_lock<std::mutex> lock(mu_);
    const double left = std::clamp(deadline_s - clock_->now_s(), 0.0, 0.1);
    finished_cv_.wait_for(lock, std::chrono::duration<double>(left), [this] { return !finished_.empty(); });
    out.swap(finished_);
  }
  reap_workers();
  return out;
}

void HttpTarget::abort_all(const std::string& why) {
  std::lock_guard<std::mutex> lock(mu_);
  abort_reason_ = why;
  cancel_ = true;
}

std::optional<std::string> HttpTarget::unreachable() const {
  std::lock_guard<std::mutex> lock(mu_);
  return unreachable_;
}

TargetCounters HttpTarget::counters() {
  TargetCounters c;
  auto reply = http_get(url_, "/metrics", auth_headers(), 10);
  if (!reply.ok() || reply->status != 200) return c;
  const auto m = parse_prometheus(reply->body);
  if (auto v = first_of(m, kPrefixQueries)) c.prefix_cache_queries = static_cast<int64_t>(*v);
  if (auto v = first_of(m, kPrefixHits)) c.prefix_cache_hits = static_cast<int64_t>(*v);
  if (auto v = first_of(m, kPreemptions)) c.preemptions = static_cast<int64_t>(*v);
  if (auto v = first_of(m, kHitRateGauges)) c.prefix_cache_hit_rate = *v;
  if (auto v = first_of(m, kDraftTokens)) c.draft_tokens = static_cast<int64_t>(*v);
  if (auto v = first_of(m, kAcceptedTokens)) c.accepted_tokens = static_cast<int64_t>(*v);
  const bool any = c.prefix_cache_queries || c.prefix_cache_hits || c.preemptions || c.prefix_cache_hit_rate;
  c.source = any ? "server /metrics (" + server_kind_ + ")" : "";
  return c;
}

}  // namespace vosti::bench
