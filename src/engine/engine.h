// Engine: serves many requests at once and gives each one bitwise the logits it
// would get alone (DESIGN.md section 1). Engine::step() = schedule -> execute ->
// sample -> postprocess.
//
// Thread safety: add_request() and abort() may be called from any thread; step()
// and the callbacks run on the one thread that drives the engine.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>

#include "core/engine_config.h"
#include "core/status.h"
#include "engine/request.h"

namespace vosti {

class DeviceModel;
class Drafter;
class Model;
class Tokenizer;
struct RunnerInfo;

struct EngineStats {
  int64_t num_running = 0;
  int64_t num_waiting = 0;
  int64_t num_blocks_total = 0;
  int64_t num_blocks_used = 0;
  // Window-local KV (EngineConfig::window_local_kv on a model with sliding-window layers): the
  // window layers' pool; 0 without it.
  int64_t num_window_blocks_total = 0;
  int64_t num_window_blocks_used = 0;
  int64_t num_preemptions = 0;
  int64_t num_prefix_queries = 0;  // prompt tokens looked up in the prefix cache
  int64_t num_prefix_hits = 0;     // of which served from it
  int64_t num_steps = 0;
  int64_t num_generated_tokens = 0;
  // Speculative decoding (EngineConfig::speculative_config): verify chunks run, draft tokens
  // verified in them, and of those the ones the target's own sampler picked too (accepted).
  int64_t num_drafts = 0;
  int64_t num_draft_tokens = 0;
  int64_t num_accepted_tokens = 0;
  double seconds_in_steps = 0;     // wall time inside step()
  double seconds_in_forward = 0;   // of which in the model forward (the rest is bookkeeping + sampling)
  double seconds_in_sampling = 0;  // of which in sampling and logprobs
};

// Test seams of the engine, through which tests/support/planted.h plants violations of the
// determinism rules; the product leaves them empty (and vosti's configuration has no such switch).
struct EngineHooks {
  // Called on a grammar's next mask right after a pool thread filled it (the step's grammars
  // advance on the structured-output pool: EngineConfig::structured_output_pool_threshold), told the
  // pool worker that ran it (0: the step thread) -- which no mask may depend on. It may edit the
  // mask, keeping at least one allowed token.
  std::function<void(std::span<uint32_t> mask, int worker)> pooled_mask;
};

class Engine {
 public:
  // An engine on `model`'s device (config.device must name it) with its own runner: KV memory,
  // batch buffers and (CUDA) graphs. The model may be shared by several engines.
  // `drafter` (may be null) replaces the drafting method of config.speculative_config, which must
  // then enable speculation (its num_speculative_tokens still applies): tests and benchmarks give
  // one that replays a known output, or one that is always wrong. `hooks`: tests only.
  // Errors: kInvalidArgument for a config that cannot serve the model (named; a bad
  // speculative_config, or speculation on a device whose runner lacks it), and the runner's
  // errors (DeviceModel::make_runner).
  static Result<std::unique_ptr<Engine>> create(std::shared_ptr<const DeviceModel> model, const EngineConfig& config,
                                                std::shared_ptr<const Tokenizer> tokenizer = nullptr,
                                                std::shared_ptr<const Drafter> drafter = nullptr,
                                                EngineHooks hooks = {});
  // The same on the CPU device (config.device "cpu"), for a Model already loaded.
  static Result<std::unique_ptr<Engine>> create(std::shared_ptr<const Model> model, const EngineConfig& config,
                                                std::shared_ptr<const Tokenizer> tokenizer = nullptr);
  virtual ~Engine() = default;

  // Validates and queues a request; INVALID_ARGUMENT (naming the problem) leaves the engine untouched.
  virtual Result<RequestId> add_request(RequestSpec spec, OutputCallback callback) = 0;
  // Aborts a queued or running request; its callback gets a final kAbort output. Unknown ids are ignored.
  virtual void abort(RequestId id) = 0;
  // Empties the prefix cache (vLLM's reset_prefix_cache) at the start of the next step, before
  // that step admits anything: every request added after this call finds nothing cached before
  // it (Scheduler::reset_prefix_cache); running requests keep their blocks. Any thread.
  virtual void reset_prefix_cache() = 0;
  // Runs one step if there is work; returns false if there was none.
  virtual bool step() = 0;
  virtual bool has_work() const = 0;
  virtual EngineStats stats() const = 0;
  virtual const EngineConfig& config() const = 0;
  // The model served now. REQUIRES: not concurrent with replace_model(), sleep() or wake_up(),
  // which change it; not asleep at level 2 (the weights are gone).
  virtual const DeviceModel& model() const = 0;
  // What the runner was given: device, KV dtype, blocks, limits; asleep, kv_cache_bytes is 0 (and
  // at level 2 weight_bytes too). REQUIRES: not concurrent with replace_model(), sleep(), wake_up().
  virtual const RunnerInfo& runner_info() const = 0;

  // Swaps in the model `load` returns (new weights of the same architecture) between steps:
  // the runner (KV memory, buffers, graphs) is released first, so that the new weights may use
  // its memory, and made again for the new model with the same number of KV blocks; the prefix
  // cache starts empty, its block keys seeded with `identity` (the new weights' identity). If
  // loading or the new runner fails, the old model is put back and the error returned.
  // REQUIRES: called on the step thread.
  // Errors: kFailedPrecondition while requests are queued or running (named counts) or after a
  // runner failure; kInvalidArgument when the new model's device or architecture differs (the
  // field named); the loader's and the runner's errors.
  using ModelLoader = std::function<Result<std::shared_ptr<const DeviceModel>>()>;
  virtual Status replace_model(const ModelLoader& load, uint64_t identity) = 0;

  // Sleep (vLLM's /sleep) between steps with nothing in flight: level 1 releases the runner (KV
  // memory, batch buffers, CUDA graphs), level 2 the model's weights as well. The prefix cache is
  // emptied with the KV. add_request() is refused (kFailedPrecondition, named) until wake_up().
  // REQUIRES: called on the step thread. Errors: kInvalidArgument for a level other than 1 or 2;
  // kFailedPrecondition while requests are in flight, when already asleep, or after a runner failure.
  virtual Status sleep(int level) = 0;
  // Makes the runner again with the same number of KV blocks; after level 2 for the model `load`
  // returns (the caller's to make it the same weights: then every logit is what it was before the
  // sleep). REQUIRES: the step thread. Errors: kFailedPrecondition when awake; the loader's and the
  // runner's (the engine then stays asleep).
  virtual Status wake_up(const ModelLoader& load) = 0;
  // 0 awake, else the level of the sleep. Any thread.
  virtual int sleep_level() const = 0;
};

}  // namespace vosti
