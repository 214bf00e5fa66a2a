// What `vosti bench` prints and records: the table at the end of a run, the determinism
// verdict, and the JSON document (configuration, machine, commit, command, every run's metrics
// and per-request records) whose summary (all but the per-request records, scripts/bench-tables
// --add) bench/results/ keeps and scripts/bench-tables turns into docs/BENCHMARKS.md tables.
// Thread safety: pure functions (machine_info() reads /proc and runs nvidia-smi).
#pragma once

#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>

#include "tools/bench/bench_config.h"
#include "tools/bench/determinism.h"
#include "tools/bench/driver.h"

namespace vosti::bench {

// CPU model, logical CPUs, memory, load averages, kernel, GPUs (nvidia-smi, if present).
nlohmann::ordered_json machine_info();

// Prefix-cache hit rate, preemptions and (in-process) where the engine's step time went over a
// run, from the target's counters.
struct CounterDelta {
  std::optional<double> prefix_cache_hit_rate;
  std::optional<int64_t> preemptions;
  // Speculative decoding over the run: draft tokens verified, accepted, and accepted / drafted
  // (the rate only where something was drafted).
  std::optional<int64_t> draft_tokens, accepted_tokens;
  std::optional<double> acceptance_rate;
  std::optional<double> step_s;  // engine seconds in steps during the run
  // Shares of step_s (0..1): the model forward, sampling (with logprobs), and the rest
  // (bookkeeping: scheduling, cache, batch building, postprocess, callbacks).
  std::optional<double> forward_fraction, sampling_fraction, bookkeeping_fraction;
  std::string source;
};
CounterDelta counter_delta(const TargetCounters& before, const TargetCounters& after);

// The human-readable summary of one run.
void print_run(FILE* out, const RunResult& run, const std::string& title);
// The determinism verdict; at most max_lines mismatch lines (the JSON has all).
void print_determinism(FILE* out, const DeterminismReport& report, size_t max_lines = 100);

nlohmann::ordered_json config_json(const BenchConfig& config);
// One run: options, metrics, counters and per-request records (delivery times if detailed).
nlohmann::ordered_json run_json(const RunResult& run, bool detailed);
nlohmann::ordered_json determinism_json(const DeterminismReport& report);

}  // namespace vosti::bench
