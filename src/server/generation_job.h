// GenerationJob: one /v1/completions or /v1/chat/completions request in flight: its
// engine sequences (prompts x n choices), their accumulated output, and the HTTP
// response (one JSON body, or SSE chunks as tokens arrive).
//
// Choice index = prompt_index * n + i; with a seed s, choice i samples with seed s + i
// (so n > 1 gives n different, individually replayable samples).
// Invariants: all state is touched only on the connection's strand (engine callbacks
// post there), so no lock; the job stays alive while the engine holds its callbacks.
// A client that goes away aborts every unfinished sequence (Engine::abort frees blocks).
// Thread safety: abort() may be called from any thread; the rest runs on the strand.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "server/engine_loop.h"
#include "server/http_server.h"
#include "server/openai_request.h"
#include "server/openai_response.h"
#include "server/server_metrics.h"

namespace vosti {

// One engine sequence to run: its prompt ids, and the text echo prepends.
struct PreparedPrompt {
  std::vector<int32_t> ids;  // [num_prompt_tokens]
  std::string text;          // for echo
};

struct JobEnvironment {
  EngineLoop* loop = nullptr;
  ServerMetrics* metrics = nullptr;
  std::function<void(uint64_t job_id)> on_done;  // called once, on the strand, when the response is complete
};

class GenerationJob : public std::enable_shared_from_this<GenerationJob> {
 public:
  GenerationJob(uint64_t job_id, JobEnvironment env, GenerationRequest request, std::vector<PreparedPrompt> prompts,
                int32_t max_tokens, ResponseContext context, std::shared_ptr<HttpResponder> responder);

  // Submits every sequence to the engine loop, all or none, pinned to `pin` (a deployment id,
  // or empty). Admission may come later (a weight update, a pause); a refusal (an engine
  // rejection, sleep, a pin that does not match) is answered by the job itself. Runs on the strand.
  void start(std::string pin);
  // Aborts every unfinished sequence (client gone, or shutdown). Any thread.
  void abort();
  uint64_t id() const { return job_id_; }

 private:
  struct Sequence {
    RequestId engine_id = 0;
    bool submitted = false;
    bool finished = false;
    bool sent_first = false;
    size_t prompt_index = 0;
    ChoiceOutput output;             // accumulated (non-streaming) or the running totals
    int64_t emitted_text_bytes = 0;  // streaming: text bytes sent so far (for text_offset)
    int32_t num_prompt_tokens = 0;
    int32_t num_cached_tokens = 0;
    int32_t num_output_tokens = 0;
    std::chrono::steady_clock::time_point first_token_time{};
    std::chrono::steady_clock::time_point last_token_time{};
    std::unique_ptr<ToolCallStream> tools;  // streaming with a tool parser
  };

  RequestSpec make_spec(size_t prompt_index, int32_t choice) const;
  void on_admitted(const Admission& admission);
  void fail(const ApiError& error);
  void on_output(size_t k, const RequestOutput& out);
  void stream_delta(Sequence& seq, const RequestOutput& out);
  void accumulate(Sequence& seq, const RequestOutput& out);
  void finish_sequence(Sequence& seq, const RequestOutput& out);
  // The text a tool parser reads: `out`'s text with the format's marker tokens, which decoding
  // drops as special, put back in front.
  std::string tool_text(const RequestOutput& out) const;
  void complete();
  Usage usage() const;

  uint64_t job_id_;
  JobEnvironment env_;
  GenerationRequest request_;
  std::vector<PreparedPrompt> prompts_;
  int32_t max_tokens_;
  ResponseContext context_;
  std::shared_ptr<HttpResponder> responder_;
  std::vector<Sequence> sequences_;  // [prompts * n], by choice index
  size_t num_finished_ = 0;
  bool completed_ = false;
  bool admitted_ = false;  // the engine has the sequences (their ids are set)
  bool aborted_ = false;   // abort() came; sequences admitted later are aborted at once
  std::string error_;      // an engine error to report
  std::chrono::steady_clock::time_point arrival_;
  std::chrono::steady_clock::time_point engine_start_;  // just before the first add_request
  std::atomic<int64_t> engine_end_ns_{0};               // engine thread: when the last output was produced
};

}  // namespace vosti
