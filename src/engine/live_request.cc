#include "engine/live_request.h"

#include "core/check.h"
#include "sample/sampler.h"
#include "tokenizer/tokenizer.h"

namespace vosti {

LiveRequest::LiveRequest(RequestId id, RequestSpec spec, StopConditions stop, OutputCallback callback,
                         const Tokenizer* tokenizer, std::unique_ptr<GrammarState> grammar,
                         std::vector<uint32_t> first_mask)
    : id_(id),
      spec_(std::move(spec)),
      stop_(std::move(stop)),
      callback_(std::move(callback)),
      tokenizer_(tokenizer),
      seed_(spec_.sampling.seed.has_value() ? *spec_.sampling.seed : fresh_seed()),
      grammar_(std::move(grammar)),
      next_mask_(std::move(first_mask)) {
  if (tokenizer_) decoder_ = std::make_unique<StreamingDecoder>(*tokenizer_, /*skip_special_tokens=*/true);
  if (spec_.prompt_logprobs) prompt_scores_.resize(spec_.prompt.size());
  if (spec_.prompt_logprobs && spec_.logits_digests) prompt_digests_.resize(spec_.prompt.size());
}

LiveRequest::~LiveRequest() = default;

bool LiveRequest::wants_prompt_logits(int32_t num_computed) const {
  return spec_.prompt_logprobs && !prompt_scored_ && num_computed < static_cast<int32_t>(spec_.prompt.size());
}

void LiveRequest::record_prompt_score(int32_t position, const ScoredToken& scored, const LogitsDigest& digest) {
  if (!spec_.prompt_logprobs || prompt_scored_) return;
  const size_t next = static_cast<size_t>(position) + 1;
  if (next >= spec_.prompt.size()) return;
  prompt_scores_[next] = scored;
  if (!prompt_digests_.empty()) prompt_digests_[next] = digest;
}

void LiveRequest::prompt_done(int32_t num_cached_prompt_tokens) {
  if (prompt_scored_ || finished_) return;
  num_cached_prompt_tokens_ = std::max(num_cached_prompt_tokens, 0);
  prompt_scored_ = true;
  if (spec_.prompt_logprobs) {
    prompt_scores_[0] = ScoredToken{spec_.prompt[0], 0.0f, {}};  // the first token has no logprob
    prompt_scores_pending_ = true;
  }
}

Status LiveRequest::record_routed(int32_t first_position, std::span<const int32_t> ids, int32_t num_layers,
                                  int32_t top_k) {
  const int64_t per = static_cast<int64_t>(num_layers) * top_k;
  routed_.num_layers = num_layers;
  routed_.top_k = top_k;
  const int64_t known = routed_.num_positions();
  if (per <= 0 || static_cast<int64_t>(ids.size()) % per != 0 || first_position > known)
    return internal_error("routed experts of request " + std::to_string(id_) + " arrived out of order (position " +
                          std::to_string(first_position) + ", " + std::to_string(known) + " recorded)");
  const auto n = static_cast<int64_t>(ids.size()) / per;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t p = first_position + i;
    const std::span<const int32_t> row = ids.subspan(static_cast<size_t>(i * per), static_cast<size_t>(per));
    if (p >= known) {
      routed_.ids.insert(routed_.ids.end(), row.begin(), row.end());
      continue;
    }
    for (int64_t j = 0; j < per; ++j) {
      if (routed_.ids[static_cast<size_t>(p * per + j)] != row[static_cast<size_t>(j)])
        return internal_error("request " + std::to_string(id_) + " routed position " + std::to_string(p) +
                              " differently when it was recomputed (MoE layer " + std::to_string(j / top_k) +
                              "): a determinism violation");
    }
  }
  return Status();
}

void LiveRequest::draft_masks(std::span<const int32_t> draft, std::vector<uint32_t>& out) {
  const size_t words = next_mask_.size();
  out.assign(next_mask_.begin(), next_mask_.end());
  int32_t accepted = 0;
  bool all_accepted = true;  // every draft token so far
  for (const int32_t token : draft) {
    const size_t at = out.size();
    out.resize(at + words);
    const std::span<uint32_t> row(out.data() + at, words);
    all_accepted = all_accepted && !grammar_->terminated() && grammar_->accept(token);
    accepted += all_accepted ? 1 : 0;
    if (all_accepted && !grammar_->terminated()) {  // after a stop token the request ends: no row is read
      grammar_->fill_next_mask(row);
    } else {
      std::copy(out.begin() + static_cast<std::ptrdiff_t>(at - words), out.begin() + static_cast<std::ptrdiff_t>(at),
                row.begin());
    }
  }
  grammar_->rollback(accepted);
}

void LiveRequest::prepare_grammar(int32_t token) { prepared_.emplace(token, advance_grammar(token, outputs_.size())); }

void LiveRequest::edit_prepared_mask(const std::function<void(std::span<uint32_t>)>& edit) {
  VOSTI_CHECK(prepared_.has_value(), "edit_prepared_mask before prepare_grammar");
  if (prepared_->second == FinishReason::kNone) edit(next_mask_);
}

FinishReason LiveRequest::advance_grammar(int32_t token, size_t position) {
  if (!grammar_->accept(token)) {
    error_ = "structured outputs: the grammar refused sampled token " + std::to_string(token) + " at output position " +
             std::to_string(position) + " (its logits left no allowed token finite)";
    return FinishReason::kError;
  }
  if (grammar_->terminated()) return FinishReason::kStop;
  grammar_->fill_next_mask(next_mask_);
  for (const uint32_t w : next_mask_)
    if (w != 0) return FinishReason::kNone;
  if (grammar_->completed()) return FinishReason::kStop;  // complete, and no stop token to end it with
  error_ = "structured outputs: the grammar allows no token after output position " + std::to_string(position);
  return FinishReason::kError;
}

FinishReason LiveRequest::accept(const RowResult& step, bool at_max_len) {
  outputs_.push_back(step.scored.token);
  if (decoder_) text_ += decoder_->push(step.scored.token);
  const StopDecision d = stop_.check(outputs_, text_, text_checked_);
  text_checked_ = text_.size();
  text_releasable_ = d.text_size;
  if (d.finished()) {
    if (d.reason == StopReason::kStopString) text_.resize(d.text_size);
    return d.reason == StopReason::kMaxTokens ? FinishReason::kLength : FinishReason::kStop;
  }
  if (grammar_) {
    VOSTI_CHECK(!prepared_ || prepared_->first == step.scored.token, "the grammar was prepared for another token");
    const FinishReason g = prepared_ ? prepared_->second : advance_grammar(step.scored.token, outputs_.size() - 1);
    prepared_.reset();
    if (g != FinishReason::kNone) {
      text_releasable_ = text_.size();
      return g;
    }
  }
  return at_max_len ? FinishReason::kLength : FinishReason::kNone;
}

RequestOutput LiveRequest::base_output() {
  RequestOutput out;
  out.id = id_;
  out.seed = seed_;
  out.num_prompt_tokens = static_cast<int32_t>(spec_.prompt.size());
  out.num_output_tokens = static_cast<int32_t>(outputs_.size());
  out.num_cached_prompt_tokens = num_cached_prompt_tokens_;
  if (prompt_scores_pending_) {
    out.prompt_logprobs = std::move(prompt_scores_);
    out.prompt_digests = std::move(prompt_digests_);
    prompt_scores_pending_ = false;
  }
  return out;
}

void LiveRequest::release_text(size_t upto, RequestOutput& out) {
  upto = std::min(upto, text_.size());
  if (upto > text_released_) {
    out.new_text = text_.substr(text_released_, upto - text_released_);
    text_released_ = upto;
  }
}

void LiveRequest::attach_routed(RequestOutput& out) {
  if (!spec_.routed_experts) return;
  // Positions prompt + outputs - 1 and on never ran as this request's tokens (a verify step may
  // have kept accepted drafts past a stop).
  const int64_t per = static_cast<int64_t>(routed_.num_layers) * routed_.top_k;
  const int64_t computed = static_cast<int64_t>(spec_.prompt.size() + outputs_.size()) - 1;
  if (per > 0 && routed_.num_positions() > computed) routed_.ids.resize(static_cast<size_t>(computed * per));
  out.routed_experts = std::move(routed_);
}

void LiveRequest::emit_token(const RowResult& step, FinishReason reason) {
  RequestOutput out = base_output();
  out.new_tokens.push_back(step.scored.token);
  out.new_logprobs.push_back(step.scored);
  if (spec_.logits_digests) out.new_digests.push_back(step.digest);
  if (spec_.return_logits) out.new_logits.push_back(step.logits);
  if (spec_.sampling_masks) out.new_sampling_masks.push_back(step.support);
  if (reason != FinishReason::kNone) {
    if (decoder_ && (reason != FinishReason::kStop || grammar_)) text_ += decoder_->flush();
    release_text(text_.size(), out);
    finished_ = true;
    out.finished = true;
    out.finish_reason = reason;
    out.error = error_;
    attach_routed(out);
  } else {
    release_text(text_releasable_, out);  // holds back what could still begin a stop string
  }
  if (callback_) callback_(out);
}

void LiveRequest::finish(FinishReason reason) {
  if (finished_) return;
  finished_ = true;
  RequestOutput out = base_output();
  if (reason != FinishReason::kAbort) release_text(text_.size(), out);
  out.finished = true;
  out.finish_reason = reason;
  attach_routed(out);
  if (callback_) callback_(out);
}

void LiveRequest::fail(const std::string& message) {
  if (finished_) return;
  finished_ = true;
  RequestOutput out = base_output();
  out.finished = true;
  out.finish_reason = FinishReason::kError;
  out.error = message;
  if (callback_) callback_(out);
}

}  // namespace vosti
