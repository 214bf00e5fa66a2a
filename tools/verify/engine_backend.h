// EngineBackend: the paper protocol against an engine in this process. Every arm is a new
// Engine on the shared model (its token budget the arm's, prefix caching as the arm says), so
// arms never share a cache; rows come back whole (RequestSpec::return_logits) and compare byte
// for byte; a composition's "shared a step" witness is the engine's running count after a step.
// Thread safety: one caller at a time.
#pragma once

#include <memory>

#include "engine/engine.h"
#include "tools/verify/protocol_backend.h"

namespace vosti {

class DeviceModel;

class EngineBackend final : public ProtocolBackend {
 public:
  // `deployment`: the engine options every arm keeps (device, backend, block size, KV dtype,
  // split, CUDA graphs, num_blocks, max_model_len, threads); each arm sets the budget and cache.
  EngineBackend(std::shared_ptr<const DeviceModel> model, EngineConfig deployment);

  Evidence evidence() const override { return Evidence::kFullRows; }
  std::string description() const override;
  Status begin_arm(const ArmSettings& arm) override;
  Result<CallResult> run_call(std::span<const std::vector<int32_t>> prompts, int32_t max_tokens,
                              int32_t record_positions) override;
  Status reset_prefix_cache() override;
  bool fresh_engines() const override { return true; }
  std::string chunking_unavailable(int32_t) const override { return ""; }
  std::string prefix_reuse_unavailable() const override { return ""; }
  std::vector<std::string> notes() const override;

 private:
  std::shared_ptr<const DeviceModel> model_;
  EngineConfig deployment_;
  std::unique_ptr<Engine> engine_;
  std::string device_;  // the first engine's runner description
};

}  // namespace vosti
