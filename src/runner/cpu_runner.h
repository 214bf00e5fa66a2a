// The CPU device: CpuDeviceModel holds a loaded Model; CpuRunner runs steps through
// Model::forward on the host kernels (kernels/cpu or the scalar oracle kernels/ref) and
// turns the wanted rows into results with the host sampler (runner/host_rows.h; a sampled
// row of a request with SamplingParams::logprobs false takes choose_token, no log-softmax).
// KV memory: KvStorage (f32) of num_blocks blocks, from EngineConfig::num_blocks or
// kv_cache_bytes.
// Thread safety: CpuDeviceModel is immutable; a CpuRunner has one caller at a time.
#pragma once

#include <memory>

#include "core/thread_pool.h"
#include "model/model.h"
#include "runner/device_model.h"
#include "runner/step_rows.h"
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

// The host kernel backend named by EngineConfig::backend: "cpu", "ref", or the test-only
// "cpu-planted-bug" (kernel_backend.h). Errors: kInvalidArgument for another name.
Result<std::unique_ptr<KernelBackend>> make_host_backend(const std::string& name, ThreadPool* pool);

class CpuRunner final : public ModelRunner {
 public:
  // REQUIRES: model outlives the runner; num_blocks > 0; block_size > 0.
  CpuRunner(std::shared_ptr<const Model> model, std::unique_ptr<ThreadPool> pool,
            std::unique_ptr<KernelBackend> kernels, RunnerInfo info);

  Result<StepResult> execute(const StepPlan& plan, std::span<const RequestLogitsTask> tasks) override;
  const RunnerInfo& info() const override { return info_; }

  // The forward batch the plan maps to, with logit rows for `rows` (exposed for tests).
  ForwardBatch build_batch(const StepPlan& plan, std::span<const WantedRow> rows) const;

 private:
  std::shared_ptr<const Model> model_;
  std::unique_ptr<ThreadPool> pool_;
  std::unique_ptr<KernelBackend> kernels_;
  RunnerInfo info_;
  // build_batch into a reused batch (no allocation once the vectors have grown).
  void fill_batch(const StepPlan& plan, std::span<const WantedRow> rows, ForwardBatch& batch) const;

  KvStorage kv_;
  ForwardBatch batch_;  // the step's batch, reused
  ForwardScratch scratch_;
  SamplerScratch sampler_scratch_;
  std::vector<float> logits_;  // [num_logit_rows, vocab]
};

}  // namespace vosti
