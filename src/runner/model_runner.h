// ModelRunner: StepPlan -> ForwardBatch (token ids, positions, slots, block tables)
// -> logits. It owns the KV cache tensors; which physical block holds which
// positions is decided by the scheduler (src/cache), never here.
//
// Invariants: a token at position p of a request goes to slot
// block_table[p / block_size] * block_size + p % block_size; every token of the step is
// written to the cache before any query of the step reads it (Model::forward).
// Thread safety: one caller at a time (the engine's step thread).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "model/model.h"
#include "sched/step_plan.h"

namespace vosti {

// One row of logits the runner produced: which request of the plan and which position.
struct LogitsRow {
  int32_t plan_index = 0;  // index into StepPlan::requests
  int32_t position = 0;    // the position whose next-token logits these are
};

struct RunnerOutput {
  std::vector<LogitsRow> rows;  // [num_rows]
  std::vector<float> logits;    // [num_rows, vocab]
  const float* row(size_t i, int64_t vocab) const { return logits.data() + static_cast<int64_t>(i) * vocab; }
};

class ModelRunner {
 public:
  // REQUIRES: model and kernels outlive the runner.
  ModelRunner(std::shared_ptr<const Model> model, KernelBackend* kernels, int64_t num_blocks, int32_t block_size);

  // Runs the plan. Produces logits for the last token of every request that
  // completes its known tokens, and for every token of requests whose
  // all_positions[i] is set (prompt scoring). REQUIRES: all_positions.size() == plan.requests.size().
  RunnerOutput execute(const StepPlan& plan, std::span<const uint8_t> all_positions);

  // The forward batch the plan maps to (exposed for tests).
  ForwardBatch build_batch(const StepPlan& plan, std::span<const uint8_t> all_positions,
                           std::vector<LogitsRow>* rows) const;

  const Model& model() const { return *model_; }
  int64_t vocab_size() const { return model_->config().vocab_size; }

 private:
  std::shared_ptr<const Model> model_;
  KernelBackend* kernels_;
  int32_t block_size_;
  KvStorage kv_;
  ForwardScratch scratch_;
};

}  // namespace vosti
