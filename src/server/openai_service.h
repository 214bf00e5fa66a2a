// OpenAiService: the routes of `vosti serve`: OpenAI completions and chat
// completions, models, health, metrics, tokenize/detokenize; authentication,
// model-dependent validation (context length, token ids), and shutdown.
//
// Routes: POST /v1/completions, POST /v1/chat/completions, GET /v1/models (with the
// vocabulary size and special ids), GET /health (never needs the API key), GET /metrics,
// POST /tokenize, POST /detokenize, POST /reset_prefix_cache (vLLM's: empties the prefix cache
// before anything sent later is admitted), and ControlService's routes (weight updates, pause,
// sleep, GET /deployment). Every generation response names the deployment it ran on; a request
// may pin one ("vosti": {"deployment_id"} or the X-Vosti-Deployment-Id header): 409 when it differs.
// Unknown path: 404; known path with another method: 405.
// Thread safety: handle() is called on many I/O threads at once; shared state is the
// job registry (one mutex), the metrics (their own mutex), and the engine loop.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "engine/token_domain.h"
#include "server/control_service.h"
#include "server/engine_loop.h"
#include "server/generation_job.h"
#include "server/http_server.h"
#include "server/server_metrics.h"
#include "server/tool_call_parser.h"
#include "server/tool_request.h"

namespace vosti {

class Tokenizer;

struct ServiceOptions {
  std::string served_model_name;             // what /v1/models lists and "model" must name
  std::string api_key;                       // empty: no authentication
  std::function<int64_t()> num_connections;  // for /metrics; may be empty
  // The weights the loop serves and their digester, for the control routes (null: none, 404).
  std::shared_ptr<const ModelFile> model_file;
  WeightsDigester digester;
  // Tool calls (vLLM's flags): the served call format and its parser (--tool-call-parser; empty:
  // the model family's, from its chat template, server/tool_call_parser.h), which "required" and
  // named calls are forced into and every tool choice is parsed with, and whether "auto" is served
  // at all (--enable-auto-tool-choice; without it an "auto" request gets 400).
  std::string tool_call_parser;
  bool enable_auto_tool_choice = false;
};

class OpenAiService {
 public:
  OpenAiService(EngineLoop& loop, std::shared_ptr<const Tokenizer> tokenizer, ServiceOptions options);

  // The HttpHandler: answers one request (never blocks on the engine).
  void handle(const HttpRequest& request, std::shared_ptr<HttpResponder> responder);
  // New generation requests get 503 from now on; the others keep working.
  void begin_shutdown() { shutting_down_ = true; }
  // Aborts the engine sequences of every request in flight.
  void abort_all();
  // Generation requests in flight.
  int64_t num_active() const;

 private:
  void respond(const std::shared_ptr<HttpResponder>& r, int status, std::string content_type, std::string body);
  void respond_error(const std::shared_ptr<HttpResponder>& r, const ApiError& error);
  bool authorized(const HttpRequest& request) const;
  void handle_generation(const HttpRequest& request, Endpoint endpoint, std::shared_ptr<HttpResponder> responder);
  void handle_models(const std::shared_ptr<HttpResponder>& r);
  void handle_metrics(const std::shared_ptr<HttpResponder>& r);
  void handle_tokenize(const HttpRequest& request, const std::shared_ptr<HttpResponder>& r);
  void handle_detokenize(const HttpRequest& request, const std::shared_ptr<HttpResponder>& r);
  std::optional<ApiError> check_model(const std::string& model) const;
  // Prompts of `request` as token ids (chat: rendered with the chat template), validated.
  std::variant<std::vector<PreparedPrompt>, ApiError> prepare_prompts(const GenerationRequest& request) const;
  // `tools`: the request's tools (null: none), passed to the template or, for a template that
  // takes none, through the fallback (server/tool_request.h).
  std::variant<std::string, ApiError> render_chat_prompt(const std::vector<ChatTurn>& messages,
                                                         bool add_generation_prompt,
                                                         const ToolRequest* tools = nullptr) const;
  // The parser of `request`'s tool calls (null: its output is not parsed), or a 400.
  std::variant<std::shared_ptr<const ToolCallParser>, ApiError> tool_parser(const GenerationRequest& request) const;
  std::string piece(int32_t id) const;

  EngineLoop& loop_;
  std::shared_ptr<const Tokenizer> tokenizer_;
  ServiceOptions options_;
  ServerMetrics metrics_;
  int64_t created_;           // unix seconds at start, for /v1/models
  TokenDomain token_domain_;  // for /v1/models
  std::atomic<bool> shutting_down_{false};
  std::atomic<uint64_t> next_job_id_{1};
  mutable std::mutex jobs_mu_;
  std::map<uint64_t, std::weak_ptr<GenerationJob>> jobs_;  // guarded by jobs_mu_
  std::unique_ptr<ControlService> control_;                // null without options.model_file
  std::shared_ptr<const ToolCallParser> tool_parser_;      // the served format's
  ToolCallFormat tool_format_;                             // what forced calls are written in
};

}  // namespace vosti
