// vosti bench: the serving benchmark (time to first token, time per output token, inter-token
// latency, throughput under a load pattern), in the manner of `vllm bench serve` and SGLang's
// bench_serving, against the engine in this process (--device cpu or cuda) or any
// OpenAI-compatible server (--base-url: Vosti, vLLM, SGLang, llama-server) with the same
// workload. The parts live in tools/bench/; docs/BENCHMARKS.md says how results are recorded.
//
// Exit status: 0 every request answered (and, with --check-determinism, every response
// identical); 1 a request failed, the server died, or responses differ (the partial report is
// still printed and written); 2 bad arguments; 130 interrupted (Ctrl-C: what was measured so
// far is printed and written first).
// Signals: SIGINT/SIGTERM are blocked in every thread and taken by a watcher thread that sets
// the driver's interrupt flag; a second one exits at once.
#include <pthread.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <csignal>
#include <cstdio>
#include <thread>

#include "tools/bench/bench_config.h"
#include "tools/bench/session.h"
#include "tools/commands.h"
#include "tools/engine_options.h"

namespace vosti::tools {
namespace {

using namespace vosti::bench;

// Takes SIGINT/SIGTERM on its own thread. REQUIRES: constructed before any other thread starts
// (the blocked mask is inherited), so no other thread ever runs a handler.
class InterruptWatcher {
 public:
  InterruptWatcher() {
    sigemptyset(&set_);
    sigaddset(&set_, SIGINT);
    sigaddset(&set_, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &set_, nullptr);
    thread_ = std::thread([this] { watch(); });
  }
  ~InterruptWatcher() {
    stop_ = true;
    thread_.join();
  }
  const std::atomic<bool>& interrupted() const { return interrupted_; }

 private:
  void watch() {
    const timespec slice{0, 100'000'000};
    while (!stop_) {
      if (sigtimedwait(&set_, nullptr, &slice) <= 0) continue;
      if (interrupted_) {
        std::fprintf(stderr, "\nvosti bench: interrupted again; exiting now\n");
        std::_Exit(130);
      }
      interrupted_ = true;
      std::fprintf(stderr,
                   "\nvosti bench: interrupted; stopping and reporting what was measured "
                   "(interrupt again to quit at once)\n");
    }
  }
  sigset_t set_;
  std::atomic<bool> stop_{false};
  std::atomic<bool> interrupted_{false};
  std::thread thread_;
};

// The preset named on the command line ("" if none), read before the real parse so that
// explicit flags override the preset's values.
std::string preset_from_argv(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--preset" && i + 1 < argc) return argv[i + 1];
    if (a.rfind("--preset=", 0) == 0) return a.substr(9);
  }
  return "";
}

struct CliExtras {
  bool list_presets = false;
  bool no_progress = false;
  CLI::Option* output_len = nullptr;
};

void add_target_options(CLI::App& app, BenchConfig& c) {
  app.add_option("--model,-m", c.model,
                 "model file: a .gguf or a Hugging Face directory (in-process: the model; HTTP: its tokenizer)")
      ->capture_default_str();
  app.add_option("--base-url", c.http.base_url, "benchmark an OpenAI-compatible server at this URL (http://HOST:PORT)");
  app.add_option("--served-model-name", c.http.model, "HTTP: the \"model\" field (default: the server's first model)");
  app.add_option("--api-key", c.http.api_key, "HTTP: sent as 'Authorization: Bearer KEY'");
  app.add_option("--request-timeout", c.http.request_timeout_s, "HTTP: seconds of server silence that fail a request")
      ->capture_default_str();
  // The engine's options take effect in-process only (a server has its own).
  add_engine_options(app, c.engine);
}

void add_workload_options(CLI::App& app, BenchConfig& c, CliExtras& x) {
  WorkloadConfig& w = c.workload;
  app.add_option("--preset", c.preset, "a named preset (--list-presets); other flags override it");
  app.add_flag("--list-presets", x.list_presets, "print the presets and exit");
  app.add_option("--workload", w.kind,
                 "random, shared-prefix, file, copy (built-in prompts whose answers copy the prompt: code edits, "
                 "extraction), or the paper's: sessions (multi-session replay), phases (aligned)")
      ->check(CLI::IsMember({"random", "shared-prefix", "file", "copy", "sessions", "phases"}))
      ->capture_default_str();
  app.add_option("--num-prompts,-n", w.num_prompts,
                 "requests (file: at most this many, 0: all; copy: past its prompts they repeat)")
      ->capture_default_str();
  app.add_option("--input-len", c.input_len, "random: prompt tokens, N or MIN:MAX (uniform)")->capture_default_str();
  x.output_len = app.add_option("--output-len", c.output_len, "max output tokens, N or MIN:MAX (file: overrides)")
                     ->capture_default_str();
  app.add_option("--prompts-file", w.file, "file: JSONL or JSON array of prompts / messages / ShareGPT conversations");
  app.add_option("--num-groups", w.num_groups, "shared-prefix: groups (one system prompt each)")->capture_default_str();
  app.add_option("--prompts-per-group", w.prompts_per_group, "shared-prefix: requests per group")
      ->capture_default_str();
  app.add_option("--system-prompt-len", w.system_prompt_len, "shared-prefix: shared prefix tokens")
      ->capture_default_str();
  app.add_option("--question-len", c.question_len, "shared-prefix: tokens after the prefix, N or MIN:MAX")
      ->capture_default_str();
  app.add_option("--seed", w.seed, "workload seed: prompts, lengths, arrivals, sampling seeds")->capture_default_str();
  SessionsConfig& ss = c.sessions;
  app.add_option("--num-sessions", ss.num_sessions, "sessions: independent sessions")->capture_default_str();
  app.add_option("--num-turns", ss.num_turns, "sessions: turns per session")->capture_default_str();
  app.add_option("--shared-prefix-len", ss.shared_len, "sessions: first-turn tokens every session shares")
      ->capture_default_str();
  app.add_option("--distinct-len", ss.distinct_len, "sessions: first-turn tokens of each session's own")
      ->capture_default_str();
  app.add_option("--append-len", ss.append_len, "sessions: new tokens each later turn appends")->capture_default_str();
  app.add_option("--think-time", ss.think_s, "sessions: seconds between a response and the next turn")
      ->capture_default_str();
  app.add_option("--phase-batch", c.phases.batch, "phases: requests per phase, sent at once")->capture_default_str();
  app.add_option("--cached-contexts", c.phases.cached_contexts, "phases: cached context lengths, e.g. 0,4096,8192")
      ->delimiter(',');
  app.add_option("--new-tokens", c.phases.new_tokens, "phases: prompt tokens each request adds to its context")
      ->capture_default_str();
  app.add_option("--request-rate", c.request_rate, "requests/s, Poisson arrivals (0 or inf: all at once)")
      ->capture_default_str();
  app.add_option("--burstiness", c.burstiness, "gamma shape of the gaps (1: Poisson; < 1 burstier)")
      ->capture_default_str();
  app.add_option("--max-concurrency", c.max_concurrency, "requests in flight at most (0: no cap)")
      ->capture_default_str();
  app.add_option("--sweep-concurrency", c.sweep_concurrency, "run once per cap, e.g. 1,4,16 (for --plot)")
      ->delimiter(',');
  app.add_option("--num-warmups", c.num_warmups, "warm-up requests before measuring (other prompts)")
      ->capture_default_str();
  app.add_option("--temperature", c.temperature, "sampling temperature (0: greedy; seeds per request)")
      ->capture_default_str();
  app.add_flag("--ignore-eos,!--no-ignore-eos", c.ignore_eos, "generate every requested output token");
  app.add_flag("--check-determinism", c.check_determinism,
               "run twice (other concurrency, reversed order) and compare every response");
  app.add_option("--determinism-concurrency", c.determinism_concurrency,
                 "the second pass's cap (default: 1 if the first ran several at once, else none)");
  app.add_option("--output,-o", c.output_json, "write the JSON result here");
  app.add_option("--label", c.label, "a note kept in the JSON and the docs table (e.g. how the server was started)");
  app.add_option("--plot", c.plot_dir, "write PNG plots here (scripts/bench-plot, matplotlib)");
  app.add_flag("--save-detailed", c.save_detailed, "per-request delivery times in the JSON (ITL CDF)");
  app.add_flag("--no-progress", x.no_progress, "no progress bar (it is off when stderr is not a terminal)");
}

std::string joined_command(int argc, char** argv) {
  std::string out = "vosti";
  for (int i = 0; i < argc; ++i) {
    const std::string a = argv[i];
    const bool quote = a.empty() || a.find_first_of(" \t'\"$") != std::string::npos;
    out += " " + (quote ? "'" + a + "'" : a);
  }
  return out;
}

void print_presets() {
  for (const BenchPreset& p : bench_presets()) std::printf("  %-20s %s\n", p.name, p.description);
}

}  // namespace

int cmd_bench(int argc, char** argv) {
  InterruptWatcher watcher;  // first: every thread started later inherits the blocked signals
  BenchConfig c;
  c.model = default_model_path();
  if (const std::string preset = preset_from_argv(argc, argv); !preset.empty()) {
    auto p = find_preset(preset);
    if (!p.ok()) {
      std::fprintf(stderr, "vosti bench: %s\n", p.status().message().c_str());
      return 2;
    }
    (*p)->apply(c);
  }
  CLI::App app{
      "Serving benchmark: TTFT, TPOT, ITL, latency and throughput of a workload under a load pattern, "
      "in-process (--device cpu|cuda) or against an OpenAI-compatible server (--base-url).",
      "vosti bench"};
  CliExtras x;
  add_target_options(app, c);
  add_workload_options(app, c, x);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  if (x.list_presets) {
    print_presets();
    return 0;
  }
  c.progress = !x.no_progress;
  c.workload.output_len_given = x.output_len->count() > 0;
  if (Status s = finalize_config(c); !s.ok()) {
    std::fprintf(stderr, "vosti bench: %s\n", s.message().c_str());
    return 2;
  }
  return run_session(c, joined_command(argc, argv), watcher.interrupted());
}

}  // namespace vosti::tools
