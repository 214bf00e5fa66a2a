// The OpenAI wire protocol as `vosti bench` speaks it: the body of one streamed request
// (/v1/completions for token-id and text prompts, /v1/chat/completions for conversations),
// and the reading of its Server-Sent Events into a RequestRecord: one delivery per chunk that
// carries output (text, token ids or logprobs), usage at the end (stream_options.include_usage).
// Vosti's extensions (token ids in every chunk, logits digests) are asked only of a Vosti server.
// Thread safety: StreamReader is a single-owner value; the rest are pure functions.
#pragma once

#include <string>
#include <string_view>

#include "core/status.h"
#include "tools/bench/metrics.h"
#include "tools/bench/target.h"
#include "tools/bench/workload.h"

namespace vosti::bench {

struct ServerDialect {
  bool vosti = false;  // the server is Vosti: ask for token ids (and digests when content is wanted)
};

// "/v1/completions" or "/v1/chat/completions" for this request.
const char* endpoint_path(const BenchRequest& request);

// The JSON body: model, prompt or messages, max_tokens, temperature, seed, stream + usage,
// ignore_eos if set, logprobs when content is wanted.
std::string request_body(const BenchRequest& request, const SamplingOptions& options, const std::string& model,
                         const ServerDialect& dialect);

// Applies the events of one streamed response to a record (index, send_s set by the caller).
class StreamReader {
 public:
  explicit StreamReader(RequestRecord* record) : record_(record) {}
  // One event's data at run time now_s. Errors: kInvalidArgument for data that is not a chunk
  // (the message quotes it), kInternal for an error event the server sent mid-stream.
  Status on_event(std::string_view data, double now_s);
  bool done() const { return done_; }  // "[DONE]" seen
  bool saw_usage() const { return saw_usage_; }
  int64_t num_tokens_counted() const { return num_tokens_; }  // from ids, logprobs or chunks

 private:
  RequestRecord* record_;
  bool done_ = false;
  bool saw_usage_ = false;
  int64_t num_tokens_ = 0;
};

// The message of an error response body ({"error": {"message": ...}} or its text), shortened.
std::string error_message(int status, std::string_view body);

}  // namespace vosti::bench
