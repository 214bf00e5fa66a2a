// LiveRequest: the engine's per-request state beyond the scheduler's: the callback,
// the seed, sampling, prompt scoring, streaming text and stop conditions.
//
// Invariants: outputs reach the callback in order; exactly one output has
// finished == true, and it is the last. The seed is fixed at construction.
// Thread safety: constructed on any thread, then used only by the engine's step thread.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/status.h"
#include "engine/request.h"
#include "runner/model_runner.h"
#include "sample/stop_checker.h"

namespace vosti {

class Tokenizer;
class StreamingDecoder;

class LiveRequest {
 public:
  // REQUIRES: spec validated; stop.validate() ok; tokenizer (may be null) outlives this.
  LiveRequest(RequestId id, RequestSpec spec, StopConditions stop, OutputCallback callback, const Tokenizer* tokenizer);
  ~LiveRequest();

  RequestId id() const { return id_; }
  const RequestSpec& spec() const { return spec_; }
  uint64_t seed() const { return seed_; }
  const std::vector<int32_t>& outputs() const { return outputs_; }

  // True while the chunk starting at num_computed still needs per-position logits for prompt scoring.
  bool wants_prompt_logits(int32_t num_computed) const;
  // Records the score of prompt token position + 1 under the logits at `position` (and, if the
  // request wants digests, those logits' digest).
  void record_prompt_score(int32_t position, const ScoredToken& scored, const LogitsDigest& digest);
  // The prompt is done: its logprobs (if asked) go out with the next output.
  void prompt_done(int32_t num_cached_prompt_tokens);

  // Records the experts positions [first_position, ...) routed to (RoutedRows::ids, `per_position`
  // ids each). A position recorded before (a recomputation after preemption) must route as it did:
  // a difference is kInternal, naming the position and layer.
  Status record_routed(int32_t first_position, std::span<const int32_t> ids, int32_t num_layers, int32_t top_k);

  // Appends the sampled token and decides whether the request stops (at_max_len: the context is full).
  FinishReason accept(const RowResult& step, bool at_max_len);
  // Sends the output of the newest token; finished if reason != kNone.
  void emit_token(const RowResult& step, FinishReason reason);
  // Sends the final output (if not sent yet) with `reason`.
  void finish(FinishReason reason);
  // Sends a final error output.
  void fail(const std::string& message);

 private:
  RequestOutput base_output();
  void release_text(size_t upto, RequestOutput& out);
  void attach_routed(RequestOutput& out);  // the routing, into a finished output

  RequestId id_;
  RequestSpec spec_;
  StopChecker stop_;
  OutputCallback callback_;
  const Tokenizer* tokenizer_;
  std::unique_ptr<StreamingDecoder> decoder_;
  uint64_t seed_;
  std::vector<int32_t> outputs_;              // [num_output_tokens]
  std::string text_;                          // detokenised outputs so far
  size_t text_checked_ = 0;                   // text_ bytes already searched for stop strings
  size_t text_released_ = 0;                  // text_ bytes already sent
  size_t text_releasable_ = 0;                // text_ bytes that cannot begin a stop string
  std::vector<ScoredToken> prompt_scores_;    // [num_prompt_tokens] if prompt logprobs are asked
  std::vector<LogitsDigest> prompt_digests_;  // [num_prompt_tokens] if prompt logprobs and digests are asked
  bool prompt_scored_ = false;                // prompt logprobs complete (and queued or sent)
  bool prompt_scores_pending_ = false;        // to be sent with the next output
  int32_t num_cached_prompt_tokens_ = 0;
  RoutedExperts routed_;  // positions computed so far, with RequestSpec::routed_experts
  bool finished_ = false;
};

}  // namespace vosti
