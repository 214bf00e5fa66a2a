#include "tools/bench/session.h"

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <limits>
#include <optional>

#include "engine/engine.h"
#include "model/model_config.h"
#include "runner/device_model.h"
#include "runner/model_runner.h"
#include "tokenizer/tokenizer.h"
#include "tools/bench/build_info.h"
#include "tools/bench/engine_target.h"
#include "tools/bench/paper_workloads.h"
#include "tools/bench/report.h"

namespace vosti::bench {
namespace {

using nlohmann::ordered_json;

constexpr int kExitOk = 0, kExitFailed = 1, kExitUsage = 2, kExitInterrupted = 130;

struct OpenedTarget {
  std::unique_ptr<Target> target;
  std::shared_ptr<const Tokenizer> tokenizer;  // null when an HTTP run has no local model
  std::string title;                           // "in-process cuda:0 NVIDIA H200 ..., model X"
  ordered_json description;
};

Result<OpenedTarget> open_target(const BenchConfig& c, const RunClock* clock) {
  OpenedTarget out;
  if (c.http.base_url.empty()) {
    VOSTI_ASSIGN_OR_RETURN(std::unique_ptr<EngineTarget> t, EngineTarget::create(c.model, c.engine, clock));
    const RunnerInfo& info = t->engine().runner_info();
    const std::string model_name = t->engine().model().config().name;
    out.tokenizer = t->tokenizer();
    out.title = "in-process " + info.device + ", model " + model_name;
    out.description = {{"kind", "in-process"},
                       {"device", info.device},
                       {"model", model_name},
                       {"model_path", c.model},
                       {"kv_cache_dtype", info.kv_cache_dtype},
                       {"kv_blocks", info.num_blocks},
                       {"block_size", info.block_size},
                       {"max_model_len", info.max_model_len},
                       {"weight_bytes", info.weight_bytes}};
    out.target = std::move(t);
    return out;
  }
  VOSTI_ASSIGN_OR_RETURN(std::unique_ptr<HttpTarget> t, HttpTarget::create(c.http, clock));
  if (!c.model.empty() && std::filesystem::exists(c.model)) {
    auto tok = Tokenizer::load_for_model(c.model);
    if (!tok.ok()) return tok.status().with_context("--model " + c.model + " (the tokenizer for the workload)");
    out.tokenizer = *tok;
  }
  out.title = "HTTP " + t->url().to_string() + " (" + t->server_kind() + "), model " + t->model();
  out.description = {{"kind", "http"},
                     {"base_url", t->url().to_string()},
                     {"server", t->server_kind()},
                     {"model", t->model()},
                     {"tokenizer", out.tokenizer ? c.model : ""}};
  out.target = std::move(t);
  return out;
}

// The configured workload with its seed moved by `offset` (warm-ups and sweep points get
// prompts of their own, so that no run finds another's prompts in the prefix cache).
Result<std::vector<BenchRequest>> workload_at(const BenchConfig& c, const Tokenizer* tok, uint64_t offset) {
  WorkloadConfig w = c.workload;
  w.seed += offset;
  return make_workload(w, tok);
}

RunOptions base_options(const BenchConfig& c, const std::atomic<bool>& interrupted) {
  RunOptions o;
  o.max_concurrency = c.max_concurrency;
  o.arrivals.request_rate = c.request_rate > 0 ? c.request_rate : std::numeric_limits<double>::infinity();
  o.arrivals.burstiness = c.burstiness;
  o.arrivals.seed = c.workload.seed;
  o.sampling.temperature = c.temperature;
  o.sampling.ignore_eos = c.ignore_eos;
  // In-process the ids cost nothing; they give the run's outputs digest (a Vosti server returns
  // them anyway).
  o.sampling.want_token_ids = c.http.base_url.empty();
  o.progress = c.progress;
  o.interrupted = &interrupted;
  return o;
}

// The second determinism pass: the other order and another cap.
RunOptions second_pass(const BenchConfig& c, RunOptions o, int64_t num_requests) {
  o.label = "determinism pass 2";
  o.reverse_order = true;
  const bool first_ran_several = o.max_concurrency != 1 && num_requests > 1;
  o.max_concurrency = c.determinism_concurrency >= 0 ? c.determinism_concurrency : (first_ran_several ? 1 : 0);
  o.arrivals.request_rate = std::numeric_limits<double>::infinity();
  return o;
}

std::string iso_time_utc() {
  const std::time_t t = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  return buf;
}

bool all_answered(const RunResult& r) {
  return r.stopped_early.empty() && r.metrics.num_completed == r.metrics.num_requests;
}

// Warm-up requests (prompts of their own, all at once); their results are not kept.
void run_warmups(const BenchConfig& c, const OpenedTarget& t, RunClock& clock, const RunOptions& base) {
  if (c.num_warmups <= 0) return;
  auto warm = workload_at(c, t.tokenizer.get(), 1000003);
  if (!warm.ok()) return;
  warm->resize(std::min<size_t>(warm->size(), static_cast<size_t>(c.num_warmups)));
  RunOptions o = base;
  o.label = "warm-up";
  o.arrivals.request_rate = std::numeric_limits<double>::infinity();
  const RunResult w = run_workload(*t.target, clock, *warm, o);
  std::fprintf(stderr, "vosti bench: %lld warm-up request(s) in %.2f s\n",
               static_cast<long long>(w.metrics.num_completed), w.duration_s);
}

struct Measurements {
  std::vector<RunResult> runs;
  std::optional<DeterminismReport> determinism;
};

// The measured runs: one, one per sweep point (each with its own prompts), or the two
// determinism passes and their comparison. Each run's table is printed as it ends; a run
// that stops early ends the sequence.
Measurements measure(const BenchConfig& c, const OpenedTarget& t, RunClock& clock,
                     const std::vector<BenchRequest>& requests, const RunOptions& base) {
  Measurements m;
  const auto run = [&](const std::vector<BenchRequest>& reqs, const RunOptions& o) {
    m.runs.push_back(run_workload(*t.target, clock, reqs, o));
    print_run(stdout, m.runs.back(), o.label + ": " + t.title);
    std::fflush(stdout);
    return m.runs.back().stopped_early.empty();
  };
  if (!c.sweep_concurrency.empty()) {
    for (size_t k = 0; k < c.sweep_concurrency.size(); ++k) {
      auto reqs = k == 0 ? Result<std::vector<BenchRequest>>(requests) : workload_at(c, t.tokenizer.get(), 2000003 * k);
      if (!reqs.ok()) break;
      RunOptions o = base;
      o.max_concurrency = c.sweep_concurrency[k];
      o.label = "concurrency " + std::to_string(o.max_concurrency);
      if (!run(*reqs, o)) break;
    }
    return m;
  }
  RunOptions o = base;
  o.label = c.check_determinism ? "determinism pass 1" : "main";
  o.sampling.want_content = c.check_determinism;
  if (run(requests, o) && c.check_determinism &&
      run(requests, second_pass(c, o, static_cast<int64_t>(requests.size())))) {
    m.determinism = compare_runs(m.runs[0].records, m.runs[1].records);
    print_determinism(stdout, *m.determinism);
  }
  return m;
}

std::string plot_script() {
  std::vector<std::filesystem::path> candidates;
  if (const char* s = std::getenv("VOSTI_SOURCE_DIR"); s && *s)
    candidates.emplace_back(std::filesystem::path(s) / "scripts");
  std::error_code ec;
  const auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) candidates.push_back(exe.parent_path().parent_path() / "scripts");
#ifdef VOSTI_SOURCE_DIR
  candidates.emplace_back(std::filesystem::path(VOSTI_SOURCE_DIR) / "scripts");
#endif
  for (const auto& dir : candidates) {
    if (std::filesystem::exists(dir / "bench-plot")) return (dir / "bench-plot").string();
  }
  return "";
}

// Writes the JSON; then the plots if asked. Returns false (after saying why) on failure.
bool write_outputs(const BenchConfig& c, const ordered_json& doc) {
  std::string json_path = c.output_json;
  if (json_path.empty() && !c.plot_dir.empty()) json_path = c.plot_dir + "/result.json";
  if (!c.plot_dir.empty()) std::filesystem::create_directories(c.plot_dir);
  if (!json_path.empty()) {
    std::ofstream out(json_path);
    out << doc.dump(1) << "\n";
    if (!out) {
      std::fprintf(stderr, "vosti bench: cannot write %s\n", json_path.c_str());
      return false;
    }
    std::fprintf(stderr, "vosti bench: wrote %s\n", json_path.c_str());
  }
  if (c.plot_dir.empty()) return true;
  const std::string script = plot_script();
  if (script.empty()) {
    std::fprintf(stderr, "vosti bench: --plot: scripts/bench-plot not found (set VOSTI_SOURCE_DIR to the checkout)\n");
    return false;
  }
  const std::string cmd = "python3 '" + script + "' '" + json_path + "' '" + c.plot_dir + "'";
  if (std::system(cmd.c_str()) != 0) {
    std::fprintf(stderr, "vosti bench: --plot failed: %s (matplotlib: scripts/setup --test installs it)\n",
                 cmd.c_str());
    return false;
  }
  return true;
}

// The paper's sessions or phases (paper_workloads.h): their own drivers, tables and JSON.
int run_paper_workload(const BenchConfig& c, const OpenedTarget& t, RunClock& clock,
                       const std::atomic<bool>& interrupted, ordered_json& doc) {
  if (!t.tokenizer) {
    std::fprintf(stderr,
                 "vosti bench: the %s workload draws token ids from the model's vocabulary: give --model PATH\n",
                 c.workload.kind.c_str());
    return kExitUsage;
  }
  PaperRunOptions o;
  o.output_len = c.workload.output_len.max;
  o.request_rate = c.request_rate;
  o.seed = c.workload.seed;
  o.interrupted = &interrupted;
  const PaperRunResult run = c.workload.kind == "sessions" ? run_sessions(*t.target, clock, *t.tokenizer, c.sessions, o)
                                                           : run_phases(*t.target, clock, *t.tokenizer, c.phases, o);
  print_paper_run(stdout, run, t.title);
  std::fflush(stdout);
  doc["machine"]["load_average_end"] = machine_info()["load_average"];
  doc["paper_run"] = paper_run_json(run);
  const bool written = write_outputs(c, doc);
  if (interrupted) return kExitInterrupted;
  return written && run.stopped_early.empty() ? kExitOk : kExitFailed;
}

}  // namespace

int run_session(const BenchConfig& c, const std::string& command_line, const std::atomic<bool>& interrupted) {
  ordered_json doc;
  doc["tool"] = "vosti bench";
  doc["schema_version"] = 1;
  doc["date"] = iso_time_utc();
  doc["commit"] = build_commit();
  doc["command"] = command_line;
  doc["machine"] = machine_info();
  doc["config"] = config_json(c);
  RunClock clock;
  auto opened = open_target(c, &clock);
  if (!opened.ok()) {
    std::fprintf(stderr, "vosti bench: %s\n", opened.status().to_string().c_str());
    return opened.status().code() == StatusCode::kInvalidArgument ? kExitUsage : kExitFailed;
  }
  doc["target"] = opened->description;
  std::fprintf(stderr, "vosti bench: %s\n", opened->title.c_str());
  if (c.workload.kind == "sessions" || c.workload.kind == "phases")
    return run_paper_workload(c, *opened, clock, interrupted, doc);
  auto requests = workload_at(c, opened->tokenizer.get(), 0);
  if (!requests.ok()) {
    std::fprintf(stderr, "vosti bench: %s\n", requests.status().to_string().c_str());
    return requests.status().code() == StatusCode::kInvalidArgument ? kExitUsage : kExitFailed;
  }
  if (!c.output_json.empty() && !std::ofstream(c.output_json, std::ios::app)) {  // fail before the run, not after
    std::fprintf(stderr, "vosti bench: cannot write -o %s (does its directory exist?)\n", c.output_json.c_str());
    return kExitUsage;
  }
  const RunOptions base = base_options(c, interrupted);
  run_warmups(c, *opened, clock, base);
  const Measurements m = measure(c, *opened, clock, *requests, base);
  doc["machine"]["load_average_end"] = machine_info()["load_average"];
  ordered_json runs_json = ordered_json::array();
  for (const RunResult& r : m.runs) runs_json.push_back(run_json(r, c.save_detailed));
  doc["runs"] = std::move(runs_json);
  if (m.determinism) doc["determinism"] = determinism_json(*m.determinism);
  const bool written = write_outputs(c, doc);
  if (interrupted) return kExitInterrupted;
  bool ok = written && !m.runs.empty();
  for (const RunResult& r : m.runs) ok = ok && all_answered(r);
  if (c.check_determinism) ok = ok && m.determinism && m.determinism->identical();
  return ok ? kExitOk : kExitFailed;
}

}  // namespace vosti::bench
