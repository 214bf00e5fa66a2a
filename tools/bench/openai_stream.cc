#include "tools/bench/openai_stream.h"

#include <nlohmann/json.hpp>

namespace vosti::bench {
namespace {

using nlohmann::json;

// Tokens in one choice of a chunk: ids when sent, else logprob entries, else 1 for any text.
int64_t count_tokens(const json& choice, bool chat, ResponseContent& content) {
  if (choice.contains("token_ids") && choice["token_ids"].is_array() && !choice["token_ids"].empty()) {
    for (const json& id : choice["token_ids"]) content.token_ids.push_back(id.get<int32_t>());
    if (choice.contains("logits_digests") && choice["logits_digests"].is_array())
      for (const json& d : choice["logits_digests"]) content.digests.push_back(d.get<std::string>());
  }
  int64_t from_logprobs = 0;
  if (choice.contains("logprobs") && choice["logprobs"].is_object()) {
    const json& lp = choice["logprobs"];
    if (chat && lp.contains("content") && lp["content"].is_array()) {
      for (const json& t : lp["content"]) {
        content.token_pieces.push_back(t.value("token", ""));
        content.logprobs.push_back(t.value("logprob", 0.0));
        ++from_logprobs;
      }
    } else if (!chat && lp.contains("tokens") && lp["tokens"].is_array()) {
      const json& lps = lp.value("token_logprobs", json::array());
      for (size_t i = 0; i < lp["tokens"].size(); ++i) {
        content.token_pieces.push_back(lp["tokens"][i].get<std::string>());
        content.logprobs.push_back(i < lps.size() && lps[i].is_number() ? lps[i].get<double>() : 0.0);
        ++from_logprobs;
      }
    }
  }
  if (choice.contains("token_ids") && choice["token_ids"].is_array())
    return static_cast<int64_t>(choice["token_ids"].size());
  if (from_logprobs > 0) return from_logprobs;
  const json* text = nullptr;
  if (chat && choice.contains("delta") && choice["delta"].is_object() && choice["delta"].contains("content"))
    text = &choice["delta"]["content"];
  if (!chat && choice.contains("text")) text = &choice["text"];
  return text && text->is_string() && !text->get<std::string>().empty() ? 1 : 0;
}

}  // namespace

const char* endpoint_path(const BenchRequest& request) {
  return request.kind == PromptKind::kChat ? "/v1/chat/completions" : "/v1/completions";
}

std::string request_body(const BenchRequest& request, const SamplingOptions& options, const std::string& model,
                         const ServerDialect& dialect) {
  json body;
  body["model"] = model;
  const bool chat = request.kind == PromptKind::kChat;
  if (chat) {
    json messages = json::array();
    for (const auto& m : request.messages) messages.push_back({{"role", m.role}, {"content", m.content}});
    body["messages"] = std::move(messages);
  } else if (request.kind == PromptKind::kText) {
    body["prompt"] = request.prompt_text;
  } else {
    body["prompt"] = request.prompt_ids;
  }
  body["max_tokens"] = request.max_tokens;
  body["temperature"] = options.temperature;
  body["seed"] = request.seed;
  body["stream"] = true;
  body["stream_options"] = {{"include_usage", true}};
  if (options.ignore_eos) body["ignore_eos"] = true;
  if (options.want_content) {
    if (chat) {
      body["logprobs"] = true;
      body["top_logprobs"] = 0;
    } else {
      body["logprobs"] = 0;
    }
  }
  if (dialect.vosti) {
    body["return_token_ids"] = true;
    if (options.want_content) body["return_logits_digests"] = true;
  } else if (options.want_token_ids) {
    body["return_token_ids"] = true;  // vLLM's name; a session's next turn is built from the ids
  }
  return body.dump(-1, ' ', false, json::error_handler_t::replace);
}

Status StreamReader::on_event(std::string_view data, double now_s) {
  if (data == "[DONE]") {
    done_ = true;
    return Status();
  }
  const json chunk = json::parse(data, nullptr, false);
  if (chunk.is_discarded() || !chunk.is_object())
    return invalid_argument("the server sent an event that is not JSON: '" + std::string(data.substr(0, 120)) + "'");
  if (chunk.contains("error"))
    return internal_error("the server reported an error mid-stream: " + error_message(200, data));
  try {
    const bool chat = chunk.value("object", "") == "chat.completion.chunk";
    if (chunk.contains("choices") && chunk["choices"].is_array()) {
      for (const json& choice : chunk["choices"]) {
        const int64_t n = count_tokens(choice, chat, record_->content);
        if (n > 0) {
          record_->delivery_s.push_back(now_s);
          num_tokens_ += n;
        }
        if (choice.contains("finish_reason") && choice["finish_reason"].is_string())
          record_->finish_reason = choice["finish_reason"].get<std::string>();
        if (choice.contains("seed") && choice["seed"].is_number_unsigned())
          record_->seed = choice["seed"].get<uint64_t>();
      }
    }
    if (chunk.contains("usage") && chunk["usage"].is_object()) {
      const json& u = chunk["usage"];
      saw_usage_ = true;
      record_->num_prompt_tokens = u.value("prompt_tokens", int64_t{0});
      record_->num_output_tokens = u.value("completion_tokens", int64_t{0});
      if (u.contains("prompt_tokens_details") && u["prompt_tokens_details"].is_object() &&
          u["prompt_tokens_details"].contains("cached_tokens") &&
          u["prompt_tokens_details"]["cached_tokens"].is_number_integer())
        record_->num_cached_tokens = u["prompt_tokens_details"]["cached_tokens"].get<int64_t>();
    }
  } catch (const json::exception& e) {
    return invalid_argument(std::string("a malformed chunk from the server (") + e.what() + "): '" +
                            std::string(data.substr(0, 120)) + "'");
  }
  return Status();
}

std::string error_message(int status, std::string_view body) {
  std::string message(body.substr(0, 300));
  const json j = json::parse(body, nullptr, false);
  if (!j.is_discarded() && j.is_object() && j.contains("error")) {
    const json& e = j["error"];
    if (e.is_object() && e.contains("message") && e["message"].is_string()) {
      message = e["message"].get<std::string>();
    } else if (e.is_string()) {
      message = e.get<std::string>();
    }
  }
  while (!message.empty() && (message.back() == '\n' || message.back() == '\r')) message.pop_back();
  return status == 200 ? message : "HTTP " + std::to_string(status) + ": " + message;
}

}  // namespace vosti::bench
