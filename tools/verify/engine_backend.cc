#include "tools/verify/engine_backend.h"

#include "runner/device_model.h"
#include "runner/model_runner.h"

namespace vosti {

EngineBackend::EngineBackend(std::shared_ptr<const DeviceModel> model, EngineConfig deployment)
    : model_(std::move(model)), deployment_(std::move(deployment)) {}

std::string EngineBackend::description() const {
  return "in-process " + (device_.empty() ? deployment_.device : device_) + ", block size " +
         std::to_string(deployment_.block_size) + ", " + std::to_string(deployment_.num_blocks) + " KV blocks";
}

std::vector<std::string> EngineBackend::notes() const {
  return {
      "each arm runs in a new engine; \"cold\" in prefix reuse is the query after reset_prefix_cache() evicted "
      "every cached block of the same engine"};
}

Status EngineBackend::begin_arm(const ArmSettings& arm) {
  engine_.reset();  // the previous arm's KV memory goes first
  EngineConfig c = deployment_;
  c.max_num_batched_tokens = arm.token_budget;
  c.enable_prefix_caching = arm.prefix_caching;
  auto engine = Engine::create(model_, c);
  if (!engine.ok()) return engine.status().with_context("arm " + arm.name);
  engine_ = std::move(engine).value();
  if (device_.empty()) device_ = engine_->runner_info().device;
  return Status();
}

Result<CallResult> EngineBackend::run_call(std::span<const std::vector<int32_t>> prompts, int32_t max_tokens,
                                           int32_t record_positions) {
  if (!engine_) return failed_precondition("run_call before begin_arm");
  CallResult out;
  out.prompts.resize(prompts.size());
  std::vector<std::string> errors(prompts.size());
  size_t num_done = 0;
  for (size_t i = 0; i < prompts.size(); ++i) {
    RequestSpec spec;
    spec.prompt = prompts[i];
    spec.max_tokens = max_tokens;
    spec.ignore_eos = true;
    spec.sampling.temperature = 0.0f;
    spec.sampling.seed = 0;
    spec.return_logits = record_positions > 0;
    PromptResult* r = &out.prompts[i];
    auto callback = [r, record_positions, &num_done, &errors, i](const RequestOutput& o) {
      for (size_t k = 0; k < o.new_tokens.size(); ++k) {
        if (static_cast<int32_t>(r->rows.size()) < record_positions) r->rows.push_back(o.new_logits[k]);
        r->tokens.push_back(o.new_tokens[k]);
      }
      r->num_cached_tokens = o.num_cached_prompt_tokens;
      if (!o.finished) return;
      if (o.finish_reason == FinishReason::kError || o.finish_reason == FinishReason::kAbort)
        errors[i] = o.error.empty() ? finish_reason_name(o.finish_reason) : o.error;
      ++num_done;
    };
    VOSTI_RETURN_IF_ERROR(engine_->add_request(std::move(spec), std::move(callback)).status());
  }
  bool together = false;
  const int64_t steps_before = engine_->stats().num_steps;
  while (num_done < prompts.size()) {
    if (!engine_->step() && !engine_->has_work()) return internal_error("the engine stopped with requests unfinished");
    together = together || engine_->stats().num_running >= 2;
  }
  while (engine_->has_work()) engine_->step();
  for (size_t i = 0; i < prompts.size(); ++i)
    if (!errors[i].empty()) return internal_error("prompt " + std::to_string(i) + " of the call failed: " + errors[i]);
  if (prompts.size() > 1) out.co_scheduled = together;
  out.num_steps = engine_->stats().num_steps - steps_before;
  out.num_cached_tokens = 0;
  for (const PromptResult& r : out.prompts) out.num_cached_tokens += r.num_cached_tokens;
  return out;
}

Status EngineBackend::reset_prefix_cache() {
  if (!engine_) return failed_precondition("reset_prefix_cache before begin_arm");
  engine_->reset_prefix_cache();
  while (engine_->has_work()) engine_->step();  // the reset applies at the next step
  return Status();
}

}  // namespace vosti
