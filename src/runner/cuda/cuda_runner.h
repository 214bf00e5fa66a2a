// The CUDA device: CudaDeviceModel holds one model's weights on the GPU (model/cuda);
// CudaRunner (cuda_runner.cc) runs engine steps there. A runner owns its device memory
// (device_buffers.h: the step buffer, activations, logits and sampler buffers, the KV pool, the
// attention's split states) and its decode graphs (cuda_graphs.h).
// A step is execute = fill -> launch -> collect:
//   fill     the StepBatch (runner/step_batch.h) with the logits rows' sampler tasks, the attention
//            plan of its rows, laid out in the pinned step buffer (step_buffer.h), one transfer;
//   launch   the forward (a decode graph's replay, or eager launches with the score rows' logits
//            in chunks of the logits buffer, each followed by the device sampler), the device
//            sampler and digests of the sampled rows, the copies of the results back, one stream
//            synchronisation;
//   collect  the RowResults in wanted order: logprobs finished on the host (its log) from what the
//            device reported, and rows the device sampler hands back sampled on the host from the
//            same logits.
// Thread safety: CudaDeviceModel is immutable and shared; a CudaRunner has one caller at a time.
// After a CUDA failure a runner is unusable and every later step returns that error.
#pragma once

#include <cstdint>
#include <functional>
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

// Seams through which the tests plant violations of the determinism rules in a CUDA runner
// (tests/support/planted.h), to show the harness catches them. The product never sets one.
struct CudaRunnerHooks {
  // The attention split a step plans with, from its sequence count and the deployment's split. A
  // function of the step, which a captured graph cannot follow: set, it turns the graphs off.
  std::function<int(int64_t num_seqs, int split)> attention_split;
};

// A runner of `model` for `config` (what CudaDeviceModel::make_runner returns, with no hooks).
// Errors: kInvalidArgument for a config the runner cannot serve (named); kUnimplemented for a
// vocabulary above the device sampler's; kResourceExhausted when its memory does not fit.
Result<std::unique_ptr<ModelRunner>> make_cuda_runner(std::shared_ptr<const CudaModel> model,
                                                      const EngineConfig& config, const CudaRunnerHooks& hooks = {});

}  // namespace vosti
