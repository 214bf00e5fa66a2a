// EngineTarget: `vosti bench`'s in-process target. It drives a vosti::Engine on this thread,
// built from the same EngineConfig as `vosti serve` (device "cpu" or "cuda", load_device_model),
// so one workload measures the engine without HTTP, on either device, unchanged.
// Times are taken in the engine's output callbacks: a delivery is one step's new tokens.
// Thread safety: as Target (one driver thread; the engine steps inside wait()).
#pragma once

#include <map>
#include <memory>
#include <string>

#include "core/engine_config.h"
#include "core/status.h"
#include "tools/bench/target.h"

namespace vosti {
class Engine;
class Tokenizer;
}  // namespace vosti

namespace vosti::bench {

class EngineTarget : public Target {
 public:
  // Loads `model_path` for config.device and creates the engine.
  // Errors: the loader's and Engine::create's, naming the file or the setting.
  static Result<std::unique_ptr<EngineTarget>> create(const std::string& model_path, const EngineConfig& config,
                                                      const RunClock* clock);
  ~EngineTarget() override;

  void submit(const BenchRequest& request, const SamplingOptions& options, double send_s) override;
  std::vector<RequestRecord> wait(double deadline_s) override;
  void abort_all(const std::string& why) override;
  int64_t num_output_tokens_in_flight() const override;
  std::optional<std::string> unreachable() const override { return std::nullopt; }
  TargetCounters counters() override;

  const Engine& engine() const { return *engine_; }
  std::shared_ptr<const Tokenizer> tokenizer() const { return tokenizer_; }

 private:
  EngineTarget(std::unique_ptr<Engine> engine, std::shared_ptr<const Tokenizer> tokenizer, const RunClock* clock);
  Result<std::vector<int32_t>> prompt_ids(const BenchRequest& request) const;

  std::unique_ptr<Engine> engine_;
  std::shared_ptr<const Tokenizer> tokenizer_;
  const RunClock* clock_;
  std::map<int64_t, std::unique_ptr<RequestRecord>> in_flight_;  // by workload index
  std::vector<RequestRecord> finished_;
  std::map<int64_t, uint64_t> engine_ids_;  // workload index -> engine RequestId
  std::string abort_reason_;
};

}  // namespace vosti::bench
