#include "runner/single_sequence.h"

#include "core/check.h"

namespace vosti {

SingleSequence::SingleSequence(const Model& model, KernelBackend& kernels, int64_t max_tokens, int block_size)
    : model_(model),
      kernels_(kernels),
      max_tokens_(max_tokens),
      block_size_(block_size),
      kv_(model.config(), (max_tokens + block_size - 1) / block_size, block_size) {
  block_table_.resize(static_cast<size_t>(kv_.num_blocks()));
  for (size_t i = 0; i < block_table_.size(); ++i) block_table_[i] = static_cast<int32_t>(i);
}

std::vector<float> SingleSequence::append(std::span<const int32_t> tokens, bool all_logits) {
  const int64_t n = static_cast<int64_t>(tokens.size());
  VOSTI_CHECK(n > 0 && num_tokens_ + n <= max_tokens_, "SingleSequence::append past max_tokens");
  StepPlan plan;
  ScheduledRequest& r = plan.requests.emplace_back();
  r.num_computed_tokens = static_cast<int32_t>(num_tokens_);
  r.num_new_tokens = static_cast<int32_t>(n);
  r.token_ids.assign(tokens.begin(), tokens.end());
  r.block_table.assign(block_table_.begin(), block_table_.begin() + (num_tokens_ + n + block_size_ - 1) / block_size_);
  plan.num_batched_tokens = r.num_new_tokens;
  const RequestLogitsTask task;  // rows are chosen below, not by a task
  build_step_batch(plan, std::span(&task, 1), block_size_, StepBatchOptions{}, batch_);
  std::vector<int32_t> logit_rows;  // [n] or [1]
  for (int64_t i = all_logits ? 0 : n - 1; i < n; ++i) logit_rows.push_back(static_cast<int32_t>(i));
  std::vector<float> logits(logit_rows.size() * static_cast<size_t>(model_.config().vocab_size));
  model_.forward(forward_batch(batch_, logit_rows), kv_, kernels_, logits.data(), scratch_);
  num_tokens_ += n;
  return logits;
}

}  // namespace vosti
