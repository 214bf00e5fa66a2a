// ModelRunner: executes one StepPlan on one device and returns what the engine needs to
// emit tokens: per wanted row the chosen (or scored) token, its logprob and top-n, and on
// request the logits digest or the whole row. Implementations: runner/cpu/cpu_runner.h (host
// kernels) and runner/cuda/cuda_runner.h (the GPU). A runner owns its batch buffers, its KV
// memory and (CUDA) its graphs; which physical block holds which positions is decided by
// the scheduler (src/cache), never here.
//
// Invariants every runner keeps (DESIGN.md rules 2-6): a token at position p of a request
// goes to slot block_table[p / block_size] * block_size + p % block_size; every token of the
// step is written to the cache before any query of the step reads it; a row's logits are a
// function of its own token and its own prefix's KV; sampling and scoring follow
// sample/sampler.h and sample/logprobs.h exactly (the CUDA runner on the device, checked
// against the host code), so a RowResult is a function of that row's logits and its task.
// Thread safety: one caller at a time (the engine's step thread).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/status.h"
#include "sample/logits_digest.h"
#include "sample/logprobs.h"
#include "sample/sampler.h"
#include "sample/sampling_params.h"
#include "sched/step_plan.h"

namespace vosti {

// What the engine wants from the logits of one scheduled request (index-aligned with
// StepPlan::requests). Spans point into the engine's request state and stay valid for the call.
struct RequestLogitsTask {
  const SamplingParams* sampling = nullptr;  // REQUIRES: non-null when sample or score_prompt
  uint64_t seed = 0;
  std::span<const int32_t> prompt;   // the request's prompt
  std::span<const int32_t> outputs;  // its outputs so far; the sampled position is outputs.size()
  bool sample = false;               // sample a token from the step's last row (it completes the known tokens)
  // Speculative decoding: the step's last num_draft rows before its last one hold draft tokens
  // (ScheduledRequest::num_draft_tokens), and with `sample` each of the last num_draft + 1 rows is
  // sampled. Sampled row i of them picks output position outputs.size() + i, with the history
  // outputs ++ draft[0..i): exactly what plain decode picks there if the drafts before it are
  // accepted. `history` = outputs ++ the draft tokens ([outputs.size() + num_draft]; empty when
  // num_draft == 0).
  int32_t num_draft = 0;
  std::span<const int32_t> history;
  bool score_prompt = false;    // score prompt[p + 1] at each row p of the step with p + 1 < prompt.size()
  bool digest = false;          // the LogitsDigest of every row produced (sampled and scored)
  bool full_logits = false;     // the sampled row's whole logits (the determinism harness)
  bool routed_experts = false;  // the experts each of the step's token rows routed to (MoE models)
  // Structured outputs: the tokens each sampled row may choose, mask_words words per sampled row
  // (sample/token_bitmask.h; [(num_draft + 1) * mask_words]); empty: no mask. A masked row's
  // disallowed logits are -inf before the sampler, the digest, the logprobs and full_logits see it.
  std::span<const uint32_t> allowed;
  int32_t mask_words = 0;
  // What a row reports (the deployment's, sample/logprobs.h): with a processed mode a sampled row
  // that reports logprobs is finished on the host, where the sampler's processed row is.
  LogprobsMode logprobs_mode = LogprobsMode::kRawLogprobs;
  bool sampling_mask = false;  // each sampled row's support (RowResult::support), from the host sampler

  // The mask of sampled row i, empty without one.
  std::span<const uint32_t> allowed_at(int32_t i) const {
    return allowed.empty() ? allowed
                           : allowed.subspan(static_cast<size_t>(i) * static_cast<size_t>(mask_words),
                                             static_cast<size_t>(mask_words));
  }
  // The outputs before sampled row i (0: the first sampled row).
  std::span<const int32_t> outputs_before(int32_t i) const {
    return i == 0 ? outputs : history.first(outputs.size() + static_cast<size_t>(i));
  }
};

enum class RowKind : uint8_t { kScore, kSample };

// One produced row: a sampled token, or a prompt token scored under the logits at `position`.
struct RowResult {
  int32_t plan_index = 0;  // into StepPlan::requests
  int32_t position = 0;    // the position whose next-token logits these are
  RowKind kind = RowKind::kSample;
  int32_t sample_index = 0;   // kSample: i of RequestLogitsTask::outputs_before (0 without speculation)
  ScoredToken scored;         // kSample: the chosen token; kScore: prompt[position + 1]
  LogitsDigest digest{};      // with task.digest (either kind)
  std::vector<float> logits;  // kSample with task.full_logits: [vocab]
  SamplingSupport support;    // kSample with task.sampling_mask: the support it was drawn from
};

// The experts one request's token rows of the step routed to (RequestLogitsTask::routed_experts):
// per row (position order), per MoE layer (layer order), its top_k experts in ascending index.
struct RoutedRows {
  int32_t plan_index = 0;      // into StepPlan::requests
  int32_t first_position = 0;  // the position of the first row (the request's num_computed_tokens)
  std::vector<int32_t> ids;    // [num_new_tokens, MoE layers, top_k]
};

// What execute() returns: rows in plan order, positions increasing within a request (a
// speculating request's sampled rows in sample_index order).
struct StepResult {
  std::vector<RowResult> rows;
  std::vector<RoutedRows> routed;  // the requests with routed_experts, in plan order
  double seconds_forward = 0;      // the forward pass (host wall time)
  double seconds_sampling = 0;     // sampling, scoring and digests
};

// What a runner was given (printed at startup, reported in /metrics).
struct RunnerInfo {
  std::string device;          // "cpu (8 threads)", "cuda:0 NVIDIA H200 (132 SMs, 139.8 GiB)"
  std::string kv_cache_dtype;  // "f32", "bf16"
  int64_t num_blocks = 0;
  int32_t block_size = 0;
  int32_t max_model_len = 0;  // cdiv(max_model_len, block_size) <= num_blocks
  int64_t kv_cache_bytes = 0;
  int64_t weight_bytes = 0;  // weights on the device
  // Window-local KV (EngineConfig::window_local_kv on a model with window layers), else 0: the
  // positions a window layer reads back (the scheduler frees what falls before), the window
  // layers' pool, and whether any layer keeps the full prefix (num_blocks is its pool).
  int32_t kv_window = 0;
  int64_t num_window_blocks = 0;
  bool full_kv_layers = true;
};

class ModelRunner {
 public:
  virtual ~ModelRunner() = default;

  // Runs the plan's forward and turns the wanted rows into results (see RequestLogitsTask).
  // REQUIRES: tasks.size() == plan.requests.size(); every block table covers its step.
  // Errors: kInternal for a device failure, after which the runner is unusable (every later
  // call returns the same error).
  virtual Result<StepResult> execute(const StepPlan& plan, std::span<const RequestLogitsTask> tasks) = 0;

  virtual const RunnerInfo& info() const = 0;
};

}  // namespace vosti
