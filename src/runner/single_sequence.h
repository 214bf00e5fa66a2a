// SingleSequence: one token sequence run alone through a private KV cache whose
// physical blocks are 0, 1, 2, ... in order. Fed one token at a time from an empty
// cache it computes F_D of docs/SPEC.md: the reference every determinism check
// compares against. Fed chunks, it is the foundation's plain prefill. Its batches are
// StepBatches (runner/step_batch.h) of one request, as the CPU runner's are.
//
// Thread safety: one caller at a time.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "model/model.h"
#include "runner/step_batch.h"

namespace vosti {

class SingleSequence {
 public:
  // REQUIRES: model and kernels outlive this object; max_tokens > 0.
  SingleSequence(const Model& model, KernelBackend& kernels, int64_t max_tokens, int block_size = 16);

  // Appends `tokens` (computed as one batch) and returns their logits
  // [tokens.size(), vocab] if all_logits, else the last token's [vocab].
  // REQUIRES: num_tokens() + tokens.size() <= max_tokens.
  std::vector<float> append(std::span<const int32_t> tokens, bool all_logits = false);
  int64_t num_tokens() const { return num_tokens_; }
  // The last append's routing of a mixture-of-experts model: [tokens, num MoE layers, top_k]
  // expert ids, ascending per token and layer (MoeScratch::routed); empty for a dense model.
  const std::vector<int32_t>& routed_experts() const { return scratch_.moe.routed; }

 private:
  const Model& model_;
  KernelBackend& kernels_;
  int64_t max_tokens_;
  int block_size_;
  KvStorage kv_;
  ForwardScratch scratch_;
  std::vector<int32_t> block_table_;  // [num_blocks]: 0, 1, 2, ...
  StepBatch batch_;
  int64_t num_tokens_ = 0;
};

}  // namespace vosti
