#include "model/single_sequence.h"

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
  ForwardBatch batch;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t pos = num_tokens_ + i;
    batch.token_ids.push_back(tokens[static_cast<size_t>(i)]);
    batch.positions.push_back(static_cast<int32_t>(pos));
    batch.slot_mapping.push_back(pos);  // block b holds positions [b * bs, (b + 1) * bs)
    batch.block_tables.push_back(block_table_.data());
    if (all_logits || i == n - 1) batch.logit_rows.push_back(static_cast<int32_t>(i));
  }
  std::vector<float> logits(batch.logit_rows.size() * static_cast<size_t>(model_.config().vocab_size));
  model_.forward(batch, kv_, kernels_, logits.data(), scratch_);
  num_tokens_ += n;
  return logits;
}

}  // namespace vosti
