#include "tests/support/planted.h"

#include <set>
#include <string_view>
#include <vector>

#include "core/check.h"
#include "core/thread_pool.h"
#include "runner/cpu/cpu_runner.h"
#include "tests/support/planted_matmul.h"
#include "tests/support/wrapped_cpu_backend.h"
#if VOSTI_HAVE_CUDA
#include "runner/cuda/cuda_runner.h"
#endif

namespace vosti {
namespace {

// The CPU backend with planted::matmul_part_columns_split_k_by_row_count as its matmul (one
// thread: the planted kernel is for tests on tiny models): for every weight, or, given a set of
// weights (their row tables), for those only.
class PlantedCpuBackend final : public WrappedCpuBackend {
 public:
  explicit PlantedCpuBackend(ThreadPool* pool, std::set<const WeightRows*> only = {})
      : WrappedCpuBackend(pool), only_(std::move(only)) {}
  std::string_view name() const override {
    return only_.empty() ? "cpu-planted-split-k-by-row-count" : "cpu-planted-expert-split-k-by-token-count";
  }
  using WrappedCpuBackend::matmul;
  void matmul(const float* x, int64_t m, const WeightMatrix& w, const float* bias, float* y) override {
    if (!only_.empty() && only_.count(w.parts) == 0) {
      inner_->matmul(x, m, w, bias, y);
      return;
    }
    tile_.resize(static_cast<size_t>(w.k));
    int64_t first_col = 0;
    for (int p = 0; p < w.num_parts; ++p) {
      const WeightRows& part = w.parts[p];
      planted::matmul_part_columns_split_k_by_row_count(x, m, w.k, part, bias != nullptr ? bias + first_col : nullptr,
                                                        y + first_col, w.n, 0, part.num_rows, tile_.data());
      first_col += part.num_rows;
    }
  }

 private:
  std::set<const WeightRows*> only_;  // empty: every weight
  std::vector<float> tile_;           // [k] one decoded weight row
};

// A cpu device whose experts' matmuls split k when an expert got more than one token.
class PlantedMoeCpuDeviceModel final : public DeviceModel {
 public:
  explicit PlantedMoeCpuDeviceModel(std::shared_ptr<const Model> model) : model_(std::move(model)) {
    for (const LayerWeights& l : model_->weights().layers)
      for (const auto* experts : {&l.expert_gate_up, &l.expert_down})
        for (const FloatTensor& t : *experts) expert_weights_.insert(t.matrix.parts);
    VOSTI_CHECK(!expert_weights_.empty(), "the planted MoE device needs a model with experts");
  }
  const ModelConfig& config() const override { return model_->config(); }
  const std::string& path() const override { return model_->path(); }
  std::string device() const override { return "cpu"; }
  Result<std::unique_ptr<ModelRunner>> make_runner(const EngineConfig& config) const override {
    auto experts = expert_weights_;
    return CpuRunner::create(model_, config, [experts](ThreadPool* pool) -> Result<std::unique_ptr<KernelBackend>> {
      return std::unique_ptr<KernelBackend>(std::make_unique<PlantedCpuBackend>(pool, experts));
    });
  }

 private:
  std::shared_ptr<const Model> model_;
  std::set<const WeightRows*> expert_weights_;
};

class PlantedCpuDeviceModel final : public DeviceModel {
 public:
  explicit PlantedCpuDeviceModel(std::shared_ptr<const Model> model) : model_(std::move(model)) {}
  const ModelConfig& config() const override { return model_->config(); }
  const std::string& path() const override { return model_->path(); }
  std::string device() const override { return "cpu"; }
  Result<std::unique_ptr<ModelRunner>> make_runner(const EngineConfig& config) const override {
    return CpuRunner::create(model_, config, [](ThreadPool* pool) -> Result<std::unique_ptr<KernelBackend>> {
      return make_planted_cpu_backend(pool);
    });
  }

 private:
  std::shared_ptr<const Model> model_;
};

// The product's CPU backend, or the planted split-k matmul while *verifying is set.
class VerifyPlanBackend final : public WrappedCpuBackend {
 public:
  VerifyPlanBackend(ThreadPool* pool, std::shared_ptr<const bool> verifying)
      : WrappedCpuBackend(pool), planted_(pool), verifying_(std::move(verifying)) {}
  std::string_view name() const override { return "cpu-planted-verify-plan"; }
  using WrappedCpuBackend::matmul;
  void matmul(const float* x, int64_t m, const WeightMatrix& w, const float* bias, float* y) override {
    if (*verifying_) {
      planted_.matmul(x, m, w, bias, y);
    } else {
      inner_->matmul(x, m, w, bias, y);
    }
  }

 private:
  PlantedCpuBackend planted_;
  std::shared_ptr<const bool> verifying_;
};

// Tells its backend whether the step verifies draft tokens, then runs it.
class VerifyPlanRunner final : public ModelRunner {
 public:
  VerifyPlanRunner(std::unique_ptr<ModelRunner> inner, std::shared_ptr<bool> verifying)
      : inner_(std::move(inner)), verifying_(std::move(verifying)) {}
  Result<StepResult> execute(const StepPlan& plan, std::span<const RequestLogitsTask> tasks) override {
    *verifying_ = plan.num_draft_tokens > 0;
    return inner_->execute(plan, tasks);
  }
  const RunnerInfo& info() const override { return inner_->info(); }

 private:
  std::unique_ptr<ModelRunner> inner_;
  std::shared_ptr<bool> verifying_;
};

class PlantedVerifyPlanCpuDeviceModel final : public DeviceModel {
 public:
  explicit PlantedVerifyPlanCpuDeviceModel(std::shared_ptr<const Model> model) : model_(std::move(model)) {}
  const ModelConfig& config() const override { return model_->config(); }
  const std::string& path() const override { return model_->path(); }
  std::string device() const override { return "cpu"; }
  Result<std::unique_ptr<ModelRunner>> make_runner(const EngineConfig& config) const override {
    auto verifying = std::make_shared<bool>(false);
    VOSTI_ASSIGN_OR_RETURN(
        std::unique_ptr<ModelRunner> inner,
        CpuRunner::create(model_, config, [verifying](ThreadPool* pool) -> Result<std::unique_ptr<KernelBackend>> {
          return std::unique_ptr<KernelBackend>(std::make_unique<VerifyPlanBackend>(pool, verifying));
        }));
    return std::unique_ptr<ModelRunner>(std::make_unique<VerifyPlanRunner>(std::move(inner), verifying));
  }

 private:
  std::shared_ptr<const Model> model_;
};

#if VOSTI_HAVE_CUDA
class PlantedCudaDeviceModel final : public DeviceModel {
 public:
  explicit PlantedCudaDeviceModel(std::shared_ptr<const CudaDeviceModel> model) : model_(std::move(model)) {}
  const ModelConfig& config() const override { return model_->config(); }
  const std::string& path() const override { return model_->path(); }
  std::string device() const override { return "cuda"; }
  Result<std::unique_ptr<ModelRunner>> make_runner(const EngineConfig& config) const override {
    CudaRunnerHooks hooks;
    hooks.attention_split = [](int64_t num_seqs, int split) { return num_seqs > 1 ? 2 * split : split; };
    return make_cuda_runner(model_->model(), config, hooks);
  }

 private:
  std::shared_ptr<const CudaDeviceModel> model_;
};
#endif

}  // namespace

std::unique_ptr<KernelBackend> make_planted_cpu_backend(ThreadPool* pool) {
  return std::make_unique<PlantedCpuBackend>(pool);
}

std::shared_ptr<const DeviceModel> planted_cpu_device_model(std::shared_ptr<const Model> model) {
  return std::make_shared<const PlantedCpuDeviceModel>(std::move(model));
}

std::shared_ptr<const DeviceModel> planted_moe_cpu_device_model(std::shared_ptr<const Model> model) {
  return std::make_shared<const PlantedMoeCpuDeviceModel>(std::move(model));
}

std::shared_ptr<const DeviceModel> planted_verify_plan_cpu_device_model(std::shared_ptr<const Model> model) {
  return std::make_shared<const PlantedVerifyPlanCpuDeviceModel>(std::move(model));
}

std::shared_ptr<const DeviceModel> planted_cuda_device_model(std::shared_ptr<const DeviceModel> model) {
#if VOSTI_HAVE_CUDA
  auto cuda = std::dynamic_pointer_cast<const CudaDeviceModel>(model);
  if (cuda) return std::make_shared<const PlantedCudaDeviceModel>(std::move(cuda));
#endif
  (void)model;
  return nullptr;
}

}  // namespace vosti
