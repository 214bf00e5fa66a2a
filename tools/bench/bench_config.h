// BenchConfig: everything one `vosti bench` invocation is told (flags and presets), recorded
// whole in its JSON output so that every number can be re-run. Presets are named starting
// points; explicit flags override them (cmd_bench.cc applies the preset before parsing).
// Thread safety: value types and pure functions.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "core/engine_config.h"
#include "core/status.h"
#include "tools/bench/arrivals.h"
#include "tools/bench/http_target.h"
#include "tools/bench/paper_workloads.h"
#include "tools/bench/workload.h"

namespace vosti::bench {

struct BenchConfig {
  std::string preset;  // "" or a preset's name
  std::string label;   // a free note recorded with the result (e.g. the server's command line)
  // Target: the engine in-process unless http.base_url is given.
  std::string model;  // the model file (in-process), or its tokenizer (HTTP)
  HttpTargetOptions http;
  EngineConfig engine;  // in-process (the shared engine options, tools/engine_options.h)
  // Workload and load (workload.kind "sessions" and "phases": the paper's, paper_workloads.h,
  // with their own settings below; output_len's upper bound is their output length).
  WorkloadConfig workload;
  SessionsConfig sessions;
  PhasesConfig phases;
  std::string input_len = "128";  // LengthRange text (N or MIN:MAX), parsed into workload
  std::string output_len = "128";
  std::string question_len = "128";
  double request_rate = 0;  // requests/s; 0 (or inf): all at once
  double burstiness = 1.0;
  int64_t max_concurrency = 0;             // 0: no cap
  std::vector<int64_t> sweep_concurrency;  // run once per value (plots against it)
  int64_t num_warmups = 0;
  double temperature = 0;
  bool ignore_eos = false;
  // Checks and output.
  bool check_determinism = false;
  int64_t determinism_concurrency = -1;  // the second pass's cap; -1: 1 if the first ran > 1 at once, else none
  std::string output_json;
  std::string plot_dir;
  bool save_detailed = false;  // per-request delivery times in the JSON (ITL CDF)
  bool progress = true;
};

struct BenchPreset {
  const char* name;
  const char* description;
  void (*apply)(BenchConfig&);
};

// The named presets (docs/BENCHMARKS.md uses them).
std::span<const BenchPreset> bench_presets();
// Errors: kInvalidArgument listing the presets for an unknown name.
Result<const BenchPreset*> find_preset(const std::string& name);

// Parses the length texts into the workload and checks every combination a flag parser cannot
// (ranges, rates, a sweep with a concurrency cap, a prompts file, ...). Errors: kInvalidArgument
// naming the flag and the fix.
Status finalize_config(BenchConfig& config);

}  // namespace vosti::bench
