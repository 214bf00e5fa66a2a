// The paper's performance workloads (paper_workloads.h): the multi-session replay (a driver of
// dependent requests) and the aligned phases (waves over cached contexts), their tables and JSON.
#include "tools/bench/paper_workloads.h"

#include <algorithm>
#include <limits>
#include <random>

#include "tools/bench/arrivals.h"
#include "tools/bench/driver.h"
#include "tools/bench/workload.h"

namespace vosti::bench {
namespace {

struct SessionState {
  std::vector<int32_t> prompt;                 // the next turn's prompt (grows turn by turn)
  std::vector<std::vector<int32_t>> appended;  // [num_turns] new tokens of each turn (turn 0: none)
  int32_t next_turn = 0;
  bool in_flight = false;
  double ready_s = 0;  // the previous response's end + think time
};

// Untimed requests, all at once (the warm-ups); a failure stops the run.
std::string run_untimed(Target& target, RunClock& clock, std::vector<BenchRequest> requests, const char* what,
                        const PaperRunOptions& o) {
  for (size_t i = 0; i < requests.size(); ++i) requests[i].index = static_cast<int64_t>(i);
  RunOptions ro;
  ro.label = what;
  ro.sampling.ignore_eos = true;
  ro.interrupted = o.interrupted;
  const RunResult r = run_workload(target, clock, requests, ro);
  if (!r.stopped_early.empty()) return std::string(what) + ": " + r.stopped_early;
  for (const RequestRecord& rec : r.records)
    if (!rec.success) return std::string(what) + " failed: " + rec.error;
  return "";
}

// The measured replay's records by request index (session * turns + turn), or why it stopped.
std::string replay(Target& target, RunClock& clock, std::vector<SessionState>& sessions, const SessionsConfig& c,
                   const PaperRunOptions& o, std::vector<RequestRecord>& records) {
  const int64_t n = static_cast<int64_t>(c.num_sessions) * c.num_turns;
  ArrivalConfig ac;
  ac.request_rate = o.request_rate > 0 ? o.request_rate : std::numeric_limits<double>::infinity();
  ac.seed = o.seed;
  const std::vector<double> offered = arrival_times(n, ac);  // turn-major: [turn * sessions + session]
  SamplingOptions so;
  so.ignore_eos = true;
  so.want_token_ids = true;
  records.assign(static_cast<size_t>(n), RequestRecord{});
  clock.restart();
  int64_t done = 0;
  while (done < n) {
    if (o.interrupted && o.interrupted->load()) {
      target.abort_all("interrupted");
      return "interrupted (Ctrl-C)";
    }
    if (auto why = target.unreachable()) return "the server is unreachable: " + *why;
    double next_s = clock.now_s() + 0.1;
    for (int32_t s = 0; s < c.num_sessions; ++s) {
      SessionState& st = sessions[static_cast<size_t>(s)];
      if (st.in_flight || st.next_turn >= c.num_turns) continue;
      const int64_t key = static_cast<int64_t>(st.next_turn) * c.num_sessions + s;
      const double at = std::max(offered[static_cast<size_t>(key)], st.ready_s);
      if (at > clock.now_s()) {
        next_s = std::min(next_s, at);
        continue;
      }
      BenchRequest r;
      r.index = static_cast<int64_t>(s) * c.num_turns + st.next_turn;
      r.prompt_ids = st.prompt;
      r.max_tokens = o.output_len;
      r.seed = 1 + o.seed * 1000003ull + static_cast<uint64_t>(r.index);
      st.in_flight = true;
      target.submit(r, so, clock.now_s());
    }
    for (RequestRecord& rec : target.wait(next_s)) {
      if (rec.index < 0 || rec.index >= n) continue;
      const int32_t s = static_cast<int32_t>(rec.index / c.num_turns);
      SessionState& st = sessions[static_cast<size_t>(s)];
      if (!rec.success)
        return "session " + std::to_string(s) + " turn " + std::to_string(st.next_turn + 1) + ": " + rec.error;
      if (static_cast<int64_t>(rec.content.token_ids.size()) != rec.num_output_tokens)
        return "the target returned no output token ids, so the next turn's prompt cannot be built (vLLM: a version "
               "with return_token_ids)";
      st.prompt.insert(st.prompt.end(), rec.content.token_ids.begin(), rec.content.token_ids.end());
      if (++st.next_turn < c.num_turns) {
        const auto& add = st.appended[static_cast<size_t>(st.next_turn)];
        st.prompt.insert(st.prompt.end(), add.begin(), add.end());
      }
      st.in_flight = false;
      st.ready_s = rec.end_s + c.think_s;
      records[static_cast<size_t>(rec.index)] = std::move(rec);
      ++done;
    }
  }
  return "";
}

}  // namespace

PaperRunResult run_sessions(Target& target, RunClock& clock, const Tokenizer& tokenizer, const SessionsConfig& c,
                            const PaperRunOptions& o) {
  PaperRunResult result;
  result.workload = "sessions";
  std::mt19937_64 rng(o.seed);
  const std::vector<int32_t> shared = random_token_ids(rng, c.shared_len, tokenizer);
  std::vector<SessionState> sessions(static_cast<size_t>(c.num_sessions));
  for (SessionState& st : sessions) {
    st.prompt = shared;
    const std::vector<int32_t> own = random_token_ids(rng, c.distinct_len, tokenizer);
    st.prompt.insert(st.prompt.end(), own.begin(), own.end());
    st.appended.resize(static_cast<size_t>(c.num_turns));
    for (int32_t t = 1; t < c.num_turns; ++t)
      st.appended[static_cast<size_t>(t)] = random_token_ids(rng, c.append_len, tokenizer);
  }
  std::mt19937_64 warm_rng(o.seed + 1);  // prompts no measured request shares
  std::vector<BenchRequest> decode_warmup(static_cast<size_t>(c.num_sessions));
  for (BenchRequest& r : decode_warmup) {
    r.prompt_ids = random_token_ids(warm_rng, 16, tokenizer);
    r.max_tokens = std::min(o.output_len, 16);
  }
  BenchRequest donor;
  donor.prompt_ids = shared;
  const std::vector<int32_t> tail = random_token_ids(warm_rng, 4, tokenizer);
  donor.prompt_ids.insert(donor.prompt_ids.end(), tail.begin(), tail.end());
  donor.max_tokens = 1;
  result.stopped_early = run_untimed(target, clock, decode_warmup, "decode warm-up", o);
  if (result.stopped_early.empty())
    result.stopped_early = run_untimed(target, clock, {donor}, "shared-prefix donor", o);
  std::vector<RequestRecord> records;
  if (result.stopped_early.empty()) result.stopped_early = replay(target, clock, sessions, c, o, records);
  result.duration_s = std::max(clock.now_s(), 1e-9);
  for (int32_t t = 0; t < c.num_turns && result.stopped_early.empty(); ++t) {
    GroupResult g;
    g.label = "turn " + std::to_string(t + 1);
    for (int32_t s = 0; s < c.num_sessions; ++s) g.records.push_back(records[static_cast<size_t>(s) * c.num_turns + t]);
    g.metrics = compute_metrics(g.records, records_span_s(g.records));
    result.groups.push_back(std::move(g));
  }
  result.overall = compute_metrics(records, result.duration_s);
  return result;
}

namespace {

// The batch's prefill and decode throughputs of one phase wave (paper_workloads.h).
void phase_throughputs(GroupResult& g, int32_t new_tokens) {
  double first_send = 1e300, last_first = 0, last_end = 0;
  int64_t decoded = 0;
  for (const RequestRecord& r : g.records) {
    if (!r.success || r.delivery_s.empty()) return;
    first_send = std::min(first_send, r.send_s);
    last_first = std::max(last_first, r.delivery_s.front());
    last_end = std::max(last_end, r.end_s);
    decoded += r.num_output_tokens - 1;
  }
  const double n = static_cast<double>(g.records.size());
  if (last_first > first_send) g.prefill_tok_s = n * new_tokens / (last_first - first_send);
  if (last_end > last_first) g.decode_tok_s = static_cast<double>(decoded) / (last_end - last_first);
}

}  // namespace

PaperRunResult run_phases(Target& target, RunClock& clock, const Tokenizer& tokenizer, const PhasesConfig& c,
                          const PaperRunOptions& o) {
  PaperRunResult result;
  result.workload = "phases";
  std::mt19937_64 rng(o.seed);
  std::vector<RequestRecord> all;
  double total_s = 0;
  for (size_t k = 0; k < c.cached_contexts.size() && result.stopped_early.empty(); ++k) {
    const int32_t cached = c.cached_contexts[k];
    for (int wave = 0; wave < 2 && result.stopped_early.empty(); ++wave) {  // an untimed warm-up, then measured
      std::vector<BenchRequest> donors, measured;
      for (int32_t b = 0; b < c.batch; ++b) {
        BenchRequest m;
        m.index = b;
        m.prompt_ids = random_token_ids(rng, cached + c.new_tokens, tokenizer);
        m.max_tokens = o.output_len;
        if (cached > 0) {  // a donor of cached + 1 tokens, diverging from the measured prompt at token `cached`
          BenchRequest d;
          d.prompt_ids.assign(m.prompt_ids.begin(), m.prompt_ids.begin() + cached);
          int32_t other = m.prompt_ids[static_cast<size_t>(cached)];
          while (other == m.prompt_ids[static_cast<size_t>(cached)]) other = random_token_ids(rng, 1, tokenizer)[0];
          d.prompt_ids.push_back(other);
          d.max_tokens = 1;
          donors.push_back(std::move(d));
        }
        measured.push_back(std::move(m));
      }
      if (!donors.empty()) result.stopped_early = run_untimed(target, clock, donors, "phase donors", o);
      if (!result.stopped_early.empty()) break;
      RunOptions ro;
      ro.label = "cached " + std::to_string(cached);
      ro.sampling.ignore_eos = true;
      ro.interrupted = o.interrupted;
      RunResult r = run_workload(target, clock, measured, ro);
      if (!r.stopped_early.empty()) result.stopped_early = ro.label + ": " + r.stopped_early;
      if (wave == 0) continue;
      GroupResult g;
      g.label = ro.label;
      g.records = std::move(r.records);
      g.metrics = r.metrics;
      phase_throughputs(g, c.new_tokens);
      total_s += r.duration_s;
      for (RequestRecord rec : g.records) {
        rec.index = static_cast<int64_t>(all.size());
        all.push_back(std::move(rec));
      }
      result.groups.push_back(std::move(g));
    }
  }
  result.duration_s = std::max(total_s, 1e-9);
  result.overall = compute_metrics(all, result.duration_s);
  return result;
}

namespace {

std::string ms(const Distribution& d) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%9.1f %9.1f", d.mean, d.median);
  return buf;
}

std::string percent(const std::optional<double>& f) {
  if (!f) return "n/a";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f%%", *f * 100);
  return buf;
}

}  // namespace

void print_paper_run(FILE* out, const PaperRunResult& run, const std::string& title) {
  std::fprintf(out, "\n%s: %s\n", run.workload == "sessions" ? "multi-session replay" : "aligned phases",
               title.c_str());
  std::fprintf(out, "%-14s %4s %19s %19s %10s %10s %9s\n", "", "reqs", "TTFT ms mean  med", "TPOT ms mean  med",
               run.workload == "phases" ? "prefill/s" : "in tok/s", run.workload == "phases" ? "decode/s" : "out tok/s",
               "hit rate");
  for (const GroupResult& g : run.groups) {
    const BenchMetrics& m = g.metrics;
    const double a = run.workload == "phases" ? g.prefill_tok_s : m.input_throughput;
    const double b = run.workload == "phases" ? g.decode_tok_s : m.output_throughput;
    std::fprintf(out, "%-14s %4lld %s %s %10.1f %10.1f %9s\n", g.label.c_str(), static_cast<long long>(m.num_completed),
                 ms(m.ttft_ms).c_str(), ms(m.tpot_ms).c_str(), a, b, percent(m.cached_token_fraction).c_str());
  }
  const BenchMetrics& m = run.overall;
  std::fprintf(out, "%-14s %4lld %s %s %10.1f %10.1f   (%.2f s%s)\n", "all", static_cast<long long>(m.num_completed),
               ms(m.ttft_ms).c_str(), ms(m.tpot_ms).c_str(), m.input_throughput, m.output_throughput, run.duration_s,
               run.workload == "sessions" ? ": the sessions' completion time" : " measured");
  if (!run.stopped_early.empty()) std::fprintf(out, "stopped early: %s\n", run.stopped_early.c_str());
}

nlohmann::ordered_json paper_run_json(const PaperRunResult& run) {
  using nlohmann::ordered_json;
  const auto dist = [](const Distribution& d) {
    return ordered_json{{"mean", d.mean}, {"median", d.median}, {"p90", d.p90}, {"p99", d.p99}, {"count", d.count}};
  };
  const auto metrics = [&](const BenchMetrics& m) {
    ordered_json j = {{"completed", m.num_completed},
                      {"failed", m.num_failed},
                      {"duration_s", m.duration_s},
                      {"input_tokens", m.total_input_tokens},
                      {"output_tokens", m.total_output_tokens},
                      {"input_tok_s", m.input_throughput},
                      {"output_tok_s", m.output_throughput},
                      {"ttft_ms", dist(m.ttft_ms)},
                      {"tpot_ms", dist(m.tpot_ms)},
                      {"e2e_ms", dist(m.e2e_ms)}};
    j["prefix_cache_hit_rate"] = m.cached_token_fraction ? ordered_json(*m.cached_token_fraction) : ordered_json();
    return j;
  };
  ordered_json j = {{"workload", run.workload}, {"duration_s", run.duration_s}, {"stopped_early", run.stopped_early}};
  j["overall"] = metrics(run.overall);
  j["groups"] = ordered_json::array();
  for (const GroupResult& g : run.groups) {
    ordered_json gj = {{"label", g.label}};
    gj["metrics"] = metrics(g.metrics);
    if (run.workload == "phases") {
      gj["prefill_tok_s"] = g.prefill_tok_s;
      gj["decode_tok_s"] = g.decode_tok_s;
    }
    gj["requests"] = ordered_json::array();
    for (const RequestRecord& r : g.records)
      gj["requests"].push_back({{"prompt_tokens", r.num_prompt_tokens},
                                {"cached_tokens", r.num_cached_tokens},
                                {"output_tokens", r.num_output_tokens},
                                {"ttft_ms", ttft_s(r) ? ordered_json(*ttft_s(r) * 1e3) : ordered_json()},
                                {"tpot_ms", tpot_s(r) ? ordered_json(*tpot_s(r) * 1e3) : ordered_json()}});
    j["groups"].push_back(std::move(gj));
  }
  return j;
}

}  // namespace vosti::bench
