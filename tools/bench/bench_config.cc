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

// The Vosti paper's multi-session replay (GPU, its Llama-3.1-8B and Gemma3-4B runs): 4 sessions x 6
// turns on 8,193 shared + 8,192 distinct tokens, 256 appended and 768 generated a turn, Poisson
// 2 req/s, 0.5 s think time; the artifact's server: 4 sequences, 4,096 tokens a step, 32K context.
void paper_replay(BenchConfig& c) {
  c.workload.kind = "sessions";
  c.sessions = SessionsConfig{};
  c.output_len = "768";
  c.request_rate = 2;
  c.workload.seed = 42;
  c.engine.max_num_seqs = 4;
  c.engine.max_num_batched_tokens = 4096;
  c.engine.max_model_len = 32768;
}

// The paper's aligned phases: batches of 4 over cached contexts 0/4K/8K/12K/16K, 256 new prompt
// tokens, 128 generated.
void paper_phases(BenchConfig& c) {
  c.workload.kind = "phases";
  c.phases = PhasesConfig{};
  c.output_len = "128";
  c.workload.seed = 42;
  c.engine.max_num_seqs = 4;
  c.engine.max_num_batched_tokens = 4096;
  c.engine.max_model_len = 32768;
}

// The replay at 1/16 of the paper's token counts for the CPU and the default model (about two minutes
// on 2 cores): 513 shared + 512 distinct, 16 appended, 48 generated; the same sessions, turns,
// arrivals and think time.
void cpu_paper_replay(BenchConfig& c) {
  paper_replay(c);
  c.sessions.shared_len = 513;
  c.sessions.distinct_len = 512;
  c.sessions.append_len = 16;
  c.output_len = "48";
  c.engine.max_num_batched_tokens = 512;
  c.engine.max_model_len = 4096;
}

// The aligned phases at 1/16: cached contexts 0/256/512/768/1,024, 16 new tokens, 8 generated.
void cpu_paper_phases(BenchConfig& c) {
  paper_phases(c);
  c.phases.cached_contexts = {0, 256, 512, 768, 1024};
  c.phases.new_tokens = 16;
  c.output_len = std::to_string(8);  // not the literal "8": g++ 12 -O3 warns falsely (-Wrestrict, PR 105329)
  c.engine.max_num_batched_tokens = 512;
  c.engine.max_model_len = 4096;
}

// Prompt-lookup speculation's workload (issue 43): the built-in copy prompts (code edits,
// extraction, reformatting; copy_workload.h) through the chat template, greedy, one request at a
// time (batch-1 decode, where speculation pays), the answers ending at EOS or 384 tokens. The 24
// prompts cover the 11 documents twice; 1-2 minutes on 2 cores with the default model. Compare
// it with and without --speculative-config.
void cpu_copy(BenchConfig& c) {
  c.workload.kind = "copy";
  c.workload.num_prompts = 24;
  c.output_len = "384";
  c.temperature = 0;
  c.max_concurrency = 1;
  c.engine.max_num_seqs = 1;
}

// The same on a GPU with a real instruct model: all 33 prompts, answers up to 1,024 tokens,
// batch 1, one warm-up request.
void copy_gpu(BenchConfig& c) {
  cpu_copy(c);
  c.workload.num_prompts = 33;
  c.output_len = "1024";
  c.num_warmups = 1;
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
    {"paper-replay",
     "the paper's multi-session replay: 4 sessions x 6 turns, 8,193 shared + 8,192 distinct tokens, +256 and 768 "
     "out a turn, Poisson 2 req/s, 0.5 s think",
     paper_replay},
    {"paper-phases", "the paper's aligned phases: batch 4, cached 0/4K/8K/12K/16K, 256 new tokens, 128 out",
     paper_phases},
    {"cpu-paper-replay", "paper-replay at 1/16 of its tokens (513 + 512, +16, 48 out) for the CPU", cpu_paper_replay},
    {"cpu-paper-phases", "paper-phases at 1/16: cached 0/256/512/768/1,024, 16 new tokens, 8 out", cpu_paper_phases},
    {"cpu-copy",
     "24 built-in prompts whose answers copy the prompt (code edits, extraction), greedy, one at a time, <= 384 "
     "out",
     cpu_copy},
    {"copy", "the copy prompts (all 33) for a real instruct model on a GPU: greedy, one at a time, <= 1,024 out",
     copy_gpu},
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
  if (w.kind == "sessions" || w.kind == "phases") {
    if (!c.sweep_concurrency.empty() || c.check_determinism || c.max_concurrency > 0)
      return invalid_argument("--workload " + w.kind +
                              " sets its own concurrency: drop --sweep-concurrency, --check-determinism and "
                              "--max-concurrency");
    const SessionsConfig& s = c.sessions;
    if (s.num_sessions < 1 || s.num_turns < 1 || s.shared_len < 0 || s.distinct_len < 0 || s.append_len < 0 ||
        s.shared_len + s.distinct_len < 1 || !(s.think_s >= 0))
      return invalid_argument(
          "--num-sessions and --num-turns must be >= 1, the lengths >= 0 (a prompt >= 1), "
          "--think-time >= 0");
    if (c.phases.batch < 1 || c.phases.new_tokens < 1 || c.phases.cached_contexts.empty())
      return invalid_argument("--phase-batch and --new-tokens must be >= 1 and --cached-contexts non-empty");
    for (int32_t ctx : c.phases.cached_contexts)
      if (ctx < 0) return invalid_argument("--cached-contexts: every context must be >= 0");
  }
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
