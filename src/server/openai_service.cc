#include "server/openai_service.h"

#include <algorithm>
#include <ctime>
#include <random>

#include "engine/token_domain.h"
#include "model/model.h"
#include "server/json_writer.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/chat_tools.h"
#include "tokenizer/tokenizer.h"

namespace vosti {
namespace {

constexpr const char* kJson = "application/json";

ApiError make_error(int status, std::string message, std::string type, std::string code = "") {
  ApiError e;
  e.http_status = status;
  e.message = std::move(message);
  e.type = std::move(type);
  e.code = std::move(code);
  return e;
}

// Equal strings compare in time that depends only on their lengths.
bool constant_time_equal(std::string_view a, std::string_view b) {
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  const size_t n = std::max(a.size(), b.size());
  for (size_t i = 0; i < n; ++i) {
    const unsigned char x = i < a.size() ? static_cast<unsigned char>(a[i]) : 0;
    const unsigned char y = i < b.size() ? static_cast<unsigned char>(b[i]) : 0;
    diff |= static_cast<unsigned char>(x ^ y);
  }
  return diff == 0;
}

std::string random_hex() {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  char buf[24];
  std::snprintf(buf, sizeof(buf), "%016llx", static_cast<unsigned long long>(rng()));
  return buf;
}

}  // namespace

OpenAiService::OpenAiService(EngineLoop& loop, std::shared_ptr<const Tokenizer> tokenizer, ServiceOptions options)
    : loop_(loop), tokenizer_(std::move(tokenizer)), options_(std::move(options)), created_(std::time(nullptr)) {
  VOSTI_CHECK(tokenizer_ != nullptr, "the server needs a tokenizer");
  token_domain_ = token_domain(loop_.model_config(), tokenizer_.get());
  const std::string name = !options_.tool_call_parser.empty() ? options_.tool_call_parser
                           : tokenizer_->chat_template() ? tool_call_parser_for_template(*tokenizer_->chat_template())
                                                         : "hermes";
  tool_parser_ = make_tool_call_parser(name);
  const std::optional<ToolCallFormat> format = tool_call_format(name);
  VOSTI_CHECK(tool_parser_ != nullptr && format, "unknown tool-call parser (cmd_serve checks the name)");
  tool_format_ = *format;
  if (options_.model_file) {
    control_ = std::make_unique<ControlService>(loop_, std::move(options_.model_file), std::move(options_.digester),
                                                [this] { abort_all(); });
  }
}

void OpenAiService::respond(const std::shared_ptr<HttpResponder>& r, int status, std::string content_type,
                            std::string body) {
  metrics_.observe_http_status(status);
  r->send(status, std::move(content_type), std::move(body));
}

void OpenAiService::respond_error(const std::shared_ptr<HttpResponder>& r, const ApiError& error) {
  respond(r, error.http_status, kJson, error_json(error));
}

bool OpenAiService::authorized(const HttpRequest& request) const {
  if (options_.api_key.empty()) return true;
  return constant_time_equal(request.authorization, "Bearer " + options_.api_key);
}

void OpenAiService::handle(const HttpRequest& request, std::shared_ptr<HttpResponder> responder) {
  const std::string& path = request.path;
  if (const char* method = control_ ? ControlService::method_of(path) : nullptr) {
    if (!authorized(request)) {
      return respond_error(responder, make_error(401, "missing or wrong API key: send 'Authorization: Bearer <key>'",
                                                 "authentication_error", "invalid_api_key"));
    }
    if (request.method != method) {
      return respond_error(
          responder, make_error(405, path + " accepts only " + method, "invalid_request_error", "method_not_allowed"));
    }
    return control_->handle(request, [this, responder](int status, std::string body) {
      respond(responder, status, kJson, std::move(body));
    });
  }
  const bool get = path == "/health" || path == "/v1/models" || path == "/metrics";
  const bool post = path == "/v1/completions" || path == "/v1/chat/completions" || path == "/tokenize" ||
                    path == "/detokenize" || path == "/reset_prefix_cache";
  if (!get && !post) {
    return respond_error(responder, make_error(404,
                                               "unknown path " + request.method + " " + path +
                                                   "; see /v1/completions, /v1/chat/completions, /v1/models",
                                               "invalid_request_error", "unknown_url"));
  }
  if (path != "/health" && !authorized(request)) {
    return respond_error(responder, make_error(401, "missing or wrong API key: send 'Authorization: Bearer <key>'",
                                               "authentication_error", "invalid_api_key"));
  }
  if (request.method != (get ? "GET" : "POST")) {
    return respond_error(responder, make_error(405, path + " accepts only " + (get ? "GET" : "POST"),
                                               "invalid_request_error", "method_not_allowed"));
  }
  if (path == "/health") {
    if (shutting_down_) return respond(responder, 503, kJson, R"({"status":"shutting_down"})");
    return respond(responder, 200, kJson, R"({"status":"ok"})");
  }
  if (path == "/v1/models") return handle_models(responder);
  if (path == "/metrics") return handle_metrics(responder);
  if (path == "/tokenize") return handle_tokenize(request, responder);
  if (path == "/detokenize") return handle_detokenize(request, responder);
  if (path == "/reset_prefix_cache") {
    // vLLM's route: the engine forgets its prefix cache before it admits anything sent later.
    loop_.reset_prefix_cache();
    return respond(responder, 200, kJson, R"({"status":"ok"})");
  }
  handle_generation(request, path == "/v1/completions" ? Endpoint::kCompletions : Endpoint::kChatCompletions,
                    std::move(responder));
}

std::optional<ApiError> OpenAiService::check_model(const std::string& model) const {
  if (model.empty() || model == options_.served_model_name) return std::nullopt;
  return make_error(404,
                    "the model '" + model + "' does not exist; this server serves '" + options_.served_model_name + "'",
                    "invalid_request_error", "model_not_found");
}

std::string OpenAiService::piece(int32_t id) const {
  const int32_t ids[1] = {id};
  return tokenizer_->decode_lenient(ids);
}

std::variant<std::string, ApiError> OpenAiService::render_chat_prompt(const std::vector<ChatTurn>& messages,
                                                                      bool add_generation_prompt,
                                                                      const ToolRequest* tools) const {
  if (!tokenizer_->chat_template()) {
    return bad_request("the model has no chat template; use /v1/completions instead", "messages");
  }
  nlohmann::ordered_json chat = nlohmann::ordered_json::array();
  for (const auto& m : messages) {
    nlohmann::ordered_json turn = {{"role", m.role}, {"content", m.content}};
    if (!m.name.empty()) turn["name"] = m.name;
    if (!m.tool_call_id.empty()) turn["tool_call_id"] = m.tool_call_id;
    if (m.tool_calls.is_array()) turn["tool_calls"] = m.tool_calls;
    chat.push_back(std::move(turn));
  }
  ChatOptions options;
  options.add_generation_prompt = add_generation_prompt;
  if (tokenizer_->bos_id()) options.bos_token = tokenizer_->bos_token();
  if (tokenizer_->eos_id()) options.eos_token = tokenizer_->eos_token();
  const std::string& source = *tokenizer_->chat_template();
  ToolPlacement placed =
      place_tools(source, std::move(chat), tools != nullptr ? tools->tools : nlohmann::ordered_json::array());
  chat = std::move(placed.messages);
  options.tools = std::move(placed.tools);
  auto tmpl = ChatTemplate::parse(source);
  if (!tmpl.ok()) return bad_request("cannot render the chat template: " + tmpl.status().message(), "messages");
  auto text = tmpl->render(chat, options);
  if (!text.ok()) return bad_request("cannot render the chat template: " + text.status().message(), "messages");
  return std::move(text).value();
}

std::variant<std::shared_ptr<const ToolCallParser>, ApiError> OpenAiService::tool_parser(
    const GenerationRequest& request) const {
  if (!request.tools || request.tools->choice == ToolChoice::kNone) return std::shared_ptr<const ToolCallParser>();
  if (request.tools->choice == ToolChoice::kAuto && !options_.enable_auto_tool_choice)
    return bad_request(
        "tool_choice \"auto\" (the default when 'tools' is given) needs the server started with "
        "--enable-auto-tool-choice; send tool_choice \"required\", \"none\" or a named function instead",
        "tool_choice");
  // "required" and named calls are forced into the served format (forced_constraint): its parser reads them.
  return tool_parser_;
}

std::variant<std::vector<PreparedPrompt>, ApiError> OpenAiService::prepare_prompts(
    const GenerationRequest& request) const {
  std::vector<PreparedPrompt> prompts;
  const int64_t vocab = loop_.model_config().vocab_size;
  if (request.endpoint == Endpoint::kChatCompletions) {
    auto text =
        render_chat_prompt(request.messages, request.add_generation_prompt, request.tools ? &*request.tools : nullptr);
    if (auto* e = std::get_if<ApiError>(&text)) return *e;
    auto ids = tokenizer_->encode(std::get<std::string>(text), /*add_special_tokens=*/false);
    if (!ids.ok()) return bad_request("cannot tokenize the messages: " + ids.status().message(), "messages");
    prompts.push_back({std::move(ids).value(), std::get<std::string>(text)});
  }
  for (const PromptInput& in : request.prompts) {
    PreparedPrompt p;
    if (in.is_text) {
      auto ids = tokenizer_->encode(in.text, /*add_special_tokens=*/true);
      if (!ids.ok()) return bad_request("cannot tokenize the prompt: " + ids.status().message(), "prompt");
      p.ids = std::move(ids).value();
      p.text = in.text;
    } else {
      for (int32_t id : in.ids) {
        if (id >= vocab) {
          return bad_request(
              "'prompt' token id " + std::to_string(id) + " is out of range [0, " + std::to_string(vocab) + ")",
              "prompt");
        }
      }
      p.ids = in.ids;
      if (request.echo) p.text = tokenizer_->decode_lenient(p.ids);
    }
    prompts.push_back(std::move(p));
  }
  for (const auto& p : prompts) {
    if (p.ids.empty()) return bad_request("the prompt is empty (0 tokens); send at least one token", "prompt");
  }
  return prompts;
}

void OpenAiService::handle_generation(const HttpRequest& http, Endpoint endpoint,
                                      std::shared_ptr<HttpResponder> responder) {
  if (shutting_down_) {
    return respond_error(responder, make_error(503, "the server is shutting down", "server_error", "shutting_down"));
  }
  auto parsed = parse_generation_request(http.body, endpoint);
  if (auto* e = std::get_if<ApiError>(&parsed)) return respond_error(responder, *e);
  GenerationRequest& request = std::get<GenerationRequest>(parsed);
  std::string pin = request.pin_deployment_id;
  if (!http.deployment_id.empty()) {
    if (!pin.empty() && pin != http.deployment_id) {
      return respond_error(responder, bad_request("the X-Vosti-Deployment-Id header (" + http.deployment_id +
                                                      ") and 'vosti.deployment_id' (" + pin + ") differ; send one",
                                                  "vosti.deployment_id"));
    }
    pin = http.deployment_id;
  }
  if (auto e = check_model(request.model)) return respond_error(responder, *e);
  auto parser = tool_parser(request);
  if (auto* e = std::get_if<ApiError>(&parser)) return respond_error(responder, *e);
  if (request.tools && (request.tools->choice == ToolChoice::kRequired || request.tools->choice == ToolChoice::kNamed))
    request.structured = forced_constraint(*request.tools, tool_format_);
  for (const auto& [id, bias] : request.sampling.logit_bias) {
    if (id >= loop_.model_config().vocab_size) {
      return respond_error(
          responder, bad_request("'logit_bias' token id " + std::to_string(id) + " is out of range", "logit_bias"));
    }
  }
  auto prepared = prepare_prompts(request);
  if (auto* e = std::get_if<ApiError>(&prepared)) return respond_error(responder, *e);
  auto& prompts = std::get<std::vector<PreparedPrompt>>(prepared);

  const int64_t max_len = loop_.config().max_model_len;
  size_t longest = 0;
  for (const auto& p : prompts) longest = std::max(longest, p.ids.size());
  const int64_t room = max_len - static_cast<int64_t>(longest);
  int64_t max_tokens =
      request.max_tokens.value_or(endpoint == Endpoint::kCompletions ? std::min<int64_t>(16, room) : room);
  if (room < 0 || (room == 0 && !request.max_tokens) || max_tokens > room) {
    return respond_error(responder, bad_request("this model's maximum context length is " + std::to_string(max_len) +
                                                    " tokens, but the request asks for " +
                                                    std::to_string(longest + std::max<int64_t>(max_tokens, 0)) + " (" +
                                                    std::to_string(longest) + " in the prompt, " +
                                                    std::to_string(std::max<int64_t>(max_tokens, 0)) +
                                                    " for the completion); shorten the prompt or lower max_tokens",
                                                request.max_tokens ? "max_tokens" : "prompt"));
  }

  ResponseContext ctx;
  ctx.endpoint = endpoint;
  ctx.id = (endpoint == Endpoint::kCompletions ? "cmpl-" : "chatcmpl-") + random_hex();
  ctx.created = std::time(nullptr);
  ctx.model = options_.served_model_name;
  ctx.logprobs = request.logprobs;
  ctx.return_token_ids = request.return_token_ids;
  ctx.logits_digests = request.return_logits_digests;
  ctx.routed_experts = request.return_routed_experts;
  ctx.sampling_masks = request.return_sampling_mask;
  ctx.piece = [this](int32_t id) { return piece(id); };
  ctx.tool_parser = std::get<std::shared_ptr<const ToolCallParser>>(std::move(parser));

  const uint64_t job_id = next_job_id_++;
  JobEnvironment env{&loop_, &metrics_, [this](uint64_t id) {
                       std::lock_guard<std::mutex> lock(jobs_mu_);
                       jobs_.erase(id);
                     }};
  auto job = std::make_shared<GenerationJob>(job_id, std::move(env), std::move(request), std::move(prompts),
                                             static_cast<int32_t>(max_tokens), std::move(ctx), responder);
  {
    std::lock_guard<std::mutex> lock(jobs_mu_);
    jobs_[job_id] = job;
  }
  job->start(std::move(pin));  // answers a refusal itself
}

void OpenAiService::abort_all() {
  if (shutting_down_) loop_.drop_held();
  std::lock_guard<std::mutex> lock(jobs_mu_);
  for (auto& [id, weak] : jobs_) {
    if (auto job = weak.lock()) job->abort();
  }
}

int64_t OpenAiService::num_active() const {
  std::lock_guard<std::mutex> lock(jobs_mu_);
  return static_cast<int64_t>(jobs_.size());
}

void OpenAiService::handle_models(const std::shared_ptr<HttpResponder>& r) {
  JsonWriter w;
  w.begin_object().key("object").value("list").key("data").begin_array().begin_object();
  w.key("id").value(options_.served_model_name).key("object").value("model").key("created").value(created_);
  w.key("owned_by").value("vosti").key("root").value(loop_.model_path());
  w.key("max_model_len").value(static_cast<int64_t>(loop_.config().max_model_len));
  // What a client needs to make valid token-id prompts (the paper protocol's random prompts).
  w.key("vocab_size").value(token_domain_.vocab_size);
  w.key("bos_token_id");
  if (token_domain_.bos_token_id >= 0) {
    w.value(token_domain_.bos_token_id);
  } else {
    w.null();
  }
  w.key("eos_token_ids").begin_array();
  for (int32_t id : token_domain_.eos_token_ids) w.value(id);
  w.end_array().key("special_token_ids").begin_array();
  for (int32_t id : token_domain_.special_token_ids) w.value(id);
  w.end_array();
  w.key("sliding_window").value(loop_.model_config().sliding_window);
  w.end_object().end_array().end_object();
  respond(r, 200, kJson, w.take());
}

void OpenAiService::handle_metrics(const std::shared_ptr<HttpResponder>& r) {
  const int64_t connections = options_.num_connections ? options_.num_connections() : 0;
  const EngineLoopStats stats = loop_.stats();
  respond(r, 200, "text/plain; version=0.0.4; charset=utf-8",
          metrics_.render(stats, connections, num_active(), &stats.runner, &loop_.config()));
}

void OpenAiService::handle_tokenize(const HttpRequest& request, const std::shared_ptr<HttpResponder>& r) {
  auto parsed = parse_tokenize_request(request.body);
  if (auto* e = std::get_if<ApiError>(&parsed)) return respond_error(r, *e);
  const auto& req = std::get<TokenizeRequest>(parsed);
  if (auto e = check_model(req.model)) return respond_error(r, *e);
  std::string text = req.prompt;
  bool add_special = req.add_special_tokens;
  if (req.is_chat) {
    auto rendered = render_chat_prompt(req.messages, req.add_generation_prompt);
    if (auto* e = std::get_if<ApiError>(&rendered)) return respond_error(r, *e);
    text = std::get<std::string>(rendered);
    add_special = false;
  }
  auto ids = tokenizer_->encode(text, add_special);
  if (!ids.ok()) return respond_error(r, bad_request("cannot tokenize: " + ids.status().message(), "prompt"));
  JsonWriter w;
  w.begin_object().key("count").value(static_cast<int64_t>(ids->size()));
  w.key("max_model_len").value(static_cast<int64_t>(loop_.config().max_model_len)).key("tokens").begin_array();
  for (int32_t id : *ids) w.value(id);
  w.end_array().end_object();
  respond(r, 200, kJson, w.take());
}

void OpenAiService::handle_detokenize(const HttpRequest& request, const std::shared_ptr<HttpResponder>& r) {
  auto parsed = parse_detokenize_request(request.body);
  if (auto* e = std::get_if<ApiError>(&parsed)) return respond_error(r, *e);
  const auto& req = std::get<DetokenizeRequest>(parsed);
  if (auto e = check_model(req.model)) return respond_error(r, *e);
  auto text = tokenizer_->decode(req.tokens);
  if (!text.ok()) return respond_error(r, bad_request(text.status().message(), "tokens"));
  JsonWriter w;
  w.begin_object().key("prompt").value(*text).end_object();
  respond(r, 200, kJson, w.take());
}

}  // namespace vosti
