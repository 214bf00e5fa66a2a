// The tool fields of a chat completion request (OpenAI's function tools): `tools`, `tool_choice`,
// `parallel_tool_calls`, and what they become:
//   - the template's `tools` variable (transformers' apply_chat_template shape: the list of
//     {"type": "function", "function": {...}} as sent), kept for every tool_choice, "none" too
//     (vLLM keeps them in the prompt and only skips the parsing);
//   - for a template that takes no tools (SmolLM2, Gemma 2/3), the fallback of
//     tokenizer/chat_tools.h (the Python LLM.chat renders through it too);
//   - for tool_choice "required" and a named function, the grammar that forces a call
//     (forced_constraint): an xgrammar structural tag that spells out the served family's own
//     call format (hermes, llama3_json, mistral: server/tool_call_parser.h) with one tag per
//     function, its name written out and its parameters schema as the arguments' schema; at least
//     one call, exactly one without parallel_tool_calls or for a named function. The family's
//     parser reads the output back, as it reads "auto", which is parsed after the fact.
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

// A family's call format, as the forced grammar writes it: the output is list_begin, then calls
// joined by separator, then list_end; a call is call_begin {"name": "<name>", "<arguments_key>":
// <arguments object>} call_end.
struct ToolCallFormat {
  std::string call_begin;
  std::string arguments_key;
  std::string call_end;
  std::string list_begin;
  std::string separator;
  std::string list_end;
};

// The format of tool-call parser `parser` (hermes, llama3_json, mistral), or none:
//   hermes       <tool_call>\n{"name": ..., "arguments": {...}}\n</tool_call>, joined by "\n";
//   llama3_json  {"name": ..., "parameters": {...}}, joined by "; ";
//   mistral      [TOOL_CALLS] [{"name": ..., "arguments": {...}}, ...].
// A marker that is a plain added token (Qwen's <tool_call>) may be that token; a special one
// (Mistral's control token [TOOL_CALLS]) is spelt in ordinary pieces, since grammars never allow
// special tokens (structured/grammar.h); the text, and so the parse, is the same.
std::optional<ToolCallFormat> tool_call_format(std::string_view parser);

// The structural tag that forces tool_choice "required" / a named function in `format` (see the
// header). REQUIRES: tools.choice is kRequired or kNamed.
StructuredOutputs forced_constraint(const ToolRequest& tools, const ToolCallFormat& format);

}  // namespace vosti
