// Where a chat request's tools go (tokenizer/chat_tools.h).
#include "tokenizer/chat_tools.h"

namespace vosti {

using ordered = nlohmann::ordered_json;

bool template_takes_tools(std::string_view chat_template) {
  return chat_template.find("tools") != std::string_view::npos;
}

ordered tool_fallback_messages(const ordered& messages, const ordered& tools) {
  std::string block =
      "You can call functions to answer. Their signatures, one JSON object a line, are within <tools></tools>:\n"
      "<tools>\n";
  for (const ordered& t : tools) block += t.dump() + "\n";
  block +=
      "</tools>\n\nTo call a function, answer with one block per call:\n<tool_call>\n"
      "{\"name\": <function name>, \"arguments\": <arguments as a JSON object>}\n</tool_call>";
  ordered out = ordered::array();
  size_t first = 0;
  if (!messages.empty() && messages[0].value("role", "") == "system") {
    ordered system = messages[0];
    const std::string content = system.value("content", "");
    system["content"] = content.empty() ? block : content + "\n\n" + block;
    out.push_back(std::move(system));
    first = 1;
  } else {
    out.push_back(ordered{{"role", "system"}, {"content", block}});
  }
  for (size_t i = first; i < messages.size(); ++i) {
    const ordered& m = messages[i];
    const std::string role = m.value("role", "");
    if (role == "tool") {
      const std::string response = "<tool_response>\n" + m.value("content", "") + "\n</tool_response>";
      // Consecutive tool results share one user turn.
      if (i > first && messages[i - 1].value("role", "") == "tool") {
        out.back()["content"] = out.back()["content"].get<std::string>() + "\n" + response;
      } else {
        out.push_back(ordered{{"role", "user"}, {"content", response}});
      }
      continue;
    }
    if (role == "assistant" && m.contains("tool_calls") && m["tool_calls"].is_array()) {
      std::string content = m.value("content", "");
      for (const ordered& call : m["tool_calls"]) {
        const ordered& fn = call["function"];
        if (!content.empty()) content += "\n";
        content +=
            "<tool_call>\n" + ordered{{"name", fn["name"]}, {"arguments", fn["arguments"]}}.dump() + "\n</tool_call>";
      }
      out.push_back(ordered{{"role", "assistant"}, {"content", content}});
      continue;
    }
    out.push_back(m);
  }
  return out;
}

ToolPlacement place_tools(std::string_view chat_template, ordered messages, const ordered& tools) {
  ToolPlacement out;
  const bool has_tools = tools.is_array() && !tools.empty();
  if (template_takes_tools(chat_template)) {
    out.messages = std::move(messages);
    if (has_tools) out.tools = tools;
    return out;
  }
  bool tool_turns = false;
  for (const ordered& m : messages)
    tool_turns |= m.value("role", "") == "tool" || (m.contains("tool_calls") && m["tool_calls"].is_array());
  out.messages = has_tools || tool_turns ? tool_fallback_messages(messages, has_tools ? tools : ordered::array())
                                         : std::move(messages);
  return out;
}

}  // namespace vosti
