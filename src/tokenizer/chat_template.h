// Chat templates: renders a model's own `chat_template` (GGUF tokenizer.chat_template or
// tokenizer_config.json) the way transformers' apply_chat_template does, with a Jinja2
// subset interpreter (jinja_ast.h, jinja_eval.h) under HF's environment: trim_blocks,
// lstrip_blocks, loopcontrols, tojson without HTML escaping, raise_exception,
// strftime_now, namespace; `tools` and `documents` are passed as None unless given.
// Verified against apply_chat_template for the SmolLM2, Qwen2.5, Qwen3 (enable_thinking)
// and Llama 3.2 / 3.3 (the 3.1-family template) templates, with and without tools.
//
// Errors: INVALID_ARGUMENT naming the syntax problem or unsupported construct and its
// line:column; FAILED_PRECONDITION for errors the template raises while rendering
// (raise_exception, attribute of an undefined value, type errors), with Jinja2's wording.
// Thread safety: a ChatTemplate is immutable after parse(); render() may run concurrently.
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"

namespace vosti {

namespace jinja {
struct ParsedTemplate;
}

struct ChatMessage {
  std::string role;
  std::string content;
  std::optional<std::string> reasoning_content = std::nullopt;  // Qwen3-style thinking of an assistant turn
};

struct ChatOptions {
  bool add_generation_prompt = true;
  std::optional<std::string> bos_token;  // nullopt renders as Python None, as HF does for a missing token
  std::optional<std::string> eos_token;
  // Qwen3's thinking switch, passed as the template variable `enable_thinking` when set.
  std::optional<bool> enable_thinking;
  // Extra template variables (e.g. {"enable_thinking": false, "date_string": "26 Jul 2024"});
  // they override the defaults above.
  // ordered_json keeps key order, which tojson output depends on (Python dicts are ordered).
  nlohmann::ordered_json extra_context = nlohmann::ordered_json::object();
  nlohmann::ordered_json tools = nullptr;  // a JSON array of tool schemas, or null
};

class ChatTemplate {
 public:
  // Parses `source`; INVALID_ARGUMENT with line:column on syntax errors or unsupported statements.
  static Result<ChatTemplate> parse(const std::string& source);
  // messages: a JSON array of objects ({"role", "content", ...}), as the OpenAI API sends them.
  Result<std::string> render(const nlohmann::ordered_json& messages, const ChatOptions& options) const;
  Result<std::string> render(const std::vector<ChatMessage>& messages, const ChatOptions& options) const;

 private:
  std::shared_ptr<const jinja::ParsedTemplate> tree_;
};

// One-shot parse + render.
Result<std::string> render_chat(const std::string& template_source, const std::vector<ChatMessage>& messages,
                                const ChatOptions& options);

}  // namespace vosti
