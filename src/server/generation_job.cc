#include "server/generation_job.h"

namespace vosti {

using Clock = std::chrono::steady_clock;

GenerationJob::GenerationJob(uint64_t job_id, JobEnvironment env, GenerationRequest request,
                             std::vector<PreparedPrompt> prompts, int32_t max_tokens, ResponseContext context,
                             std::shared_ptr<HttpResponder> responder)
    : job_id_(job_id),
      env_(std::move(env)),
      request_(std::move(request)),
      prompts_(std::move(prompts)),
      max_tokens_(max_tokens),
      context_(std::move(context)),
      responder_(std::move(responder)),
      arrival_(Clock::now()) {
  for (size_t p = 0; p < prompts_.size(); ++p) {
    for (int32_t i = 0; i < request_.n; ++i) {
      Sequence seq;
      seq.prompt_index = p;
      seq.output.index = static_cast<int32_t>(sequences_.size());
      if (!request_.stream && request_.echo) seq.output.text = prompts_[p].text;
      if (request_.return_token_ids) seq.output.prompt_token_ids = &prompts_[p].ids;
      if (request_.stream && context_.tool_parser)
        seq.tools = std::make_unique<ToolCallStream>(context_.tool_parser, new_tool_call_id);
      sequences_.push_back(std::move(seq));
    }
  }
}

RequestSpec GenerationJob::make_spec(size_t prompt_index, int32_t choice) const {
  RequestSpec spec;
  spec.prompt = prompts_[prompt_index].ids;
  spec.sampling = request_.sampling;
  spec.sampling.logprobs = request_.logprobs;  // unasked, the CPU runner samples without the log-softmax
  if (request_.sampling.seed) spec.sampling.seed = *request_.sampling.seed + static_cast<uint64_t>(choice);
  spec.max_tokens = max_tokens_;
  spec.stop_token_ids = request_.stop_token_ids;
  spec.stop = request_.stop;
  spec.ignore_eos = request_.ignore_eos;
  // echo scores the prompt for its logprobs and, with return_logits_digests, its rows' digests.
  spec.prompt_logprobs = request_.echo && (request_.logprobs || request_.return_logits_digests);
  spec.logits_digests = request_.return_logits_digests;
  spec.routed_experts = request_.return_routed_experts;
  spec.sampling_masks = request_.return_sampling_mask;
  spec.structured = request_.structured;
  return spec;
}

void GenerationJob::start(std::string pin) {
  engine_start_ = Clock::now();
  std::vector<EngineLoop::Submission> submissions;
  for (size_t k = 0; k < sequences_.size(); ++k) {
    const Sequence& seq = sequences_[k];
    auto callback = [self = shared_from_this(), k](const RequestOutput& out) {
      // Engine thread: hand the output to the connection's strand.
      if (out.finished) self->engine_end_ns_ = Clock::now().time_since_epoch().count();
      self->responder_->post([self, k, out] { self->on_output(k, out); });
    };
    submissions.push_back({make_spec(seq.prompt_index, seq.output.index % request_.n), std::move(callback)});
  }
  std::weak_ptr<GenerationJob> weak = shared_from_this();
  responder_->on_disconnect([weak] {
    if (auto job = weak.lock()) job->abort();
  });
  // Runs now (admission open) or later on the engine thread: either way on to the strand.
  env_.loop->submit(std::move(submissions), std::move(pin), [self = shared_from_this()](Admission admission) {
    self->responder_->post([self, a = std::move(admission)] { self->on_admitted(a); });
  });
}

void GenerationJob::on_admitted(const Admission& admission) {
  switch (admission.refusal) {
    case AdmissionRefusal::kNone:
      break;
    case AdmissionRefusal::kInvalid:
      return fail(bad_request(admission.message));
    case AdmissionRefusal::kAsleep:
      return fail(ApiError{503, admission.message, "server_error", "", "engine_asleep"});
    case AdmissionRefusal::kDeploymentMismatch:
      return fail(
          ApiError{409, admission.message, "invalid_request_error", "vosti.deployment_id", "deployment_mismatch"});
    case AdmissionRefusal::kShuttingDown:
      return fail(ApiError{503, admission.message, "server_error", "", "shutting_down"});
  }
  if (completed_) {  // aborted while held, and already answered: run nothing
    for (RequestId id : admission.ids) env_.loop->abort(id);
    return;
  }
  context_.deployment = admission.deployment;
  for (size_t k = 0; k < sequences_.size(); ++k) {
    sequences_[k].engine_id = admission.ids[k];
    sequences_[k].submitted = true;
  }
  admitted_ = true;
  if (request_.stream) responder_->start_events();
  if (aborted_) {
    for (const Sequence& seq : sequences_) env_.loop->abort(seq.engine_id);
  }
}

void GenerationJob::fail(const ApiError& error) {
  if (completed_) return;
  completed_ = true;
  responder_->send(error.http_status, "application/json", error_json(error));
  env_.metrics->observe_http_status(error.http_status);
  if (env_.on_done) env_.on_done(job_id_);
}

void GenerationJob::abort() {
  responder_->post([self = shared_from_this()] {
    self->aborted_ = true;
    if (!self->admitted_) {
      // Held (not in the engine yet): nothing runs for a client that left, or at shutdown.
      ApiError e;
      e.http_status = 503;
      e.type = "server_error";
      e.code = "aborted";
      e.message = "the request was aborted before it was admitted";
      return self->fail(e);
    }
    for (const Sequence& seq : self->sequences_) {
      if (seq.submitted && !seq.finished) self->env_.loop->abort(seq.engine_id);
    }
  });
}

void GenerationJob::on_output(size_t k, const RequestOutput& out) {
  Sequence& seq = sequences_[k];
  if (seq.finished) return;
  const auto now = Clock::now();
  if (!out.new_tokens.empty()) {
    if (seq.num_output_tokens == 0) {
      seq.first_token_time = now;
      env_.metrics->observe_ttft(std::chrono::duration<double>(now - arrival_).count());
    }
    seq.last_token_time = now;
  }
  seq.output.seed = out.seed;
  seq.num_prompt_tokens = out.num_prompt_tokens;
  seq.num_cached_tokens = out.num_cached_prompt_tokens;
  seq.num_output_tokens = out.num_output_tokens;
  if (request_.stream) {
    stream_delta(seq, out);
  } else {
    accumulate(seq, out);
  }
  if (out.finished) finish_sequence(seq, out);
}

void GenerationJob::stream_delta(Sequence& seq, const RequestOutput& out) {
  if (completed_) return;
  ChoiceOutput d;
  d.index = seq.output.index;
  d.seed = out.seed;
  const bool first = !seq.sent_first;
  if (first && request_.echo) d.text = prompts_[seq.prompt_index].text;
  if (seq.tools) {
    ToolDelta td = seq.tools->push(tool_text(out));
    if (out.finished) {
      ToolDelta rest = seq.tools->finish();
      td.content += rest.content;
      td.calls.insert(td.calls.end(), rest.calls.begin(), rest.calls.end());
    }
    d.text = std::move(td.content);
    d.tool_calls = std::move(td.calls);
    d.called_tools = seq.tools->called();
  } else {
    d.text += out.new_text;
  }
  d.token_ids = out.new_tokens;
  if (request_.logprobs) {
    d.logprobs = out.new_logprobs;
    if (request_.echo) d.prompt_logprobs = out.prompt_logprobs;
  }
  if (request_.return_logits_digests) {
    d.digests = out.new_digests;
    if (request_.echo) d.prompt_digests = out.prompt_digests;
  }
  if (request_.return_sampling_mask) d.sampling_masks = out.new_sampling_masks;
  if (first && request_.return_token_ids) d.prompt_token_ids = &prompts_[seq.prompt_index].ids;
  if (out.finished) {
    d.finish_reason = out.finish_reason;
    d.routed_experts = out.routed_experts;
  }
  d.text_offset = seq.emitted_text_bytes;
  const bool worth_sending = first || out.finished || !d.text.empty() || !d.tool_calls.empty() ||
                             !d.token_ids.empty() || !d.prompt_logprobs.empty() || !d.prompt_digests.empty();
  if (!worth_sending) return;
  responder_->send_event(sse_event(chunk_body(context_, d, first)));
  seq.sent_first = true;
  seq.emitted_text_bytes += static_cast<int64_t>(d.text.size());
}

std::string GenerationJob::tool_text(const RequestOutput& out) const {
  std::string markers;
  for (const std::string& marker : context_.tool_parser->marker_tokens()) {
    for (int32_t id : out.new_tokens) {
      if (context_.piece(id) == marker && out.new_text.find(marker) == std::string::npos) markers += marker;
    }
  }
  return markers + out.new_text;
}

void GenerationJob::accumulate(Sequence& seq, const RequestOutput& out) {
  ChoiceOutput& acc = seq.output;
  acc.text += context_.tool_parser ? tool_text(out) : out.new_text;
  acc.token_ids.insert(acc.token_ids.end(), out.new_tokens.begin(), out.new_tokens.end());
  if (request_.logprobs) {
    acc.logprobs.insert(acc.logprobs.end(), out.new_logprobs.begin(), out.new_logprobs.end());
    if (request_.echo && !out.prompt_logprobs.empty()) acc.prompt_logprobs = out.prompt_logprobs;
  }
  if (request_.return_logits_digests) {
    acc.digests.insert(acc.digests.end(), out.new_digests.begin(), out.new_digests.end());
    if (request_.echo && !out.prompt_digests.empty()) acc.prompt_digests = out.prompt_digests;
  }
  if (request_.return_sampling_mask)
    acc.sampling_masks.insert(acc.sampling_masks.end(), out.new_sampling_masks.begin(), out.new_sampling_masks.end());
  if (out.finished) acc.routed_experts = out.routed_experts;
}

void GenerationJob::finish_sequence(Sequence& seq, const RequestOutput& out) {
  seq.finished = true;
  seq.output.finish_reason = out.finish_reason;
  if (context_.tool_parser && !request_.stream) {
    ToolAnswer answer = parse_tool_answer(*context_.tool_parser, seq.output.text, new_tool_call_id);
    seq.output.text = std::move(answer.content);
    seq.output.tool_calls = std::move(answer.calls);
    seq.output.called_tools = !seq.output.tool_calls.empty();
  }
  if (out.finish_reason == FinishReason::kError && error_.empty()) error_ = out.error;
  env_.metrics->observe_finish(finish_reason_name(out.finish_reason));
  env_.metrics->add_tokens(out.num_prompt_tokens, out.num_output_tokens);
  const auto now = Clock::now();
  if (seq.num_output_tokens > 1) {
    env_.metrics->observe_tpot(std::chrono::duration<double>(seq.last_token_time - seq.first_token_time).count() /
                               (seq.num_output_tokens - 1));
  }
  env_.metrics->observe_e2e(std::chrono::duration<double>(now - arrival_).count());
  if (++num_finished_ == sequences_.size()) complete();
}

Usage GenerationJob::usage() const {
  Usage u;
  for (const Sequence& seq : sequences_) {
    u.completion_tokens += seq.num_output_tokens;
    if (seq.output.index % request_.n == 0) {  // the prompt counts once, not once per choice
      u.prompt_tokens += seq.num_prompt_tokens;
      u.cached_tokens += seq.num_cached_tokens;
    }
  }
  return u;
}

void GenerationJob::complete() {
  if (completed_) return;
  completed_ = true;
  const Usage u = usage();
  AccessLogFields log;
  log.prompt_tokens = u.prompt_tokens;
  log.completion_tokens = u.completion_tokens;
  const Clock::time_point engine_end{Clock::duration(engine_end_ns_.load())};
  log.engine_ms = std::chrono::duration<double, std::milli>(engine_end - engine_start_).count();
  responder_->set_log_fields(log);
  int status = 200;
  if (request_.stream) {
    if (request_.include_usage) responder_->send_event(sse_event(usage_chunk_body(context_, u)));
    responder_->send_event("data: [DONE]\n\n");
    responder_->end_events();
  } else if (!error_.empty()) {
    ApiError e;
    e.http_status = status = 500;
    e.type = "internal_error";
    e.message = "the engine failed this request: " + error_;
    responder_->send(500, "application/json", error_json(e));
  } else {
    std::vector<ChoiceOutput> choices;
    for (const Sequence& seq : sequences_) choices.push_back(seq.output);
    responder_->send(200, "application/json", full_response_body(context_, choices, u));
  }
  env_.metrics->observe_http_status(status);
  if (env_.on_done) env_.on_done(job_id_);
}

}  // namespace vosti
