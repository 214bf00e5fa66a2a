// LiveRequest: the engine's per-request state beyond the scheduler's: the callback,
// the seed, sampling, prompt scoring, streaming text, stop conditions and (structured
// outputs) the grammar state.
//
// Invariants: outputs reach the callback in order; exactly one output has
// finished == true, and it is the last. The seed is fixed at construction. With a grammar,
// next_mask() is the mask of output position outputs().size(): the grammar's state after
// exactly the committed outputs (accept() is the only thing that advances it).
// Thread safety: constructed on any thread, then used only by the engine's step thread.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "core/status.h"
#include "engine/request.h"
#include "runner/model_runner.h"
#include "sample/stop_checker.h"
#include "structured/grammar.h"

namespace vosti {

class Tokenizer;
class StreamingDecoder;

class LiveRequest {
 public:
  // REQUIRES: spec validated; stop.validate() ok; tokenizer (may be null) outlives this; grammar
  // (null without structured outputs) at its start, with first_mask its mask (a token allowed).
  LiveRequest(RequestId id, RequestSpec spec, StopConditions stop, OutputCallback callback, const Tokenizer* tokenizer,
              std::unique_ptr<GrammarState> grammar = nullptr, std::vector<uint32_t> first_mask = {});
  ~LiveRequest();

  RequestId id() const { return id_; }
  const RequestSpec& spec() const { return spec_; }
  uint64_t seed() const { return seed_; }
  const std::vector<int32_t>& outputs() const { return outputs_; }
  bool has_grammar() const { return grammar_ != nullptr; }
  // The tokens the grammar allows at the next output position (empty without a grammar).
  std::span<const uint32_t> next_mask() const { return next_mask_; }
  // The masks of a verify chunk's sampled rows: row 0 is next_mask(), row k + 1 the mask after
  // draft[0..k] (or row k's again once a draft token is refused: that row can never be reached).
  // The grammar is rolled back: its state after the call is the committed outputs' alone.
  void draft_masks(std::span<const int32_t> draft, std::vector<uint32_t>& out);

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

  // Structured outputs: advances the grammar by the token sampled at the next output position and
  // fills the mask after it, ahead of accept(), which then takes this outcome instead of advancing
  // again. The engine runs it for many requests at once (each touches its own grammar alone), so
  // the grammar work of a step is not serial. A request that stops on its stop conditions first
  // never reads the outcome (it ends). REQUIRES: has_grammar().
  void prepare_grammar(int32_t token);
  // Lets `edit` change the mask prepare_grammar just filled, where the grammar goes on (a test seam:
  // EngineHooks::pooled_mask). REQUIRES: prepare_grammar ran since the last accept().
  void edit_prepared_mask(const std::function<void(std::span<uint32_t>)>& edit);

  // Appends the sampled token (advancing the grammar) and decides whether the request stops
  // (at_max_len: the context is full): kStop when the grammar has ended, kError (with the
  // reason sent in the output) when it refused the token or allows nothing next.
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
  // The grammar after `token` at output position `position`: kNone while it goes on (next_mask_
  // updated; error_ set on kError).
  FinishReason advance_grammar(int32_t token, size_t position);

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
  RoutedExperts routed_;                   // positions computed so far, with RequestSpec::routed_experts
  std::unique_ptr<GrammarState> grammar_;  // structured outputs: after exactly outputs_
  std::vector<uint32_t> next_mask_;        // [mask_words] the grammar's mask at position outputs_.size()
  std::string error_;                      // why accept() returned kError
  // prepare_grammar's outcome: the token it advanced by and advance_grammar's result.
  std::optional<std::pair<int32_t, FinishReason>> prepared_;
  bool finished_ = false;
};

}  // namespace vosti
