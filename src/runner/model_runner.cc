#include "runner/model_runner.h"

namespace vosti {

ModelRunner::ModelRunner(std::shared_ptr<const Model> model, KernelBackend* kernels, int64_t num_blocks,
                         int32_t block_size)
    : model_(std::move(model)),
      kernels_(kernels),
      block_size_(block_size),
      kv_(model_->config(), num_blocks, block_size) {}

ForwardBatch ModelRunner::build_batch(const StepPlan& plan, std::span<const uint8_t> all_positions,
                                      std::vector<LogitsRow>* rows) const {
  VOSTI_CHECK(all_positions.size() == plan.requests.size(), "all_positions must have one entry per request");
  ForwardBatch batch;
  batch.token_ids.reserve(static_cast<size_t>(plan.num_batched_tokens));
  for (size_t i = 0; i < plan.requests.size(); ++i) {
    const ScheduledRequest& r = plan.requests[i];
    VOSTI_CHECK(static_cast<int32_t>(r.token_ids.size()) == r.num_new_tokens, "token_ids disagree with num_new_tokens");
    for (int32_t j = 0; j < r.num_new_tokens; ++j) {
      const int32_t pos = r.num_computed_tokens + j;
      const int32_t block_index = pos / block_size_;
      VOSTI_CHECK(block_index < static_cast<int32_t>(r.block_table.size()), "block table does not cover the step");
      const int32_t row = static_cast<int32_t>(batch.token_ids.size());
      batch.token_ids.push_back(r.token_ids[static_cast<size_t>(j)]);
      batch.positions.push_back(pos);
      batch.slot_mapping.push_back(static_cast<int64_t>(r.block_table[static_cast<size_t>(block_index)]) * block_size_ +
                                   pos % block_size_);
      batch.block_tables.push_back(r.block_table.data());
      const bool last = j == r.num_new_tokens - 1;
      if (all_positions[i] || (last && r.completes_known_tokens)) {
        batch.logit_rows.push_back(row);
        if (rows) rows->push_back({static_cast<int32_t>(i), pos});
      }
    }
  }
  return batch;
}

RunnerOutput ModelRunner::execute(const StepPlan& plan, std::span<const uint8_t> all_positions) {
  RunnerOutput out;
  const ForwardBatch batch = build_batch(plan, all_positions, &out.rows);
  out.logits.resize(out.rows.size() * static_cast<size_t>(vocab_size()));
  model_->forward(batch, kv_, *kernels_, out.logits.data(), scratch_);
  return out;
}

}  // namespace vosti
