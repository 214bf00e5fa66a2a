// The tool fields of a chat completion request (server/tool_request.h).
#include "server/tool_request.h"

#include <set>

namespace vosti {
namespace {

using json = nlohmann::json;
using ordered = nlohmann::ordered_json;

ApiError tool_error(std::string message, std::string param) {
  return bad_request(std::move(message), std::move(param));
}

// OpenAI's function names: letters, digits, '_', '-' (and '.', which vLLM lets through), 1 to 64.
bool valid_function_name(const std::string& name) {
  if (name.empty() || name.size() > 64) return false;
  for (const char c : name) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.')) return false;
  }
  return true;
}

// One entry of `tools` (sent order kept): {"type": "function", "function": {"name", "description"?,
// "parameters"?, "strict"?}}. An error names tools[i] and what is wrong.
std::optional<ApiError> check_tool(const ordered& tool, size_t i, std::set<std::string>& names) {
  const std::string param = "tools[" + std::to_string(i) + "]";
  if (!tool.is_object())
    return tool_error(param + " must be an object {\"type\": \"function\", \"function\": {...}}", param);
  for (const auto& [k, v] : tool.items()) {
    if (k != "type" && k != "function")
      return tool_error(param + " has an unsupported field '" + k + "' (supported: type, function)", param);
  }
  if (!tool.contains("type") || tool["type"] != "function")
    return tool_error(param + ".type must be \"function\" (the only tool type supported)", param + ".type");
  const auto fn = tool.find("function");
  if (fn == tool.end() || !fn->is_object())
    return tool_error(param + ".function must be an object with a 'name'", param + ".function");
  for (const auto& [k, v] : fn->items()) {
    if (k != "name" && k != "description" && k != "parameters" && k != "strict")
      return tool_error(
          param + ".function has an unsupported field '" + k + "' (supported: name, description, parameters, strict)",
          param + ".function");
  }
  const auto name = fn->find("name");
  if (name == fn->end() || !name->is_string() || !valid_function_name(name->get<std::string>()))
    return tool_error(param + ".function.name must be 1 to 64 letters, digits, '_', '-' or '.'",
                      param + ".function.name");
  if (!names.insert(name->get<std::string>()).second)
    return tool_error("two tools are named '" + name->get<std::string>() + "'; function names must be unique",
                      param + ".function.name");
  if (const auto d = fn->find("description"); d != fn->end() && !d->is_null() && !d->is_string())
    return tool_error(param + ".function.description must be a string", param + ".function.description");
  if (const auto s = fn->find("strict"); s != fn->end() && !s->is_null() && !s->is_boolean())
    return tool_error(param + ".function.strict must be a boolean", param + ".function.strict");
  if (const auto p = fn->find("parameters"); p != fn->end() && !p->is_null()) {
    const std::string pp = param + ".function.parameters";
    if (!p->is_object()) return tool_error(pp + " must be a JSON schema (an object)", pp);
    if (json_deeper_than(json(*p), kMaxSchemaDepth))
      return tool_error(pp + " nests deeper than " + std::to_string(kMaxSchemaDepth) + " levels", pp);
    if (Status s = check_json_schema(p->dump()); !s.ok()) return tool_error(pp + ": " + s.message(), pp);
  }
  return std::nullopt;
}

// The parameters schema of function `f` ({"type": "object"} when it has none).
ordered parameters_of(const ordered& function) {
  const auto p = function.find("parameters");
  if (p == function.end() || p->is_null()) return ordered{{"type", "object"}};
  return *p;
}

}  // namespace

std::variant<std::optional<ToolRequest>, ApiError> parse_tool_fields(const json& doc, std::string_view body) {
  const auto present = [&](const char* k) { return doc.contains(k) && !doc[k].is_null(); };
  if (!present("tools") && !present("tool_choice") && !present("parallel_tool_calls"))
    return std::optional<ToolRequest>();
  // Read again as ordered JSON: tojson in a template shows the keys in the order sent.
  const ordered odoc = ordered::parse(body.begin(), body.end(), nullptr, /*allow_exceptions=*/false);
  if (!odoc.is_object()) return tool_error("the request body is not valid JSON", "");
  ToolRequest out;
  if (present("tools")) {
    const ordered& tools = odoc["tools"];
    if (!tools.is_array()) return tool_error("'tools' must be an array of function tools", "tools");
    if (tools.size() > 1024) return tool_error("'tools' holds more than 1024 tools", "tools");
    std::set<std::string> names;
    for (size_t i = 0; i < tools.size(); ++i)
      if (auto e = check_tool(tools[i], i, names)) return *e;
    out.tools = tools;
  }
  if (present("parallel_tool_calls")) {
    if (!doc["parallel_tool_calls"].is_boolean())
      return tool_error("'parallel_tool_calls' must be a boolean", "parallel_tool_calls");
    out.parallel_tool_calls = doc["parallel_tool_calls"].get<bool>();
  }
  const bool has_tools = !out.tools.empty();
  out.choice = has_tools ? ToolChoice::kAuto : ToolChoice::kNone;  // OpenAI's default
  if (present("tool_choice")) {
    const json& c = doc["tool_choice"];
    const char* kShape =
        "'tool_choice' must be \"none\", \"auto\", \"required\" or {\"type\": \"function\", \"function\": "
        "{\"name\": ...}}";
    if (c.is_string()) {
      const std::string s = c.get<std::string>();
      if (s == "none") {
        out.choice = ToolChoice::kNone;
      } else if (s == "auto") {
        out.choice = ToolChoice::kAuto;
      } else if (s == "required") {
        out.choice = ToolChoice::kRequired;
      } else {
        return tool_error(kShape, "tool_choice");
      }
    } else if (c.is_object()) {
      const auto type = c.find("type");
      const auto fn = c.find("function");
      if (type == c.end() || *type != "function" || fn == c.end() || !fn->is_object() || !fn->contains("name") ||
          !(*fn)["name"].is_string() || c.size() != 2)
        return tool_error(kShape, "tool_choice");
      out.choice = ToolChoice::kNamed;
      out.named_function = (*fn)["name"].get<std::string>();
    } else {
      return tool_error(kShape, "tool_choice");
    }
    if (out.choice != ToolChoice::kNone && !has_tools)
      return tool_error("'tool_choice' " + c.dump() + " needs 'tools': give the functions the model may call",
                        "tool_choice");
    if (out.choice == ToolChoice::kNamed) {
      bool found = false;
      for (const ordered& t : out.tools) found |= t["function"]["name"] == out.named_function;
      if (!found)
        return tool_error("'tool_choice' names the function '" + out.named_function + "', which 'tools' does not hold",
                          "tool_choice");
    }
  }
  if (!has_tools && out.choice == ToolChoice::kNone) return std::optional<ToolRequest>();
  return std::optional<ToolRequest>(std::move(out));
}

std::optional<ToolCallFormat> tool_call_format(std::string_view parser) {
  if (parser == "hermes") return ToolCallFormat{"<tool_call>\n", "arguments", "\n</tool_call>", "", "\n", ""};
  if (parser == "llama3_json") return ToolCallFormat{"", "parameters", "", "", "; ", ""};
  if (parser == "mistral") return ToolCallFormat{"", "arguments", "", "[TOOL_CALLS] [", ", ", "]"};
  return std::nullopt;
}

StructuredOutputs forced_constraint(const ToolRequest& tools, const ToolCallFormat& format) {
  // One tag per callable function: its name written out, its parameters schema as the arguments.
  ordered tags = ordered::array();
  for (const ordered& t : tools.tools) {
    const ordered& fn = t["function"];
    if (tools.choice == ToolChoice::kNamed && fn["name"] != tools.named_function) continue;
    const std::string name = fn["name"].dump();
    tags.push_back(
        {{"type", "tag"},
         {"begin", format.call_begin + "{\"name\": " + name + ", \"" + format.arguments_key + "\": "},
         {"content", {{"type", "json_schema"}, {"json_schema", parameters_of(fn)}, {"max_whitespace_cnt", 1}}},
         {"end", "}" + format.call_end}});
  }
  const bool one_call = tools.choice == ToolChoice::kNamed || !tools.parallel_tool_calls;
  const ordered calls = {{"type", "tags_with_separator"},
                         {"tags", std::move(tags)},
                         {"separator", format.separator},
                         {"at_least_one", true},
                         {"stop_after_first", one_call}};
  const bool bracketed = !format.list_begin.empty() || !format.list_end.empty();
  const ordered list = {{"type", "sequence"},
                        {"elements",
                         {{{"type", "const_string"}, {"value", format.list_begin}},
                          calls,
                          {{"type", "const_string"}, {"value", format.list_end}}}}};
  StructuredOutputs out;
  out.kind = StructuredKind::kStructuralTag;
  out.text = ordered{{"type", "structural_tag"}, {"format", bracketed ? list : calls}}.dump();
  return out;
}

}  // namespace vosti
