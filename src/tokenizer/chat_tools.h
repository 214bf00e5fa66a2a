// Where a chat request's function tools go when a template renders them (transformers'
// apply_chat_template shape: the list of {"type": "function", "function": {...}} as sent), shared
// by the server's /v1/chat/completions and the Python LLM.chat so that both render one prompt:
//   - a template that names `tools` gets them as its `tools` variable;
//   - a template without tools (SmolLM2, Gemma 2/3) gets a fallback: the tool list and the call
//     format (hermes' <tool_call> JSON) join the system message, an assistant turn's tool_calls are
//     written into its content in that format, and tool results go back as a user turn of
//     <tool_response> blocks (so templates that insist on alternating roles render them). Earlier
//     calls and results of a conversation that sends no tools are rewritten the same way.
// Thread safety: pure functions.
#pragma once

#include <string_view>

#include <nlohmann/json.hpp>

namespace vosti {

// Whether a chat template renders `tools` itself (it names the variable).
bool template_takes_tools(std::string_view chat_template);

// The fallback for a template without tools: `messages` (an OpenAI message array, tool-call
// arguments already objects) rewritten as the header says.
nlohmann::ordered_json tool_fallback_messages(const nlohmann::ordered_json& messages,
                                              const nlohmann::ordered_json& tools);

// What a template renders: the messages, and its `tools` variable (null when it gets none).
struct ToolPlacement {
  nlohmann::ordered_json messages;
  nlohmann::ordered_json tools = nullptr;
};

// `messages` and `tools` (an array, possibly empty) placed for the template `chat_template`, as
// the header says.
ToolPlacement place_tools(std::string_view chat_template, nlohmann::ordered_json messages,
                          const nlohmann::ordered_json& tools);

}  // namespace vosti
