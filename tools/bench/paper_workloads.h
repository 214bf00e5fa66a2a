// The Vosti paper's two performance workloads (its artifact's serving benchmark), as `vosti bench`
// runs them on any Target (the engine in-process, or a server over HTTP):
//
//   sessions (multi-session replay): num_sessions independent sessions of num_turns turns; a
//     session's first prompt is a prefix every session shares (shared_len tokens) and
//     distinct_len tokens of its own; each later turn's prompt is the previous prompt, the
//     previous turn's output and append_len new tokens; every turn generates output_len tokens
//     (EOS ignored, greedy). Requests are offered at seeded Poisson arrivals (request_rate, turn
//     major: every session's turn 0, then turn 1, ...), and a turn waits for its predecessor's
//     response and think_s more. Before measuring (excluded): a few short concurrent requests (the
//     decode shapes: CUDA graphs), then a donor of the shared prefix + 4 tokens (it is cached).
//     The paper's: 4 x 6, 8,193 shared + 8,192 distinct, 256 appended, 768 out, 2 req/s, 0.5 s.
//   phases (aligned phases): for each cached context C, `batch` requests whose first C tokens
//     were prefilled before (an untimed donor of C + 1 tokens each, diverging at token C) add
//     new_tokens and generate output_len: TTFT is the batch's prefill of the new tokens over a
//     cached context, TPOT its decode. One untimed warm-up wave per phase on other prompts.
//     The paper's: batch 4, C = 0/4K/8K/12K/16K, 256 new tokens, 128 out.
// Reported per turn or per phase: TTFT, TPOT, throughput and the prefix-cache hit rate (the
// prompt tokens responses say came from the cache / all prompt tokens).
// Thread safety: runs on the caller's thread (as run_workload).
#pragma once

#include <atomic>
#include <cstdio>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tools/bench/metrics.h"
#include "tools/bench/target.h"

namespace vosti {
class Tokenizer;
}

namespace vosti::bench {

struct SessionsConfig {
  int32_t num_sessions = 4;
  int32_t num_turns = 6;
  int32_t shared_len = 8193;
  int32_t distinct_len = 8192;
  int32_t append_len = 256;
  double think_s = 0.5;
};

struct PhasesConfig {
  int32_t batch = 4;
  std::vector<int32_t> cached_contexts = {0, 4096, 8192, 12288, 16384};
  int32_t new_tokens = 256;
};

// What both workloads take besides their own config.
struct PaperRunOptions {
  int32_t output_len = 768;
  double request_rate = 2;  // sessions: offered requests/s (0: all at once)
  uint64_t seed = 42;
  const std::atomic<bool>* interrupted = nullptr;
};

// One turn's or one phase's requests, measured together.
struct GroupResult {
  std::string label;  // "turn 3", "cached 8192"
  std::vector<RequestRecord> records;
  BenchMetrics metrics;  // over the group's span (first send to last end)
  // phases: the batch's prefill (send to the last first token) and decode (last first token to
  // the last end) throughputs, in new prompt tokens and output tokens per second.
  double prefill_tok_s = 0;
  double decode_tok_s = 0;
};

struct PaperRunResult {
  std::string workload;  // "sessions" or "phases"
  std::vector<GroupResult> groups;
  BenchMetrics overall;
  double duration_s = 0;  // sessions: first send to the last session's end
  std::string stopped_early;
};

// Runs the multi-session replay on `target`, whose times read `clock` (restarted here); the
// tokenizer gives the vocabulary the prompts are drawn from.
PaperRunResult run_sessions(Target& target, RunClock& clock, const Tokenizer& tokenizer, const SessionsConfig& config,
                            const PaperRunOptions& options);
// Runs the aligned phases on `target`, as run_sessions.
PaperRunResult run_phases(Target& target, RunClock& clock, const Tokenizer& tokenizer, const PhasesConfig& config,
                          const PaperRunOptions& options);

// The per-group table (TTFT, TPOT, throughputs, hit rate) and its JSON.
void print_paper_run(FILE* out, const PaperRunResult& run, const std::string& title);
nlohmann::ordered_json paper_run_json(const PaperRunResult& run);

}  // namespace vosti::bench
