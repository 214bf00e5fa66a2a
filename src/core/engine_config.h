// EngineConfig: the one configuration of an engine and its deployment (DESIGN.md section 1),
// plain data that every layer may read: the engine (scheduling limits), the runner it
// creates (device, kernel backend, KV memory) and the tools that fill it from flags.
// Fields marked (D) are part of the deployment: two engines compare bit for bit only when
// they agree on them. The others never change a logit (the determinism harness varies them).
// Thread safety: a value type.
#pragma once

#include <cstdint>
#include <string>

namespace vosti {

struct EngineConfig {
  // (D) Where the model runs: "cpu" (host kernels, f32) or "cuda" (the GPU runner, bf16 weights).
  std::string device = "cpu";
  // (D) Host kernel backend of the cpu device: "cpu" (SIMD + threads) or "ref" (scalar oracle).
  std::string backend = "cpu";
  int32_t block_size = 16;  // (D) tokens per KV block
  // KV dtype (D): "auto" (f32 on cpu, bf16 on cuda), "bf16" or "f32" (cuda only offers both).
  std::string kv_cache_dtype = "auto";
  int64_t num_blocks = 0;                // 0: derived (cpu: kv_cache_bytes; cuda: gpu_memory_utilization)
  int64_t kv_cache_bytes = 256ll << 20;  // cpu: KV cache size when num_blocks == 0
  // cuda: fraction of the GPU's memory this engine may use (weights, buffers, KV pool), as vLLM's
  // --gpu-memory-utilization; the KV pool takes what is left when num_blocks == 0.
  double gpu_memory_utilization = 0.9;
  bool cuda_graphs = true;  // cuda: replay decode steps from CUDA graphs (never changes a bit)
  // (D) cuda: KV positions per attention split (a multiple of 64; 0: 1024). A query's KV is cut
  // at multiples of it and the pieces' states folded in order (kernels/cuda/attention/attention.h).
  int32_t attention_split = 0;
  int32_t max_num_seqs = 64;
  int32_t max_num_batched_tokens = 512;
  int32_t max_model_len = 0;  // 0: the model's max_position_embeddings (capped by the cache)
  bool enable_prefix_caching = true;
  // Window-local KV memory (docs/SPEC.md section 4): the sliding-window layers keep only the
  // blocks their window still reads, in a pool and tables of their own. Never changes a logit;
  // no effect on a model without sliding-window layers.
  bool window_local_kv = false;
  // Speculative decoding, as vLLM's --speculative-config JSON (engine/speculative.h): "" is off;
  // {"method": "ngram", "num_speculative_tokens": k, "prompt_lookup_min": a, "prompt_lookup_max": b}
  // drafts by prompt lookup, {"model": PATH, "num_speculative_tokens": k} with a small model. Never
  // changes a bit: drafts are kept only where they equal the tokens the request samples anyway.
  // With window_local_kv too: a rejected draft rolls the window tables back as well (scheduler.h).
  std::string speculative_config;
  // (D) What logprobs report, as vLLM's --logprobs-mode (sample/logprobs.h): "raw_logprobs",
  // "raw_logits", "processed_logprobs" or "processed_logits". Never changes a token or a logit.
  std::string logprobs_mode = "raw_logprobs";
  int32_t num_threads = 0;  // cpu: 0 = hardware concurrency
  // Structured outputs: threads that advance a step's grammars and fill their next masks when a step
  // has many constrained requests (each grammar is its own: never changes a bit). 0: up to 8, half
  // the host's cores; 1: on the step thread alone.
  int32_t structured_output_threads = 0;
  // ... once a step holds at least this many grammars to advance (fewer: on the step thread). A
  // threshold of work, never of bits: `vosti verify` lowers it so that its few constrained
  // requests go through the pool.
  int32_t structured_output_pool_threshold = 16;
  uint64_t block_shuffle_seed = 0;  // != 0: physical block order shuffled (a test variation)
  // cuda: check every device-sampled row against the host sampler on the same logits (copies
  // each sampled row to the host; a mismatch fails the request). Tests and `vosti verify`.
  bool check_device_sampler = false;
  // Run Scheduler::check_invariants() after every step (a failure aborts). Debug builds always do.
#ifdef NDEBUG
  bool check_invariants = false;
#else
  bool check_invariants = true;
#endif
};

}  // namespace vosti
