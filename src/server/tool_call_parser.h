// Tool-call parsers: a model's output text -> OpenAI tool calls (name, arguments as JSON text) and
// the content that is not a call. One parser per output format, chosen by name (vLLM's
// --tool-call-parser names) or, absent a name, from the model's chat template by the table in
// tool_call_parser.cc (kFamilyParsers: a marker the template holds -> the parser's name):
//   hermes       Qwen 2.5 / Qwen 3 / Hermes: <tool_call>{"name": ..., "arguments": {...}}</tool_call>, repeated;
//                content is the text before the first <tool_call>.
//   llama3_json  Llama 3.x: the whole output is {"name": ..., "parameters": {...}} (or "arguments"),
//                optionally after <|python_tag|>, several separated by ';'.
//   mistral      Mistral: [TOOL_CALLS] then a JSON array of {"name", "arguments"} objects, or the
//                newer name[ARGS]{...} form, repeated; content is the text before [TOOL_CALLS].
// tool_choice "required" and a named function are forced into the same format by a grammar
// (tool_request.h) and read back by the same parser.
// Gemma 2 / 3 have no tool-call format of their own (their templates take no tools): they get the
// template fallback (tool_request.h) and the hermes parser.
//
// Arguments are the model's own JSON text of the arguments value (validated as JSON when the call
// is complete), so the fragments a stream sends join to the non-streamed arguments exactly. A
// format the text breaks (malformed JSON, a call without a name) gives no calls: the whole text is
// content, as vLLM does.
//
// Streaming (parse with final = false) sees a prefix of the output: a call is reported once its
// name is complete, its arguments as far as they go (a prefix of the final arguments), and
// `content` is only what can no longer become part of a call (a partial "<tool_c" is held back).
// Thread safety: parsers are immutable; parse() may run concurrently.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace vosti {

struct ParsedToolCall {
  std::string name;
  std::string arguments;  // JSON text of the arguments object; in a partial parse, a prefix of it
  bool complete = false;  // the call's text ended (its arguments are whole)
};

struct ToolCallParse {
  std::string content;                // text that is no call (partial parse: the part safe to send)
  std::vector<ParsedToolCall> calls;  // in output order
};

class ToolCallParser {
 public:
  virtual ~ToolCallParser() = default;
  virtual const char* name() const = 0;
  // The calls in `text`. final = false: `text` is a prefix of the output (see the header).
  virtual ToolCallParse parse(std::string_view text, bool final) const = 0;
  // Special tokens the format starts with, which decoding would otherwise drop ("[TOOL_CALLS]").
  virtual std::vector<std::string> marker_tokens() const { return {}; }
};

// The parser called `name` (hermes, llama3_json, mistral), or null.
std::unique_ptr<ToolCallParser> make_tool_call_parser(std::string_view name);
// The names --tool-call-parser accepts, comma-separated ("hermes, llama3_json, mistral").
std::string tool_call_parser_names();
// The parser for a model whose chat template is `chat_template` (kFamilyParsers' first marker
// found; a template without tools, or none, gets "hermes", the fallback's format).
std::string tool_call_parser_for_template(std::string_view chat_template);

// Where the JSON value starting at `pos` of `text` ends: complete (end one past it) or cut off by
// the end of the text (end = text.size()); malformed when the text cannot be a JSON value there.
struct JsonExtent {
  enum Kind { kComplete, kIncomplete, kMalformed } kind = kMalformed;
  size_t end = 0;
};
JsonExtent scan_json_value(std::string_view text, size_t pos);

}  // namespace vosti
