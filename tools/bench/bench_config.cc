#include "tools/bench/bench_config.h"

#include <cmath>

namespace vosti::bench {
namespace {

// About a minute on the 2-core dev VM with the default model (SmolLM2-135M), in-process:
// Poisson arrivals, a cap on concurrency, ranged lengths.
void cpu_small(BenchConfig& c) {
  c.workload.kind = "random";
  c.workload.num_prompts = 64;
  c.input_len = "32:256";
  c.output_len = "16:128";
  c.request_rate = 1.5;
  c.max_concurrency = 16;
  c.engine.max_num_seqs = 16;
}

// Batching on the CPU (the measure bench/engine_throughput_bench made before `vosti bench`): the
// same 32 requests one at a time, then all at once; the KV cache holds all 32 (no preemption).
// Its figures: output tok/s per concurrency and the engine's step time split (bookkeeping share).
void cpu_throughput(BenchConfig& c) {
  c.workload.kind = "random";
  c.workload.num_prompts = 32;
  c.input_len = "128";
  c.output_len = "128";
  c.temperature = 0.8;
  c.ignore_eos = true;
  c.sweep_concurrency = {1, 32};
  c.engine.max_num_seqs = 32;
  c.engine.enable_prefix_caching = false;
  c.engine.kv_cache_bytes = int64_t{512} << 20;
}

// Batch-1 decode (GPU, an 8B shape): one request at a time, 1,024-token prompts, 256 tokens.
void decode_b1(BenchConfig& c) {
  c.workload.kind = "random";
  c.workload.num_prompts = 4;
  c.input_len = "1024";
  c.output_len = "256";
  c.max_concurrency = 1;
  c.ignore_eos = true;
  c.num_warmups = 1;
  c.engine.max_num_seqs = 1;
  c.engine.max_num_batched_tokens = 8192;
}

// SGLang's deterministic-mode rollout: 256 x 1,024 / 1,024, all at once, sampled, EOS ignored.
void rollout(BenchConfig& c) {
  c.workload.kind = "random";
  c.workload.num_prompts = 256;
  c.input_len = "1024";
  c.output_len = "1024";
  c.request_rate = 0;
  c.ignore_eos = true;
  c.temperature = 1.0;
  c.engine.max_num_seqs = 256;
  c.engine.max_num_batched_tokens = 8192;
}

// A chat mix on shared system prompts: 16 groups x 16 requests on 1,024-token system prompts.
void shared_prefix_chat(BenchConfig& c) {
  c.workload.kind = "shared-prefix";
  c.workload.num_groups = 16;
  c.workload.prompts_per_group = 16;
  c.workload.system_prompt_len = 1024;
  c.question_len = "32:256";
  c.output_len = "64:256";
  c.request_rate = 8;
  c.temperature = 0.7;
  c.engine.max_num_seqs = 128;
  c.engine.max_num_batched_tokens = 8192;
}

constexpr BenchPreset kPresets[] = {
    {"cpu-small", "64 random requests (32-256 in, 16-128 out), Poisson 1.5 req/s, 16 at once: ~1 min on 2 cores",
     cpu_small},
    {"cpu-throughput",
     "32 random requests (128 in, 128 out, temperature 0.8) one at a time, then 32 at once; prefix cache off",
     cpu_throughput},
    {"decode-b1", "batch-1 decode: 4 requests of 1,024 in / 256 out one at a time, EOS ignored, 1 warm-up", decode_b1},
    {"rollout", "256 x 1,024 in / 1,024 out all at once, temperature 1, EOS ignored (SGLang's rollout)", rollout},
    {"shared-prefix-chat", "16 groups x 16 on 1,024-token shared prefixes, 32-256 + 64-256 tokens, Poisson 8 req/s",
     shared_prefix_chat},
};

}  // namespace

std::span<const BenchPreset> bench_presets() { return kPresets; }

Result<const BenchPreset*> find_preset(const std::string& name) {
  std::string names;
  for (const BenchPreset& p : kPresets) {
    if (name == p.name) return &p;
    names += names.empty() ? p.name : std::string(", ") + p.name;
  }
  return invalid_argument("--preset: unknown preset '" + name + "' (presets: " + names + ")");
}

Status finalize_config(BenchConfig& c) {
  WorkloadConfig& w = c.workload;
  VOSTI_ASSIGN_OR_RETURN(w.input_len, parse_length_range(c.input_len, "--input-len"));
  VOSTI_ASSIGN_OR_RETURN(w.output_len, parse_length_range(c.output_len, "--output-len"));
  VOSTI_ASSIGN_OR_RETURN(w.question_len, parse_length_range(c.question_len, "--question-len"));
  if (!w.file.empty() && w.kind != "file") {
    if (w.kind != "random") return invalid_argument("--prompts-file is for --workload file, not " + w.kind);
    w.kind = "file";
  }
  if (w.kind == "file" && w.file.empty()) return invalid_argument("--workload file needs --prompts-file PATH");
  if (w.kind != "file" && w.num_prompts < 1) return invalid_argument("--num-prompts must be at least 1");
  if (w.kind == "shared-prefix" && (w.num_groups < 1 || w.prompts_per_group < 1 || w.system_prompt_len < 1))
    return invalid_argument("--num-groups, --prompts-per-group and --system-prompt-len must be at least 1");
  if (w.kind == "shared-prefix") w.num_prompts = w.num_groups * w.prompts_per_group;
  if (c.request_rate < 0 || std::isnan(c.request_rate))
    return invalid_argument("--request-rate must be > 0 requests/s (0 or inf: all at once)");
  if (!(c.burstiness > 0)) return invalid_argument("--burstiness must be > 0 (1: Poisson)");
  if (c.max_concurrency < 0) return invalid_argument("--max-concurrency must be >= 1 (0: no cap)");
  for (int64_t v : c.sweep_concurrency) {
    if (v < 1) return invalid_argument("--sweep-concurrency: every value must be >= 1");
  }
  if (!c.sweep_concurrency.empty() && c.max_concurrency > 0)
    return invalid_argument("--sweep-concurrency sets the cap of each run; do not also give --max-concurrency");
  if (!c.sweep_concurrency.empty() && c.check_determinism)
    return invalid_argument("--check-determinism runs its own two passes; run it without --sweep-concurrency");
  if (c.determinism_concurrency < -1)
    return invalid_argument("--determinism-concurrency must be >= 1 (0: no cap; unset: chosen from the first pass)");
  if (c.temperature < 0) return invalid_argument("--temperature must be >= 0 (0: greedy)");
  if (c.num_warmups < 0) return invalid_argument("--num-warmups must be >= 0");
  if (!(c.http.request_timeout_s > 0)) return invalid_argument("--request-timeout must be > 0 seconds");
  return Status();
}

}  // namespace vosti::bench
