#include "tools/bench/engine_target.h"

#include <cstdio>
#include <thread>

#include "engine/engine.h"
#include "runner/load_device_model.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace vosti::bench {
namespace {

// The server's form (openai_response.cc): XXH128's canonical order, high 64 bits first.
std::string digest_hex(const LogitsDigest& d) {
  char buf[33];
  std::snprintf(buf, sizeof buf, "%016llx%016llx", static_cast<unsigned long long>(d[1]),
                static_cast<unsigned long long>(d[0]));
  return std::string(buf, 32);
}

}  // namespace

Result<std::unique_ptr<EngineTarget>> EngineTarget::create(const std::string& model_path, const EngineConfig& config,
                                                           const RunClock* clock) {
  VOSTI_ASSIGN_OR_RETURN(std::shared_ptr<const DeviceModel> model, load_device_model(model_path, config.device));
  VOSTI_ASSIGN_OR_RETURN(std::shared_ptr<const Tokenizer> tokenizer, Tokenizer::load_for_model(model_path));
  VOSTI_ASSIGN_OR_RETURN(std::unique_ptr<Engine> engine, Engine::create(model, config, tokenizer));
  return std::unique_ptr<EngineTarget>(new EngineTarget(std::move(engine), std::move(tokenizer), clock));
}

EngineTarget::EngineTarget(std::unique_ptr<Engine> engine, std::shared_ptr<const Tokenizer> tokenizer,
                           const RunClock* clock)
    : engine_(std::move(engine)), tokenizer_(std::move(tokenizer)), clock_(clock) {}

EngineTarget::~EngineTarget() {
  // Requests still queued hold callbacks into this object: abort them and let them finish.
  abort_all("the benchmark ended");
  while (engine_->has_work()) engine_->step();
}

// The token ids the server would make of this prompt (openai_service.cc's encoding).
Result<std::vector<int32_t>> EngineTarget::prompt_ids(const BenchRequest& request) const {
  switch (request.kind) {
    case PromptKind::kTokenIds:
      return request.prompt_ids;
    case PromptKind::kText:
      return tokenizer_->encode(request.prompt_text, /*add_special_tokens=*/true);
    case PromptKind::kChat: {
      if (!tokenizer_->chat_template()) return invalid_argument("the model has no chat template for a chat prompt");
      ChatOptions options;
      options.add_generation_prompt = true;
      if (tokenizer_->bos_id()) options.bos_token = tokenizer_->bos_token();
      if (tokenizer_->eos_id()) options.eos_token = tokenizer_->eos_token();
      VOSTI_ASSIGN_OR_RETURN(std::string text, render_chat(*tokenizer_->chat_template(), request.messages, options));
      return tokenizer_->encode(text, /*add_special_tokens=*/false);
    }
  }
  return invalid_argument("unknown prompt kind");
}

void EngineTarget::submit(const BenchRequest& request, const SamplingOptions& options, double send_s) {
  auto record = std::make_unique<RequestRecord>();
  RequestRecord* r = record.get();
  r->index = request.index;
  r->sent = true;
  r->send_s = send_s;
  RequestSpec spec;
  auto ids = prompt_ids(request);
  if (!ids.ok()) {
    r->error = ids.status().message();
    r->end_s = clock_->now_s();
    finished_.push_back(std::move(*record));
    return;
  }
  spec.prompt = std::move(ids).value();
  spec.max_tokens = request.max_tokens;
  spec.ignore_eos = options.ignore_eos;
  spec.sampling.temperature = static_cast<float>(options.temperature);
  spec.sampling.seed = request.seed;
  spec.logits_digests = options.want_content;
  const bool want_content = options.want_content;
  const bool want_ids = options.want_content || options.want_token_ids;
  const int64_t index = request.index;
  auto callback = [this, r, want_content, want_ids, index](const RequestOutput& out) {
    if (!out.new_tokens.empty()) {
      r->delivery_s.push_back(clock_->now_s());
      if (want_ids)
        r->content.token_ids.insert(r->content.token_ids.end(), out.new_tokens.begin(), out.new_tokens.end());
      if (want_content) {
        for (const auto& lp : out.new_logprobs) r->content.logprobs.push_back(lp.logprob);
        for (const auto& d : out.new_digests) r->content.digests.push_back(digest_hex(d));
      }
    }
    r->num_prompt_tokens = out.num_prompt_tokens;
    r->num_output_tokens = out.num_output_tokens;
    r->num_cached_tokens = out.num_cached_prompt_tokens;
    r->seed = out.seed;
    if (!out.finished) return;
    r->end_s = clock_->now_s();
    r->finish_reason = finish_reason_name(out.finish_reason);
    if (out.finish_reason == FinishReason::kError) {
      r->error = out.error.empty() ? "the engine failed the request" : out.error;
    } else if (out.finish_reason == FinishReason::kAbort) {
      r->error = abort_reason_.empty() ? "aborted" : "aborted: " + abort_reason_;
    } else {
      r->success = true;
    }
    finished_.push_back(std::move(*r));
    engine_ids_.erase(index);
    in_flight_.erase(index);  // destroys *r: nothing below may touch it
  };
  auto id = engine_->add_request(std::move(spec), std::move(callback));
  if (!id.ok()) {
    r->error = id.status().message();
    r->end_s = clock_->now_s();
    finished_.push_back(std::move(*record));
    return;
  }
  engine_ids_[index] = *id;
  in_flight_[index] = std::move(record);
}

std::vector<RequestRecord> EngineTarget::wait(double deadline_s) {
  if (engine_->has_work()) {
    engine_->step();
  } else if (finished_.empty()) {
    const double left = std::min(deadline_s - clock_->now_s(), 0.1);
    if (left > 0) std::this_thread::sleep_for(std::chrono::duration<double>(left));
  }
  return std::exchange(finished_, {});
}

void EngineTarget::abort_all(const std::string& why) {
  abort_reason_ = why;
  const auto ids = engine_ids_;  // a callback may run inside abort() and erase its entry
  for (const auto& [index, id] : ids) engine_->abort(id);
}

int64_t EngineTarget::num_output_tokens_in_flight() const {
  int64_t n = 0;
  for (const auto& [index, r] : in_flight_) n += r->num_output_tokens;
  return n;
}

TargetCounters EngineTarget::counters() {
  const EngineStats s = engine_->stats();
  TargetCounters c;
  c.prefix_cache_queries = s.num_prefix_queries;
  c.prefix_cache_hits = s.num_prefix_hits;
  c.preemptions = s.num_preemptions;
  c.draft_tokens = s.num_draft_tokens;
  c.accepted_tokens = s.num_accepted_tokens;
  c.step_s = s.seconds_in_steps;
  c.forward_s = s.seconds_in_forward;
  c.sampling_s = s.seconds_in_sampling;
  c.source = "engine";
  return c;
}

}  // namespace vosti::bench
