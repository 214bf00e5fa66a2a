// Planted window-local KV bugs (tests/support/planted.h): a runner between the scheduler and the
// product's CPU runner that breaks rule 5 for the window layers' blocks.
#include <algorithm>
#include <map>
#include <vector>

#include "runner/cpu/cpu_runner.h"
#include "tests/support/planted.h"

namespace vosti {
namespace {

// Tells the scheduler a window one block shorter than the model's, so it releases a block the
// window still reads, and keeps the released blocks readable: a released entry of a window table
// is given back the physical block it held, which the pool may have handed to anyone since (an
// entry a prefix hit skipped, page 0).
class StaleWindowRunner final : public ModelRunner {
 public:
  explicit StaleWindowRunner(std::unique_ptr<ModelRunner> inner) : inner_(std::move(inner)), info_(inner_->info()) {
    if (info_.kv_window > info_.block_size) info_.kv_window -= info_.block_size;
  }
  Result<StepResult> execute(const StepPlan& plan, std::span<const RequestLogitsTask> tasks) override {
    StepPlan stale = plan;
    for (ScheduledRequest& r : stale.requests) {
      std::vector<BlockId>& seen = seen_[r.id];
      if (r.newly_admitted) seen.clear();
      seen.resize(std::max(seen.size(), r.window_block_table.size()), kNoBlock);
      for (size_t i = 0; i < r.window_block_table.size(); ++i) {
        if (r.window_block_table[i] != kNoBlock) seen[i] = r.window_block_table[i];
        // A block a prefix hit skipped was never seen: read whatever page 0 holds.
        r.window_block_table[i] = seen[i] != kNoBlock ? seen[i] : 0;
      }
    }
    return inner_->execute(stale, tasks);
  }
  const RunnerInfo& info() const override { return info_; }

 private:
  std::unique_ptr<ModelRunner> inner_;
  RunnerInfo info_;
  std::map<RequestId, std::vector<BlockId>> seen_;  // per request: the block each window entry last held
};

// Keys a window block by its physical page: the runner remembers, for each full block prefix, the
// page it was first computed in, and never forgets it when the pool hands that page to another
// prefix; a prefix-cache hit then reads the window layers' KV of that page instead of the block
// the scheduler matched by its prefix.
class PageKeyedWindowRunner final : public ModelRunner {
 public:
  explicit PageKeyedWindowRunner(std::unique_ptr<ModelRunner> inner) : inner_(std::move(inner)) {}
  Result<StepResult> execute(const StepPlan& plan, std::span<const RequestLogitsTask> tasks) override {
    StepPlan keyed = plan;
    const int32_t bs = inner_->info().block_size;
    for (size_t s = 0; s < keyed.requests.size(); ++s) {
      ScheduledRequest& r = keyed.requests[s];
      if (r.window_block_table.empty()) continue;  // no window-local KV
      std::vector<int32_t> tokens(tasks[s].prompt.begin(), tasks[s].prompt.end());
      tokens.insert(tokens.end(), tasks[s].outputs.begin(), tasks[s].outputs.end());
      const auto prefix = [&](size_t j) {
        return std::vector<int32_t>(tokens.begin(), tokens.begin() + static_cast<std::ptrdiff_t>((j + 1) * bs));
      };
      if (r.newly_admitted) {
        for (size_t j = 0; j < static_cast<size_t>(r.num_cached_tokens / bs); ++j) {
          const auto it = page_of_.find(prefix(j));
          if (r.window_block_table[j] != kNoBlock && it != page_of_.end()) r.window_block_table[j] = it->second;
        }
      }
      const size_t full = static_cast<size_t>((r.num_computed_tokens + r.num_new_tokens) / bs);
      for (size_t j = 0; j < std::min(full, r.window_block_table.size()); ++j)
        if (r.window_block_table[j] != kNoBlock && j + 1 <= tokens.size() / static_cast<size_t>(bs))
          page_of_.emplace(prefix(j), r.window_block_table[j]);  // first page only: it follows the page
    }
    return inner_->execute(keyed, tasks);
  }
  const RunnerInfo& info() const override { return inner_->info(); }

 private:
  std::unique_ptr<ModelRunner> inner_;
  std::map<std::vector<int32_t>, BlockId> page_of_;  // full block prefix -> the window page first holding it
};

template <typename Runner>
class StaleWindowDeviceModel final : public DeviceModel {
 public:
  explicit StaleWindowDeviceModel(std::shared_ptr<const Model> model) : model_(std::move(model)) {}
  const ModelConfig& config() const override { return model_->config(); }
  const std::string& path() const override { return model_->path(); }
  std::string device() const override { return "cpu"; }
  Result<std::unique_ptr<ModelRunner>> make_runner(const EngineConfig& config) const override {
    VOSTI_ASSIGN_OR_RETURN(std::unique_ptr<ModelRunner> inner,
                           CpuRunner::create(model_, config, [&config](ThreadPool* pool) {
                             return make_host_backend(config.backend, pool);
                           }));
    return std::unique_ptr<ModelRunner>(std::make_unique<Runner>(std::move(inner)));
  }

 private:
  std::shared_ptr<const Model> model_;
};

}  // namespace

std::shared_ptr<const DeviceModel> planted_stale_window_cpu_device_model(std::shared_ptr<const Model> model) {
  return std::make_shared<StaleWindowDeviceModel<StaleWindowRunner>>(std::move(model));
}

std::shared_ptr<const DeviceModel> planted_page_keyed_window_cpu_device_model(std::shared_ptr<const Model> model) {
  return std::make_shared<StaleWindowDeviceModel<PageKeyedWindowRunner>>(std::move(model));
}

}  // namespace vosti
