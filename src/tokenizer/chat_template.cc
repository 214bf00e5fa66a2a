#include "tokenizer/chat_template.h"

#include "tokenizer/jinja_ast.h"
#include "tokenizer/jinja_eval.h"
#include "tokenizer/utf8.h"

namespace vosti {

Result<ChatTemplate> ChatTemplate::parse(const std::string& source) {
  if (!is_valid_utf8(source)) return invalid_argument("chat template is not valid UTF-8");
  try {
    ChatTemplate t;
    t.tree_ = std::make_shared<const jinja::ParsedTemplate>(jinja::parse_template(source));
    return t;
  } catch (const jinja::TemplateError& e) {
    return invalid_argument(e.what());
  }
}

Result<std::string> ChatTemplate::render(const nlohmann::ordered_json& messages, const ChatOptions& options) const {
  if (!messages.is_array()) return invalid_argument("chat messages must be a JSON array of objects");
  for (const auto& m : messages) {
    if (!m.is_object()) return invalid_argument("each chat message must be a JSON object with a role and content");
  }
  try {
    jinja::Value context = jinja::Value::dict();
    context.set("messages", jinja::Value::from_json(messages));
    context.set("add_generation_prompt", jinja::Value(options.add_generation_prompt));
    context.set("bos_token", options.bos_token ? jinja::Value(*options.bos_token) : jinja::Value::none());
    context.set("eos_token", options.eos_token ? jinja::Value(*options.eos_token) : jinja::Value::none());
    context.set("tools", jinja::Value::from_json(options.tools));
    context.set("documents", jinja::Value::none());
    if (options.enable_thinking) context.set("enable_thinking", jinja::Value(*options.enable_thinking));
    if (options.extra_context.is_object()) {
      for (const auto& [k, v] : options.extra_context.items()) context.set(k, jinja::Value::from_json(v));
    }
    return jinja::render(*tree_, context);
  } catch (const jinja::TemplateError& e) {
    return failed_precondition(std::string("chat template: ") + e.what());
  }
}

Result<std::string> ChatTemplate::render(const std::vector<ChatMessage>& messages, const ChatOptions& options) const {
  nlohmann::ordered_json array = nlohmann::ordered_json::array();
  for (const auto& m : messages) {
    nlohmann::ordered_json obj = {{"role", m.role}, {"content", m.content}};
    if (m.reasoning_content) obj["reasoning_content"] = *m.reasoning_content;
    array.push_back(std::move(obj));
  }
  return render(array, options);
}

Result<std::string> render_chat(const std::string& template_source, const std::vector<ChatMessage>& messages,
                                const ChatOptions& options) {
  VOSTI_ASSIGN_OR_RETURN(auto tmpl, ChatTemplate::parse(template_source));
  return tmpl.render(messages, options);
}

}  // namespace vosti
