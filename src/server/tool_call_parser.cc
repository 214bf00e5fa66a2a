// Tool-call parsers (server/tool_call_parser.h).
#include "server/tool_call_parser.h"

#include <algorithm>
#include <cctype>

#include <nlohmann/json.hpp>

namespace vosti {
namespace {

using nlohmann::json;

// A model family's tool-call format, known by a marker its chat template holds; first match wins.
struct FamilyParser {
  const char* template_marker;
  const char* parser;
};
constexpr FamilyParser kFamilyParsers[] = {
    {"[TOOL_CALLS]", "mistral"},        // Mistral v0.3+, Mixtral 8x22B, Ministral
    {"<tool_call>", "hermes"},          // Qwen 2.5, Qwen 3, QwQ, Hermes 2/3
    {"<|python_tag|>", "llama3_json"},  // Llama 3.1 / 3.3
    {"<|eom_id|>", "llama3_json"},      // Llama 3.x templates without the python tag
    {"ipython", "llama3_json"},         // Llama 3.2
};
// Models whose template takes no tools get the fallback prompt (tool_request.h), in hermes' format.
constexpr const char* kFallbackParser = "hermes";

bool is_space(char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; }

size_t skip_space(std::string_view s, size_t pos) {
  while (pos < s.size() && is_space(s[pos])) ++pos;
  return pos;
}

bool starts_at(std::string_view s, size_t pos, std::string_view what) {
  return s.size() >= pos && s.substr(pos, what.size()) == what;
}

// Whether s[pos..] is a proper, non-empty prefix of `what` running to the end of s.
bool partial_at_end(std::string_view s, size_t pos, std::string_view what) {
  const size_t n = s.size() - pos;
  return n > 0 && n < what.size() && what.substr(0, n) == s.substr(pos);
}

// The length of `text` that cannot be the start of `marker`: a suffix that is a prefix of it is held.
size_t safe_length(std::string_view text, std::string_view marker) {
  for (size_t n = std::min(text.size(), marker.size() - 1); n > 0; --n)
    if (text.substr(text.size() - n) == marker.substr(0, n)) return text.size() - n;
  return text.size();
}

// A JSON string starting at `pos` (its opening quote): complete, cut off, or malformed.
JsonExtent scan_string(std::string_view s, size_t pos) {
  for (size_t i = pos + 1; i < s.size(); ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c == '\\') {
      ++i;
    } else if (c == '"') {
      return {JsonExtent::kComplete, i + 1};
    } else if (c < 0x20) {
      return {JsonExtent::kMalformed, i};
    }
  }
  return {JsonExtent::kIncomplete, s.size()};
}

// One object of a call format: its "name" and its arguments member (`args_keys`), as far as the
// text goes.
struct CallObject {
  enum State { kMalformed, kOpen, kClosed } state = kMalformed;
  size_t end = 0;  // one past the closing brace (kClosed)
  bool has_name = false;
  ParsedToolCall call;
};

// Reads the object starting at `pos` ('{'). The arguments are the raw text of the first of
// `args_keys` present (a JSON string holding JSON is decoded, and withheld until it completes).
CallObject read_call_object(std::string_view s, size_t pos, std::initializer_list<std::string_view> args_keys) {
  CallObject out;
  if (pos >= s.size() || s[pos] != '{') return out;
  out.state = CallObject::kOpen;
  bool args_seen = false;
  size_t i = skip_space(s, pos + 1);
  if (i < s.size() && s[i] == '}') {
    out.state = CallObject::kClosed;
    out.end = i + 1;
  }
  while (out.state == CallObject::kOpen && i < s.size()) {
    if (s[i] != '"') return CallObject{};
    const JsonExtent key_extent = scan_string(s, i);
    if (key_extent.kind != JsonExtent::kComplete) {
      if (key_extent.kind == JsonExtent::kMalformed) return CallObject{};
      break;
    }
    const json key = json::parse(s.substr(i, key_extent.end - i), nullptr, false);
    if (!key.is_string()) return CallObject{};
    i = skip_space(s, key_extent.end);
    if (i >= s.size()) break;
    if (s[i] != ':') return CallObject{};
    i = skip_space(s, i + 1);
    if (i >= s.size()) break;
    const JsonExtent value = scan_json_value(s, i);
    if (value.kind == JsonExtent::kMalformed) return CallObject{};
    const std::string k = key.get<std::string>();
    const std::string_view raw = s.substr(i, value.end - i);
    const bool complete = value.kind == JsonExtent::kComplete;
    if (k == "name") {
      if (complete) {
        const json name = json::parse(raw, nullptr, false);
        if (!name.is_string()) return CallObject{};
        out.call.name = name.get<std::string>();
        out.has_name = true;
      }
    } else if (!args_seen && std::find(args_keys.begin(), args_keys.end(), k) != args_keys.end()) {
      args_seen = true;
      if (raw.front() != '"') {
        out.call.arguments = std::string(raw);
      } else if (complete) {
        const json text = json::parse(raw, nullptr, false);
        if (!text.is_string()) return CallObject{};
        out.call.arguments = text.get<std::string>();
      }
    }
    if (!complete) break;
    i = skip_space(s, value.end);
    if (i >= s.size()) break;
    if (s[i] == ',') {
      i = skip_space(s, i + 1);
    } else if (s[i] == '}') {
      out.state = CallObject::kClosed;
      out.end = i + 1;
    } else {
      return CallObject{};
    }
  }
  if (out.state == CallObject::kClosed) {
    out.call.complete = true;
    if (!args_seen) out.call.arguments = "{}";
    const json args = json::parse(out.call.arguments, nullptr, false);
    if (!out.has_name || !args.is_object()) return CallObject{};
  }
  return out;
}

// The parse of a text that holds no call.
ToolCallParse all_content(std::string_view text) { return ToolCallParse{std::string(text), {}}; }

// Calls so far of a parse cut off at the end of a prefix: those with a name.
void add_named(std::vector<ParsedToolCall>& calls, const CallObject& obj) {
  if (obj.has_name) calls.push_back(obj.call);
}

// A JSON array of call objects from `pos` ('['), with arguments under `args_keys`. Sets `end` one
// past the ']' when it closed. False when malformed.
bool read_call_array(std::string_view s, size_t pos, std::initializer_list<std::string_view> args_keys,
                     std::vector<ParsedToolCall>& calls, size_t& end) {
  end = std::string_view::npos;
  size_t i = skip_space(s, pos + 1);
  if (i < s.size() && s[i] == ']') return false;  // no call at all
  while (i < s.size()) {
    const CallObject obj = read_call_object(s, i, args_keys);
    if (obj.state == CallObject::kMalformed) return false;
    add_named(calls, obj);
    if (obj.state == CallObject::kOpen) return true;
    i = skip_space(s, obj.end);
    if (i >= s.size()) return true;
    if (s[i] == ']') {
      end = i + 1;
      return true;
    }
    if (s[i] != ',') return false;
    i = skip_space(s, i + 1);
  }
  return true;
}

class HermesParser final : public ToolCallParser {
 public:
  const char* name() const override { return "hermes"; }
  ToolCallParse parse(std::string_view text, bool final) const override {
    static constexpr std::string_view kOpen = "<tool_call>", kClose = "</tool_call>";
    const size_t first = text.find(kOpen);
    if (first == std::string_view::npos)
      return final ? all_content(text) : ToolCallParse{std::string(text.substr(0, safe_length(text, kOpen))), {}};
    ToolCallParse out{std::string(text.substr(0, first)), {}};
    size_t i = first;
    while (starts_at(text, i, kOpen)) {
      i = skip_space(text, i + kOpen.size());
      if (i >= text.size()) break;
      const CallObject obj = read_call_object(text, i, {"arguments", "parameters"});
      if (obj.state == CallObject::kMalformed) return final ? all_content(text) : out;
      add_named(out.calls, obj);
      if (obj.state == CallObject::kOpen) break;
      i = skip_space(text, obj.end);
      if (starts_at(text, i, kClose)) i = skip_space(text, i + kClose.size());
      // What follows the calls but another call is dropped, as the content before them is kept.
    }
    if (final && out.calls.empty()) return all_content(text);
    if (final) {
      for (const ParsedToolCall& c : out.calls)
        if (!c.complete) return all_content(text);
    }
    return out;
  }
};

class Llama3JsonParser final : public ToolCallParser {
 public:
  const char* name() const override { return "llama3_json"; }
  std::vector<std::string> marker_tokens() const override { return {"<|python_tag|>"}; }
  ToolCallParse parse(std::string_view text, bool final) const override {
    static constexpr std::string_view kTag = "<|python_tag|>";
    size_t i = skip_space(text, 0);
    if (!final && (i == text.size() || partial_at_end(text, i, kTag))) return {};  // may still start a call
    if (starts_at(text, i, kTag)) i = skip_space(text, i + kTag.size());
    if (i == text.size()) return final ? all_content(text) : ToolCallParse{};
    if (text[i] != '{') return all_content(text);
    ToolCallParse out;
    while (i < text.size()) {
      const CallObject obj = read_call_object(text, i, {"parameters", "arguments"});
      if (obj.state == CallObject::kMalformed) return out.calls.empty() || final ? all_content(text) : out;
      if (obj.state == CallObject::kOpen) {
        add_named(out.calls, obj);
        if (final) return all_content(text);
        return out;
      }
      add_named(out.calls, obj);
      i = skip_space(text, obj.end);
      if (i < text.size() && text[i] == ';') i = skip_space(text, i + 1);
      if (i < text.size() && text[i] != '{') return final || out.calls.empty() ? all_content(text) : out;
    }
    return out;
  }
};

class MistralParser final : public ToolCallParser {
 public:
  const char* name() const override { return "mistral"; }
  std::vector<std::string> marker_tokens() const override { return {"[TOOL_CALLS]"}; }
  ToolCallParse parse(std::string_view text, bool final) const override {
    static constexpr std::string_view kCalls = "[TOOL_CALLS]", kArgs = "[ARGS]";
    const size_t first = text.find(kCalls);
    if (first == std::string_view::npos)
      return final ? all_content(text) : ToolCallParse{std::string(text.substr(0, safe_length(text, kCalls))), {}};
    ToolCallParse out{std::string(text.substr(0, first)), {}};
    size_t i = skip_space(text, first + kCalls.size());
    if (i < text.size() && text[i] == '[') {  // [TOOL_CALLS] [{"name": ..., "arguments": {...}}, ...]
      size_t end = 0;
      if (!read_call_array(text, i, {"arguments", "parameters"}, out.calls, end))
        return final ? all_content(text) : out;
      if (final && end == std::string_view::npos) return all_content(text);
      return final && out.calls.empty() ? all_content(text) : out;
    }
    // [TOOL_CALLS]name[ARGS]{...}, repeated.
    while (i < text.size()) {
      const size_t args = text.find(kArgs, i);
      if (args == std::string_view::npos) return final ? all_content(text) : out;
      ParsedToolCall call;
      call.name = std::string(text.substr(i, args - i));
      if (call.name.empty() || call.name.find_first_of(" \n\"{") != std::string::npos) return all_content(text);
      const size_t v = skip_space(text, args + kArgs.size());
      const JsonExtent value = v < text.size() ? scan_json_value(text, v) : JsonExtent{JsonExtent::kIncomplete, v};
      if (value.kind == JsonExtent::kMalformed) return final ? all_content(text) : out;
      call.arguments = std::string(text.substr(v, value.end - v));
      call.complete = value.kind == JsonExtent::kComplete;
      if (call.complete && !json::parse(call.arguments, nullptr, false).is_object()) return all_content(text);
      out.calls.push_back(std::move(call));
      if (!out.calls.back().complete) return final ? all_content(text) : out;
      i = skip_space(text, value.end);
      if (starts_at(text, i, kCalls)) i = skip_space(text, i + kCalls.size());
    }
    return out;
  }
};

}  // namespace

JsonExtent scan_json_value(std::string_view s, size_t pos) {
  if (pos >= s.size()) return {JsonExtent::kIncomplete, s.size()};
  const char c = s[pos];
  if (c == '"') return scan_string(s, pos);
  if (c == '{' || c == '[') {
    std::string stack;
    for (size_t i = pos; i < s.size(); ++i) {
      const char d = s[i];
      if (d == '"') {
        const JsonExtent str = scan_string(s, i);
        if (str.kind != JsonExtent::kComplete) return str;
        i = str.end - 1;
      } else if (d == '{' || d == '[') {
        stack.push_back(d == '{' ? '}' : ']');
      } else if (d == '}' || d == ']') {
        if (stack.empty() || stack.back() != d) return {JsonExtent::kMalformed, i};
        stack.pop_back();
        if (stack.empty()) return {JsonExtent::kComplete, i + 1};
      }
    }
    return {JsonExtent::kIncomplete, s.size()};
  }
  // A number, true, false or null: its characters up to a delimiter.
  size_t i = pos;
  while (i < s.size() && (std::isalnum(static_cast<unsigned char>(s[i])) || s[i] == '-' || s[i] == '+' || s[i] == '.'))
    ++i;
  if (i == pos) return {JsonExtent::kMalformed, pos};
  if (i == s.size()) return {JsonExtent::kIncomplete, i};
  return {JsonExtent::kComplete, i};
}

std::unique_ptr<ToolCallParser> make_tool_call_parser(std::string_view name) {
  if (name == "hermes") return std::make_unique<HermesParser>();
  if (name == "llama3_json") return std::make_unique<Llama3JsonParser>();
  if (name == "mistral") return std::make_unique<MistralParser>();
  return nullptr;
}

std::string tool_call_parser_names() { return "hermes, llama3_json, mistral"; }

std::string tool_call_parser_for_template(std::string_view chat_template) {
  if (chat_template.find("tools") == std::string_view::npos) return kFallbackParser;
  for (const FamilyParser& f : kFamilyParsers)
    if (chat_template.find(f.template_marker) != std::string_view::npos) return f.parser;
  return kFallbackParser;
}

}  // namespace vosti
