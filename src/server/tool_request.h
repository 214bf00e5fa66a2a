// The tool fields of a chat completion request (OpenAI's function tools): `tools`, `tool_choice`,
// `parallel_tool_calls`, and what they become:
//   - the template's `tools` variable (transformers' apply_chat_template shape: the list of
//     {"type": "function", "function": {...}} as sent), kept for every tool_choice, "none" too
//     (vLLM keeps them in the prompt and only skips the parsing);
//   - for a template that takes no tools (SmolLM2, Gemma 2/3), the fallback of
//     tokenizer/chat_tools.h (the Python LLM.chat renders through it too);
//   - for tool_choice "required" and a named function, the grammar that forces a call
//     (forced_constraint): a JSON array of {"name", "parameters"} objects (one at most without
//     parallel_tool_calls), or the named function's arguments object; "auto" is parsed after the
//     fact by the served model's parser (server/tool_call_parser.h).
// Thread safety: pure functions; never throws on any input (fuzzed with the request parser).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>

#include <nlohmann/json.hpp>

#include "server/api_error.h"
#include "structured/structured_outputs.h"

namespace vosti {

enum class ToolChoice : uint8_t { kNone, kAuto, kRequired, kNamed };

struct ToolRequest {
  nlohmann::ordered_json tools = nlohmann::ordered_json::array();  // [{"type":"function","function":{...}}]
  ToolChoice choice = ToolChoice::kNone;
  std::string named_function;       // kNamed
  bool parallel_tool_calls = true;  // several calls in one answer
};

// The tool fields of request object `doc` (its text `body`, read again to keep the key order the
// template's tojson shows): none when `tools` is absent or empty and tool_choice is absent or
// "none"; else the tools, or a 400 naming the field and the problem (a malformed tool, a parameters
// schema Vosti cannot enforce, a duplicate name, tool_choice naming an unknown function, "required"
// or a named function without tools).
std::variant<std::optional<ToolRequest>, ApiError> parse_tool_fields(const nlohmann::json& doc, std::string_view body);

// The grammar that forces tool_choice "required" / a named function (see the header).
// REQUIRES: tools.choice is kRequired or kNamed.
StructuredOutputs forced_constraint(const ToolRequest& tools);

}  // namespace vosti
