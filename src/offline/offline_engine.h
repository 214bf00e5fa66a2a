// OfflineEngine: one Engine driven in-process by the threads that wait on it (the Python
// package's vosti.LLM), with no engine thread and no server. Callers submit batches of
// requests from any thread; every submitted request joins the engine's continuous batching at
// the next step; a caller waiting for its batch drives step() for everyone (one step at a time,
// under step_mu_), so batches submitted by other threads progress too, and asks its
// `interrupted` callback after every step (Ctrl-C: the caller then cancels its batch, which
// aborts its requests and leaves the engine ready for the next).
//
// Weights are replaced between steps, with no request in flight (update_weights refuses
// otherwise): the new weights are a ModelFile (a file, or the current one with tensors
// replaced), loaded as a new DeviceModel and swapped in by Engine::replace_model; the prefix
// cache starts empty; the weights digest, the deployment digest and the version change with
// them, and every result carries the ones it was produced under.
//
// Invariants: a request is in flight from submit() until its final output; every batch's
// results are in submission order; results and stream events are only touched under state_mu_.
// Thread safety: every public method may be called from any thread. Lock order: admit_mu_,
// then step_mu_, then state_mu_ (a leaf; the engine's output callbacks take it).
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/engine_config.h"
#include "core/status.h"
#include "engine/engine.h"
#include "model/model_file.h"
#include "offline/weights_identity.h"
#include "tokenizer/tokenizer.h"

namespace vosti {

// Which weights produced a result (offline/weights_identity.h).
struct WeightsInfo {
  int64_t version = 0;            // 0: the weights loaded at create(); +1 per update_weights()
  std::string weights_digest;     // 32 hex digits (weights_digest)
  std::string deployment_digest;  // 32 hex digits (deployment_digest_hex)
};

// One request's outputs accumulated (or, in a stream event, one delta of them).
struct RequestResult {
  RequestId id = 0;
  uint64_t seed = 0;
  std::vector<int32_t> token_ids;               // [num_output_tokens]
  std::vector<ScoredToken> logprobs;            // [num_output_tokens]: chosen token, raw logprob, top-n
  std::vector<LogitsDigest> digests;            // [num_output_tokens] when asked
  std::vector<SamplingSupport> sampling_masks;  // [num_output_tokens] with RequestSpec::sampling_masks
  std::vector<ScoredToken> prompt_logprobs;     // [num_prompt_tokens] when asked; [0] has no logprob
  std::string text;                             // detokenised output
  bool finished = false;
  FinishReason finish_reason = FinishReason::kNone;
  std::string error;  // finish_reason == kError
  int32_t num_cached_prompt_tokens = 0;
  RoutedExperts routed_experts;  // with RequestSpec::routed_experts, once finished
};

// A stream event: the delta of the batch's request `index` after one step.
struct StreamEvent {
  size_t index = 0;
  RequestResult delta;
};

// The requests of one submit() call. Read its results after wait() returned true.
class RequestBatch {
 public:
  size_t size() const { return results_.size(); }
  // The engine's id of each request (0 for none queued), fixed by submit().
  const std::vector<RequestId>& ids() const { return ids_; }
  // REQUIRES: wait() returned true (or cancel() ran), so no step can touch them.
  const std::vector<RequestResult>& results() const { return results_; }
  const WeightsInfo& weights() const { return weights_; }

 private:
  friend class OfflineEngine;
  std::vector<RequestId> ids_;
  std::vector<RequestResult> results_;  // guarded by the engine's state_mu_
  std::deque<StreamEvent> events_;      // guarded by state_mu_; filled only when streaming
  bool stream_ = false;
  size_t num_finished_ = 0;  // guarded by state_mu_
  WeightsInfo weights_;      // the weights every request of the batch runs on
};

class OfflineEngine {
 public:
  // Loads the model at `path` for config.device, its tokenizer (unless load_tokenizer is false:
  // token ids in and out only, as vLLM's skip_tokenizer_init), and an engine.
  // Errors: the loaders' (ModelFile::open, load_device_model, Tokenizer::load_for_model) and
  // Engine::create's.
  static Result<std::unique_ptr<OfflineEngine>> create(const std::string& path, const EngineConfig& config,
                                                       bool load_tokenizer = true);

  // Null when created without one.
  const Tokenizer* tokenizer() const { return tokenizer_.get(); }
  // The engine's config (num_blocks and max_model_len as derived; never changes) and the
  // runner's and model's, copied: an update makes them anew.
  const EngineConfig& config() const { return engine_->config(); }
  RunnerInfo runner_info() const;
  ModelConfig model_config() const;
  const std::string& model_path() const { return path_; }
  WeightsInfo weights() const;
  // The weights now served (the file, with the tensors updates replaced).
  std::shared_ptr<const ModelFile> model_file() const;
  EngineStats stats() const { return engine_->stats(); }
  // Requests submitted and not finished yet.
  int64_t num_in_flight() const;

  // Queues the requests, all or none: on an invalid one, those queued before it are aborted and
  // kInvalidArgument names the request's index and the engine's message.
  Result<std::shared_ptr<RequestBatch>> submit(std::vector<RequestSpec> specs, bool stream);
  // Drives the engine until every request of the batch has finished (true) or `interrupted`,
  // asked after every step, returns true (false: the batch is still running; cancel() it).
  // Errors: kInternal if the engine ran out of work with the batch unfinished.
  Result<bool> wait(RequestBatch& batch, const std::function<bool()>& interrupted);
  // The next stream event of the batch, driving the engine until there is one; an empty
  // optional when every request finished and every event was taken, or when interrupted.
  // REQUIRES: the batch was submitted with stream = true.
  Result<std::optional<StreamEvent>> next_event(RequestBatch& batch, const std::function<bool()>& interrupted,
                                                bool* was_interrupted);
  // Aborts the batch's unfinished requests and drives the engine until their final outputs came.
  void cancel(RequestBatch& batch);

  // Replaces the weights with `file`'s (REQUIRES: the same architecture; ModelFile::with_replaced
  // of model_file() guarantees it), between steps. Errors: kFailedPrecondition naming the count
  // while requests are in flight; the loader's, the digest's and Engine::replace_model's (the old
  // weights keep serving after any error).
  Status update_weights(std::shared_ptr<const ModelFile> file);

  // Sleep (vLLM's LLM.sleep) between steps with nothing in flight: level 1 frees the KV memory
  // (and batch buffers, CUDA graphs), level 2 the weights as well (Engine::sleep); submit() is
  // refused until wake_up(). Errors: as Engine::sleep (kFailedPrecondition naming the count in flight).
  Status sleep(int level);
  // Makes the runner again, after level 2 with the weights reloaded from model_file(): every
  // output is then what it was before the sleep, bit for bit. A no-op when awake. Errors: as
  // Engine::wake_up.
  Status wake_up();
  // 0 awake, else the sleep's level.
  int sleep_level() const { return engine_->sleep_level(); }

 private:
  OfflineEngine() = default;
  OutputCallback collector(const std::shared_ptr<RequestBatch>& batch, size_t index);
  bool finished(const RequestBatch& batch) const;
  // One step under step_mu_; false when the engine had no work.
  bool step_once();

  std::string path_;
  std::shared_ptr<const Tokenizer> tokenizer_;
  std::unique_ptr<Engine> engine_;

  std::mutex admit_mu_;  // held by submit() and update_weights(): no request joins during an update
  std::mutex step_mu_;   // one step() at a time; update_weights() holds it while swapping
  mutable std::mutex state_mu_;
  std::shared_ptr<const ModelFile> file_;  // guarded by state_mu_ (written under all three)
  RunnerInfo runner_info_;                 // guarded by state_mu_ (engine_->runner_info() after an update)
  WeightsInfo weights_;                    // guarded by state_mu_
  int64_t num_in_flight_ = 0;              // guarded by state_mu_
  WeightsDigester digester_;               // used under admit_mu_ (and by create())
};

}  // namespace vosti
