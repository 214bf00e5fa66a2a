#include "structured/structured_outputs.h"

#include <algorithm>
#include <cstdio>
#include <utility>
#include <vector>
#include <nlohmann/json.hpp>

namespace vosti {
namespace {

// Keywords xgrammar would ignore (it logs a warning and compiles a looser grammar): refused, so
// that no output is ever called valid under a schema it was not held to.
constexpr const char* kUnsupportedKeywords[] = {
    "not",         "if",       "then",        "else",       "dependentRequired", "dependentSchemas",
    "uniqueItems", "contains", "minContains", "maxContains"};
// The string formats xgrammar turns into grammars (json_schema_converter.cc).
constexpr const char* kSupportedFormats[] = {"date",         "date-time",    "duration",
                                             "email",        "hostname",     "ipv4",
                                             "ipv6",         "json-pointer", "relative-json-pointer",
                                             "time",         "uri",          "uri-reference",
                                             "uri-template", "uuid"};

template <size_t N>
bool is_one_of(const std::string& s, const char* const (&list)[N]) {
  return std::any_of(std::begin(list), std::end(list), [&](const char* x) { return s == x; });
}

// INVALID_ARGUMENT naming the first unsupported keyword under `node` and where it is ("/" the root).
Status check_schema_node(const nlohmann::json& node, const std::string& path) {
  if (node.is_array()) {
    for (size_t i = 0; i < node.size(); ++i)
      VOSTI_RETURN_IF_ERROR(check_schema_node(node[i], path + "/" + std::to_string(i)));
    return Status();
  }
  if (!node.is_object()) return Status();
  const std::string where = path.empty() ? "/" : path;
  for (const auto& [key, value] : node.items()) {
    if (is_one_of(key, kUnsupportedKeywords))
      return invalid_argument("structured outputs: invalid json schema: the keyword '" + key + "' (at " + where +
                              ") is not supported; remove it");
    if (key == "format" && value.is_string() && !is_one_of(value.get<std::string>(), kSupportedFormats))
      return invalid_argument("structured outputs: invalid json schema: the string format '" +
                              value.get<std::string>() + "' (at " + where + ") is not supported");
    if (key == "multipleOf" && value.is_number() && !value.is_number_integer())
      return invalid_argument("structured outputs: invalid json schema: a non-integer 'multipleOf' (at " + where +
                              ") is not supported");
    // "properties", "$defs" and the like hold schemas under arbitrary names: a property called
    // "not" is not the keyword.
    const bool named_schemas = key == "properties" || key == "patternProperties" || key == "$defs" ||
                               key == "definitions" || key == "dependentSchemas";
    if (named_schemas && value.is_object()) {
      for (const auto& [name, sub] : value.items())
        VOSTI_RETURN_IF_ERROR(check_schema_node(sub, path + "/" + key + "/" + name));
    } else if (key != "enum" && key != "const" && key != "default" && key != "examples") {
      VOSTI_RETURN_IF_ERROR(check_schema_node(value, path + "/" + key));
    }
  }
  return Status();
}

}  // namespace

bool json_deeper_than(const nlohmann::json& j, int max_depth) {
  std::vector<std::pair<const nlohmann::json*, int>> stack = {{&j, 0}};
  while (!stack.empty()) {
    const auto [node, depth] = stack.back();
    stack.pop_back();
    if (!node->is_structured()) continue;
    if (depth >= max_depth) return true;
    for (const auto& child : *node) stack.emplace_back(&child, depth + 1);
  }
  return false;
}

Status check_json_schema(const std::string& schema_text) {
  const nlohmann::json schema = nlohmann::json::parse(schema_text, nullptr, /*allow_exceptions=*/false);
  if (!schema.is_discarded() && json_deeper_than(schema, kMaxSchemaDepth))
    return invalid_argument("structured outputs: invalid json schema: it nests deeper than " +
                            std::to_string(kMaxSchemaDepth) + " levels");
  if (schema.is_discarded()) return invalid_argument("structured outputs: invalid json schema: it is not valid JSON");
  if (!schema.is_object() && !schema.is_boolean())
    return invalid_argument("structured outputs: invalid json schema: it must be an object");
  return check_schema_node(schema, "");
}

const char* structured_kind_name(StructuredKind k) {
  switch (k) {
    case StructuredKind::kJsonSchema:
      return "json";
    case StructuredKind::kJsonObject:
      return "json_object";
    case StructuredKind::kRegex:
      return "regex";
    case StructuredKind::kChoice:
      return "choice";
    case StructuredKind::kGrammar:
      return "grammar";
    case StructuredKind::kStructuralTag:
      return "structural_tag";
  }
  return "?";
}

Status StructuredOutputs::validate() const {
  switch (kind) {
    case StructuredKind::kJsonSchema:
      if (text.empty()) return invalid_argument("structured outputs: the JSON schema is empty");
      return check_json_schema(text);
    case StructuredKind::kJsonObject:
      break;
    case StructuredKind::kRegex:
      if (text.empty()) return invalid_argument("structured outputs: the regex is empty");
      break;
    case StructuredKind::kGrammar:
      if (text.empty()) return invalid_argument("structured outputs: the grammar is empty");
      break;
    case StructuredKind::kStructuralTag:
      if (text.empty()) return invalid_argument("structured outputs: the structural tag is empty");
      break;
    case StructuredKind::kChoice:
      if (choices.empty()) return invalid_argument("structured outputs: the choice list is empty");
      for (const std::string& c : choices)
        if (c.empty()) return invalid_argument("structured outputs: a choice is the empty string");
      break;
  }
  return Status();
}

std::string StructuredOutputs::cache_key() const {
  std::string key = structured_kind_name(kind);
  key += '\n';
  key += kind == StructuredKind::kChoice ? choice_grammar() : text;
  return key;
}

std::string StructuredOutputs::choice_grammar() const {
  std::string out = "root ::= ";
  for (size_t i = 0; i < choices.size(); ++i) {
    if (i > 0) out += " | ";
    out += '"';
    for (const unsigned char c : choices[i]) {
      if (c == '"' || c == '\\') {
        out += '\\';
        out += static_cast<char>(c);
      } else if (c == '\n') {
        out += "\\n";
      } else if (c == '\r') {
        out += "\\r";
      } else if (c == '\t') {
        out += "\\t";
      } else if (c < 0x20) {
        char buf[8];
        std::snprintf(buf, sizeof(buf), "\\x%02x", c);
        out += buf;
      } else {
        out += static_cast<char>(c);
      }
    }
    out += '"';
  }
  return out;
}

}  // namespace vosti
