#include "tools/bench/report.h"

#include <sys/utsname.h>

#include <cmath>
#include <fstream>
#include <memory>
#include <thread>

namespace vosti::bench {
namespace {

using nlohmann::ordered_json;

std::string read_first_line_with(const char* path, const char* prefix) {
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(prefix, 0) == 0) return line;
  }
  return "";
}

std::string after_colon(const std::string& s) {
  const size_t c = s.find(':');
  if (c == std::string::npos) return "";
  const size_t b = s.find_first_not_of(" \t", c + 1);
  return b == std::string::npos ? "" : s.substr(b);
}

// Lines printed by `cmd` (stderr discarded); empty if it fails.
std::vector<std::string> command_lines(const std::string& cmd) {
  std::vector<std::string> lines;
  std::unique_ptr<FILE, int (*)(FILE*)> p(popen((cmd + " 2>/dev/null").c_str(), "r"), pclose);
  if (!p) return lines;
  char buf[512];
  while (std::fgets(buf, sizeof buf, p.get())) {
    std::string s(buf);
    while (!s.empty() && (s.back() == '\n' || s.back() == '\r')) s.pop_back();
    if (!s.empty()) lines.push_back(s);
  }
  return lines;
}

ordered_json distribution_json(const Distribution& d) {
  return {{"count", d.count}, {"mean", d.mean}, {"median", d.median}, {"p90", d.p90},
          {"p99", d.p99},     {"std", d.std},   {"min", d.min},       {"max", d.max}};
}

std::string percent(double fraction) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f%%", fraction * 100);
  return buf;
}

// Two decimals: the bookkeeping share is a few hundredths of a percent.
std::string percent_2(double fraction) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f%%", fraction * 100);
  return buf;
}

ordered_json optional_json(const std::optional<double>& v) { return v ? ordered_json(*v) : ordered_json(nullptr); }

void print_distribution(FILE* out, const char* name, const Distribution& d) {
  if (d.count == 0) {
    std::fprintf(out, "  %-6s %10s\n", name, "-");
    return;
  }
  std::fprintf(out, "  %-6s %10.2f %10.2f %10.2f %10.2f %8lld\n", name, d.mean, d.median, d.p90, d.p99,
               static_cast<long long>(d.count));
}

}  // namespace

ordered_json machine_info() {
  ordered_json m;
  m["cpu"] = after_colon(read_first_line_with("/proc/cpuinfo", "model name"));
  m["logical_cpus"] = std::thread::hardware_concurrency();
  const std::string mem = after_colon(read_first_line_with("/proc/meminfo", "MemTotal"));
  m["memory_gib"] = std::round(std::atof(mem.c_str()) / (1024.0 * 1024.0) * 10) / 10;
  std::ifstream load("/proc/loadavg");
  double l1 = 0, l5 = 0, l15 = 0;
  load >> l1 >> l5 >> l15;
  m["load_average"] = {l1, l5, l15};
  utsname u{};
  if (uname(&u) == 0) m["kernel"] = std::string(u.sysname) + " " + u.release;
  ordered_json gpus = ordered_json::array();
  for (const std::string& line :
       command_lines("nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader")) {
    ordered_json g;
    size_t start = 0;
    std::vector<std::string> fields;
    while (start <= line.size()) {
      const size_t comma = line.find(',', start);
      std::string f = line.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
      f.erase(0, f.find_first_not_of(' '));
      fields.push_back(f);
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
    if (fields.size() >= 3) gpus.push_back({{"name", fields[0]}, {"driver", fields[1]}, {"memory", fields[2]}});
  }
  m["gpus"] = std::move(gpus);
  return m;
}

CounterDelta counter_delta(const TargetCounters& before, const TargetCounters& after) {
  CounterDelta d;
  d.source = after.source;
  if (before.prefix_cache_queries && after.prefix_cache_queries && before.prefix_cache_hits &&
      after.prefix_cache_hits) {
    const int64_t q = *after.prefix_cache_queries - *before.prefix_cache_queries;
    const int64_t h = *after.prefix_cache_hits - *before.prefix_cache_hits;
    if (q > 0) d.prefix_cache_hit_rate = static_cast<double>(h) / static_cast<double>(q);
  } else if (after.prefix_cache_hit_rate) {
    d.prefix_cache_hit_rate = after.prefix_cache_hit_rate;  // a server-wide gauge, not per run
  }
  if (before.preemptions && after.preemptions) d.preemptions = *after.preemptions - *before.preemptions;
  if (before.draft_tokens && after.draft_tokens && before.accepted_tokens && after.accepted_tokens) {
    d.draft_tokens = *after.draft_tokens - *before.draft_tokens;
    d.accepted_tokens = *after.accepted_tokens - *before.accepted_tokens;
    if (*d.draft_tokens > 0)
      d.acceptance_rate = static_cast<double>(*d.accepted_tokens) / static_cast<double>(*d.draft_tokens);
  }
  if (before.step_s && after.step_s && before.forward_s && after.forward_s && before.sampling_s && after.sampling_s) {
    const double step = *after.step_s - *before.step_s;
    d.step_s = step;
    if (step > 0) {
      d.forward_fraction = (*after.forward_s - *before.forward_s) / step;
      d.sampling_fraction = (*after.sampling_s - *before.sampling_s) / step;
      d.bookkeeping_fraction = 1.0 - *d.forward_fraction - *d.sampling_fraction;
    }
  }
  return d;
}

void print_run(FILE* out, const RunResult& run, const std::string& title) {
  const BenchMetrics& m = run.metrics;
  std::fprintf(out, "== %s ==\n", title.c_str());
  if (!run.stopped_early.empty())
    std::fprintf(out, "STOPPED EARLY: %s (a partial report)\n", run.stopped_early.c_str());
  std::fprintf(out, "requests        %lld ok, %lld failed, %lld not sent, of %lld; duration %.2f s\n",
               static_cast<long long>(m.num_completed), static_cast<long long>(m.num_failed),
               static_cast<long long>(m.num_not_sent), static_cast<long long>(m.num_requests), m.duration_s);
  std::fprintf(out, "tokens          input %lld, output %lld\n", static_cast<long long>(m.total_input_tokens),
               static_cast<long long>(m.total_output_tokens));
  std::fprintf(out, "throughput      %.3f req/s; input %.1f tok/s, output %.1f tok/s, total %.1f tok/s\n",
               m.request_throughput, m.input_throughput, m.output_throughput, m.total_throughput);
  const CounterDelta c = counter_delta(run.before, run.after);
  std::string cache =
      c.prefix_cache_hit_rate ? percent(*c.prefix_cache_hit_rate) + " (" + c.source + ")" : "not reported";
  if (m.cached_token_fraction) cache += "; cached prompt tokens " + percent(*m.cached_token_fraction) + " (responses)";
  std::fprintf(out, "prefix cache    hit rate %s\n", cache.c_str());
  std::fprintf(out, "preemptions     %s\n", c.preemptions ? std::to_string(*c.preemptions).c_str() : "not reported");
  if (c.draft_tokens && *c.draft_tokens > 0) {
    std::fprintf(out, "speculation     %lld of %lld draft tokens accepted (%s)\n",
                 static_cast<long long>(*c.accepted_tokens), static_cast<long long>(*c.draft_tokens),
                 percent(*c.acceptance_rate).c_str());
  }
  if (const auto d = outputs_digest(run.records)) {
    std::fprintf(out, "outputs         digest %s over the %lld tokens of %lld answered requests (token ids)\n",
                 d->hex.c_str(), static_cast<long long>(d->num_tokens), static_cast<long long>(d->num_requests));
  }
  if (c.bookkeeping_fraction) {
    std::fprintf(out, "engine steps    %.2f s: forward %s, sampling %s, bookkeeping %s\n", *c.step_s,
                 percent_2(*c.forward_fraction).c_str(), percent_2(*c.sampling_fraction).c_str(),
                 percent_2(*c.bookkeeping_fraction).c_str());
  }
  std::fprintf(out, "latency\n  %-6s %10s %10s %10s %10s %8s\n", "(ms)", "mean", "median", "p90", "p99", "count");
  print_distribution(out, "TTFT", m.ttft_ms);
  print_distribution(out, "TPOT", m.tpot_ms);
  print_distribution(out, "ITL", m.itl_ms);
  print_distribution(out, "E2E", m.e2e_ms);
  size_t shown = 0;
  for (const RequestRecord& r : run.records) {
    if (!r.sent || r.success) continue;
    if (shown++ < 5)
      std::fprintf(out, "  failed: request %lld: %s\n", static_cast<long long>(r.index), r.error.c_str());
  }
  if (shown > 5) std::fprintf(out, "  ... %zu failed requests in all\n", shown);
}

void print_determinism(FILE* out, const DeterminismReport& r, size_t max_lines) {
  std::fprintf(out, "== determinism ==\ncompared %lld requests, %lld output positions: %s\n",
               static_cast<long long>(r.num_requests_compared), static_cast<long long>(r.num_positions_compared),
               r.compared.c_str());
  if (r.weaker_than_digests)
    std::fprintf(out,
                 "note: this target returns no logits digests: equal tokens and printed logprobs do not prove "
                 "bitwise-equal logits\n");
  if (r.num_not_compared > 0)
    std::fprintf(out, "%lld requests not compared (failed or not sent in a pass)\n",
                 static_cast<long long>(r.num_not_compared));
  for (size_t i = 0; i < r.mismatches.size() && i < max_lines; ++i)
    std::fprintf(out, "MISMATCH %s\n", r.mismatches[i].c_str());
  if (r.mismatches.size() > max_lines)
    std::fprintf(out, "... %zu mismatch lines in all (every one is in the JSON)\n", r.mismatches.size());
  std::fprintf(out, "%s: %lld of %lld requests differ\n", r.identical() ? "IDENTICAL" : "DIFFERS",
               static_cast<long long>(r.num_requests_differing), static_cast<long long>(r.num_requests_compared));
}

ordered_json config_json(const BenchConfig& c) {
  const WorkloadConfig& w = c.workload;
  ordered_json j;
  j["preset"] = c.preset;
  j["label"] = c.label;
  j["target"] = c.http.base_url.empty() ? "in-process" : "http";
  j["model"] = c.model;
  if (!c.http.base_url.empty()) {
    j["base_url"] = c.http.base_url;
    j["served_model_name"] = c.http.model;
    j["request_timeout_s"] = c.http.request_timeout_s;
  } else {
    const EngineConfig& e = c.engine;
    j["engine"] = {{"device", e.device},
                   {"threads", e.num_threads},
                   {"max_num_seqs", e.max_num_seqs},
                   {"max_num_batched_tokens", e.max_num_batched_tokens},
                   {"block_size", e.block_size},
                   {"kv_cache_dtype", e.kv_cache_dtype},
                   {"kv_cache_mb", e.kv_cache_bytes >> 20},
                   {"gpu_memory_utilization", e.gpu_memory_utilization},
                   {"enable_prefix_caching", e.enable_prefix_caching},
                   {"cuda_graphs", e.cuda_graphs},
                   {"max_model_len", e.max_model_len},
                   {"backend", e.backend},
                   {"num_blocks", e.num_blocks},
                   {"attention_split", e.attention_split}};
  }
  j["workload"] = {{"kind", w.kind},
                   {"num_prompts", w.num_prompts},
                   {"input_len", c.input_len},
                   {"output_len", c.output_len},
                   {"seed", w.seed}};
  if (w.kind == "shared-prefix") {
    j["workload"]["num_groups"] = w.num_groups;
    j["workload"]["prompts_per_group"] = w.prompts_per_group;
    j["workload"]["system_prompt_len"] = w.system_prompt_len;
    j["workload"]["question_len"] = c.question_len;
  }
  if (w.kind == "file") j["workload"]["prompts_file"] = w.file;
  if (w.kind == "sessions") {
    const SessionsConfig& ss = c.sessions;
    j["workload"]["sessions"] = {{"num_sessions", ss.num_sessions}, {"num_turns", ss.num_turns},
                                 {"shared_len", ss.shared_len},     {"distinct_len", ss.distinct_len},
                                 {"append_len", ss.append_len},     {"think_s", ss.think_s}};
  }
  if (w.kind == "phases")
    j["workload"]["phases"] = {
        {"batch", c.phases.batch}, {"cached_contexts", c.phases.cached_contexts}, {"new_tokens", c.phases.new_tokens}};
  j["request_rate"] = c.request_rate > 0 && !std::isinf(c.request_rate) ? ordered_json(c.request_rate) : "inf";
  j["burstiness"] = c.burstiness;
  j["max_concurrency"] = c.max_concurrency;
  j["sweep_concurrency"] = c.sweep_concurrency;
  j["num_warmups"] = c.num_warmups;
  j["temperature"] = c.temperature;
  j["ignore_eos"] = c.ignore_eos;
  j["check_determinism"] = c.check_determinism;
  return j;
}

ordered_json run_json(const RunResult& run, const bool detailed) {
  const BenchMetrics& m = run.metrics;
  ordered_json j;
  j["label"] = run.options.label;
  j["max_concurrency"] = run.options.max_concurrency;
  j["request_rate"] = std::isinf(run.options.arrivals.request_rate) ? ordered_json("inf")
                                                                    : ordered_json(run.options.arrivals.request_rate);
  j["stopped_early"] = run.stopped_early;
  const CounterDelta c = counter_delta(run.before, run.after);
  const std::optional<OutputsDigest> digest = outputs_digest(run.records);
  j["metrics"] = {
      {"num_requests", m.num_requests},
      {"completed", m.num_completed},
      {"failed", m.num_failed},
      {"not_sent", m.num_not_sent},
      {"duration_s", m.duration_s},
      {"total_input_tokens", m.total_input_tokens},
      {"total_output_tokens", m.total_output_tokens},
      {"request_throughput", m.request_throughput},
      {"input_throughput", m.input_throughput},
      {"output_throughput", m.output_throughput},
      {"total_throughput", m.total_throughput},
      {"prefix_cache_hit_rate", optional_json(c.prefix_cache_hit_rate)},
      {"cached_token_fraction", optional_json(m.cached_token_fraction)},
      {"preemptions", c.preemptions ? ordered_json(*c.preemptions) : ordered_json(nullptr)},
      {"spec_draft_tokens", c.draft_tokens ? ordered_json(*c.draft_tokens) : ordered_json(nullptr)},
      {"spec_accepted_tokens", c.accepted_tokens ? ordered_json(*c.accepted_tokens) : ordered_json(nullptr)},
      {"spec_acceptance_rate", optional_json(c.acceptance_rate)},
      {"counters_source", c.source},
      {"outputs_digest", digest ? ordered_json(digest->hex) : ordered_json(nullptr)},
      {"engine_step_s", optional_json(c.step_s)},
      {"engine_forward_fraction", optional_json(c.forward_fraction)},
      {"engine_sampling_fraction", optional_json(c.sampling_fraction)},
      {"engine_bookkeeping_fraction", optional_json(c.bookkeeping_fraction)},
      {"ttft_ms", distribution_json(m.ttft_ms)},
      {"tpot_ms", distribution_json(m.tpot_ms)},
      {"itl_ms", distribution_json(m.itl_ms)},
      {"e2e_ms", distribution_json(m.e2e_ms)}};
  ordered_json requests = ordered_json::array();
  for (const RequestRecord& r : run.records) {
    ordered_json q;
    q["index"] = r.index;
    q["ok"] = r.success;
    if (!r.error.empty()) q["error"] = r.error;
    q["prompt_tokens"] = r.num_prompt_tokens;
    q["output_tokens"] = r.num_output_tokens;
    if (r.num_cached_tokens >= 0) q["cached_tokens"] = r.num_cached_tokens;
    q["send_s"] = r.send_s;
    q["ttft_ms"] = ttft_s(r) ? ordered_json(*ttft_s(r) * 1e3) : ordered_json(nullptr);
    q["tpot_ms"] = tpot_s(r) ? ordered_json(*tpot_s(r) * 1e3) : ordered_json(nullptr);
    q["e2e_ms"] = e2e_s(r) ? ordered_json(*e2e_s(r) * 1e3) : ordered_json(nullptr);
    q["finish_reason"] = r.finish_reason;
    if (const std::string d = output_digest(r); r.success && !d.empty()) q["output_digest"] = d;
    if (detailed) q["delivery_s"] = r.delivery_s;
    requests.push_back(std::move(q));
  }
  j["requests"] = std::move(requests);
  return j;
}

ordered_json determinism_json(const DeterminismReport& r) {
  return {{"requests_compared", r.num_requests_compared},
          {"positions_compared", r.num_positions_compared},
          {"requests_differing", r.num_requests_differing},
          {"not_compared", r.num_not_compared},
          {"compared", r.compared},
          {"identical", r.identical()},
          {"mismatches", r.mismatches}};
}

}  // namespace vosti::bench
