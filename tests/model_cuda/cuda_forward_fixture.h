// A test's single-sequence forward over CudaModel::forward: one sequence whose KV blocks are
// 0, 1, 2, ... of a private pool, appended in chunks, every row's logits returned, with the
// runner's activation buffers and a device copy of each step's attention plan of its own. The
// engine's path is the CUDA runner (runner/cuda/cuda_runner.h), which tests/engine_cuda drives.
// Thread safety: none (tests are single-threaded).
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <numeric>
#include <span>
#include <vector>

#include "kernels/cuda/attention/attention_plan.h"
#include "kernels/cuda/cuda_status.h"
#include "model/cuda/cuda_model.h"
#include "runner/cuda/device_buffers.h"
#include "tests/model_cuda/device_attention_plan.h"

namespace vosti::cuda_test {

class CudaForwardFixture {
 public:
  // REQUIRES: model != nullptr; max_tokens >= 1; block_size >= 1.
  CudaForwardFixture(std::shared_ptr<const CudaModel> model, int64_t max_tokens, int block_size = 16,
                     DType kv_dtype = DType::kBF16)
      : model_(std::move(model)), max_tokens_(max_tokens), block_size_(block_size) {
    const ModelConfig& c = model_->config();
    const CudaModelDims& d = model_->dims();
    const int64_t rows = (max_tokens + 255) / 256 * 256;
    const int64_t num_blocks = (max_tokens + block_size - 1) / block_size;
    auto alloc = [](DeviceMemory& m, int64_t count, size_t elem) {
      auto r = DeviceMemory::allocate(static_cast<size_t>(count) * elem, "test buffer");
      EXPECT_TRUE(r.ok()) << r.status().to_string();
      if (r.ok()) m = std::move(r).value();
    };
    auto acts = CudaActivationBuffers::allocate(*model_, rows, rows, nullptr);
    EXPECT_TRUE(acts.ok()) << acts.status().to_string();
    if (acts.ok()) acts_ = std::move(acts).value();
    alloc(logits_, rows * d.vocab_rows, 4);
    alloc(ids_, rows, 4);
    alloc(pos_, rows, 4);
    alloc(slots_, rows, 4);
    alloc(row_seq_, rows, 4);
    alloc(logit_rows_, rows, 4);
    alloc(table_, num_blocks + 1, 4);
    const size_t elem = kv_element_bytes(kv_dtype);
    const int64_t side = num_blocks * block_size * c.num_kv_heads * c.head_dim;
    alloc(pool_, 2 * c.num_layers * side, elem);
    for (int64_t li = 0; li < c.num_layers; ++li) {
      kv_.push_back(CudaKvLayer{pool_.as<char>() + 2 * li * side * static_cast<int64_t>(elem),
                                pool_.as<char>() + (2 * li + 1) * side * static_cast<int64_t>(elem), kv_dtype,
                                num_blocks, block_size, static_cast<int>(c.num_kv_heads),
                                static_cast<int>(c.head_dim)});
    }
    std::vector<int32_t> table(static_cast<size_t>(num_blocks) + 1);  // [stride, blocks 0, 1, ...]
    table[0] = static_cast<int32_t>(num_blocks);
    std::iota(table.begin() + 1, table.end(), 0);
    EXPECT_EQ(cudaMemcpy(table_.as<void>(), table.data(), table.size() * 4, cudaMemcpyHostToDevice), cudaSuccess);
    shape_ = {static_cast<int>(c.num_heads),
              static_cast<int>(c.num_kv_heads),
              static_cast<int>(c.head_dim),
              kAttnDefaultSplit,
              kAttnRowsPerCta,
              0};
    if (!kv_.empty() && tensor_core_attention(kv_[0], shape_.num_heads)) {
      for (size_t w = 0; w < model_->windows().size(); ++w)
        work_.emplace_back(rows, 64, shape_.num_heads, shape_.head_dim);
      tensor_cores_ = true;
    }
  }

  // Appends `tokens` as one batch; returns the logits of every appended row [n, vocab], or of
  // the last row only. Errors: the forward's, as a Status.
  Result<std::vector<float>> append(std::span<const int32_t> tokens, bool all_logits = true) {
    const int64_t T = static_cast<int64_t>(tokens.size());
    if (T == 0 || num_tokens_ + T > max_tokens_) return invalid_argument("test fixture: bad append");
    std::vector<int32_t> pos(static_cast<size_t>(T)), seq(static_cast<size_t>(T), 0), rows;
    for (int64_t i = 0; i < T; ++i) pos[static_cast<size_t>(i)] = static_cast<int32_t>(num_tokens_ + i);
    for (int64_t i = all_logits ? 0 : T - 1; i < T; ++i) rows.push_back(static_cast<int32_t>(i));
    const auto up = [](DeviceMemory& d, const std::vector<int32_t>& h) {
      return cudaMemcpy(d.as<void>(), h.data(), h.size() * 4, cudaMemcpyHostToDevice);
    };
    std::vector<int32_t> ids(tokens.begin(), tokens.end());
    VOSTI_CUDA_RETURN_IF_ERROR(up(ids_, ids));
    VOSTI_CUDA_RETURN_IF_ERROR(up(pos_, pos));
    VOSTI_CUDA_RETURN_IF_ERROR(up(slots_, pos));  // block b is physical block b
    VOSTI_CUDA_RETURN_IF_ERROR(up(row_seq_, seq));
    VOSTI_CUDA_RETURN_IF_ERROR(up(logit_rows_, rows));
    CudaBatch b;
    b.num_tokens = T;
    b.token_ids = ids_.as<int32_t>();
    b.positions = pos_.as<int32_t>();
    b.slots = slots_.as<int32_t>();
    b.row_seq = row_seq_.as<int32_t>();
    b.block_table_stride = table_.as<int32_t>();
    b.block_tables = table_.as<int32_t>() + 1;
    b.num_logit_rows = static_cast<int64_t>(rows.size());
    b.logit_rows = logit_rows_.as<int32_t>();
    for (size_t w = 0; tensor_cores_ && w < work_.size(); ++w) {  // one plan per window of the layers
      AttentionShape shape = shape_;
      shape.window = model_->windows()[w];
      VOSTI_RETURN_IF_ERROR(plan_attention(pos, seq, shape, work_[w].partial_capacity(), &plan_));
      VOSTI_ASSIGN_OR_RETURN(b.attention[w], work_[w].upload(plan_));
    }
    VOSTI_RETURN_IF_ERROR(model_->forward(b, acts_.view(), kv_.data(), logits_.as<float>(), nullptr));
    const int64_t vocab = model_->config().vocab_size, vocab_rows = model_->dims().vocab_rows;
    std::vector<float> out(rows.size() * static_cast<size_t>(vocab));
    VOSTI_CUDA_RETURN_IF_ERROR(cudaMemcpy2D(out.data(), vocab * 4, logits_.as<void>(), vocab_rows * 4, vocab * 4,
                                            rows.size(), cudaMemcpyDeviceToHost));
    num_tokens_ += T;
    return out;
  }

 private:
  std::shared_ptr<const CudaModel> model_;
  int64_t max_tokens_;
  int block_size_;
  int64_t num_tokens_ = 0;
  DeviceMemory logits_, ids_, pos_, slots_, row_seq_, logit_rows_, table_, pool_;
  std::vector<CudaKvLayer> kv_;
  CudaActivationBuffers acts_;
  bool tensor_cores_ = false;  // the deployment runs the tensor-core attention: plan every append
  AttentionShape shape_;
  AttentionPlan plan_;
  std::vector<DeviceAttentionPlan> work_;  // [windows]
};

}  // namespace vosti::cuda_test
