// The CUDA device: CudaDeviceModel holds one model's weights on the GPU (model/cuda);
// CudaRunner runs engine steps there. A runner owns, for its engine:
//   - the KV pool: per layer K and V [num_blocks, num_kv_heads, block_size, head_dim] in the
//     deployment's KV dtype (bf16 by default), sized from the GPU's free memory times
//     gpu_memory_utilization (or EngineConfig::num_blocks); the scheduler's BlockPool decides
//     which block holds what, so prefix caching, eviction and preemption are the CPU's;
//   - the step buffer: one pinned host buffer that the runner fills with the whole batch
//     description (token ids, positions, slots, the sequence of every row, the block-table
//     matrix, the logit rows, the sampler's row tasks and adjustments) and copies to the device
//     in one transfer per step;
//   - the activations, the logits and sampler buffers, the results it copies back (a
//     SamplerRowResult per wanted row, digests, and whole rows only where asked);
//   - CUDA graphs of decode steps (every request one token), one per padded batch size,
//     captured on first use; padding rows have position -1 and slot -1 and touch nothing.
// A step is: fill + one H2D copy -> forward (graph replay or eager launches) -> logits of the
// wanted rows -> the device sampler (sampler_kernels.h) and digests -> one D2H copy of the
// results -> one stream synchronisation -> logprobs finished on the host (its log) and rows the
// device sampler hands back sampled on the host from the same logits.
// Thread safety: CudaDeviceModel is immutable and shared; a CudaRunner has one caller at a time.
// After a CUDA failure a runner is unusable and every later step returns that error.
#pragma once

#include <memory>
#include <string>

#include "model/cuda/cuda_model.h"
#include "runner/device_model.h"

namespace vosti {

class CudaDeviceModel final : public DeviceModel {
 public:
  // Loads a GGUF file or safetensors directory straight to the current GPU (CudaModel::load).
  static Result<std::shared_ptr<const CudaDeviceModel>> load(const std::string& path);
  explicit CudaDeviceModel(std::shared_ptr<const CudaModel> model) : model_(std::move(model)) {}

  const ModelConfig& config() const override { return model_->config(); }
  const std::string& path() const override { return model_->path(); }
  std::string device() const override { return "cuda"; }
  Result<std::unique_ptr<ModelRunner>> make_runner(const EngineConfig& config) const override;
  const std::shared_ptr<const CudaModel>& model() const { return model_; }

 private:
  std::shared_ptr<const CudaModel> model_;
};

}  // namespace vosti
