// The CPU device: CpuDeviceModel holds a loaded Model; CpuRunner runs steps through
// Model::forward on the host kernels (kernels/cpu or the scalar oracle kernels/ref), reading its
// StepBatch (runner/step_batch.h) as the forward batch, and turns the wanted rows into results
// with the host sampler (runner/cpu/host_rows.h; a sampled row of a request with
// SamplingParams::logprobs false takes choose_token, no log-softmax).
// KV memory: KvStorage (f32) of num_blocks blocks, from EngineConfig::num_blocks or
// kv_cache_bytes.
// Thread safety: CpuDeviceModel is immutable; a CpuRunner has one caller at a time.
#pragma once

#include <functional>
#include <memory>
#include <span>

#include "core/thread_pool.h"
#include "model/model.h"
#include "runner/device_model.h"
#include "runner/step_batch.h"
#include "sample/sampler.h"

namespace vosti {

class CpuDeviceModel final : public DeviceModel {
 public:
  explicit CpuDeviceModel(std::shared_ptr<const Model> model) : model_(std::move(model)) {}
  const ModelConfig& config() const override { return model_->config(); }
  const std::string& path() const override { return model_->path(); }
  std::string device() const override { return "cpu"; }
  Result<std::unique_ptr<ModelRunner>> make_runner(const EngineConfig& config) const override;
  const std::shared_ptr<const Model>& model() const { return model_; }

 private:
  std::shared_ptr<const Model> model_;
};

// The host kernel backend named by EngineConfig::backend: "cpu" or "ref".
// Errors: kInvalidArgument for another name.
Result<std::unique_ptr<KernelBackend>> make_host_backend(const std::string& name, ThreadPool* pool);

// Seams through which the tests plant violations of the determinism rules in a CPU runner
// (tests/support/planted.h), to show the harness catches them. The product never sets one.
struct CpuRunnerHooks {
  // Masks a structured-output row (the product: apply_token_bitmask), told how many sequences the
  // step holds -- which no mask may depend on.
  std::function<void(std::span<float> row, std::span<const uint32_t> mask, int64_t num_seqs)> apply_mask;
};

class CpuRunner final : public ModelRunner {
 public:
  // Makes the host kernels on the runner's thread pool.
  using KernelFactory = std::function<Result<std::unique_ptr<KernelBackend>>(ThreadPool*)>;
  // The runner of `config` (KV size, block size, threads) with the host kernels `make_kernels`
  // makes: EngineConfig::backend's in CpuDeviceModel::make_runner; a planted violation in the
  // tests (tests/support/planted.h). Errors: as DeviceModel::make_runner.
  static Result<std::unique_ptr<ModelRunner>> create(std::shared_ptr<const Model> model, const EngineConfig& config,
                                                     const KernelFactory& make_kernels,
                                                     const CpuRunnerHooks& hooks = {});

  Result<StepResult> execute(const StepPlan& plan, std::span<const RequestLogitsTask> tasks) override;
  const RunnerInfo& info() const override { return info_; }

 private:
  // REQUIRES: model outlives the runner; num_blocks > 0; block_size > 0.
  CpuRunner(std::shared_ptr<const Model> model, std::unique_ptr<ThreadPool> pool,
            std::unique_ptr<KernelBackend> kernels, RunnerInfo info, CpuRunnerHooks hooks);

  std::shared_ptr<const Model> model_;
  std::unique_ptr<ThreadPool> pool_;
  std::unique_ptr<KernelBackend> kernels_;
  RunnerInfo info_;
  CpuRunnerHooks hooks_;
  KvStorage kv_;
  StepBatch batch_;                  // the step's batch, reused
  std::vector<int32_t> logit_rows_;  // [R] token rows in logits order
  ForwardScratch scratch_;
  SamplerScratch sampler_scratch_;
  std::vector<float> logits_;      // [num_logit_rows, vocab]
  std::vector<float> masked_row_;  // [vocab] a structured-output row after its token mask
};

}  // namespace vosti
