// The structured-output fields of an OpenAI request body (server/structured_request.h).
#include "server/structured_request.h"

#include <algorithm>

namespace vosti {
namespace {

using json = nlohmann::json;

// The first error of a parse, with the parameter it names (FieldReader's shape).
class StructuredErrors {
 public:
  void fail(std::string message, std::string param) {
    if (!error_) error_ = bad_request(std::move(message), std::move(param));
  }
  bool failed() const { return error_.has_value(); }
  const std::optional<ApiError>& error() const { return error_; }

 private:
  std::optional<ApiError> error_;
};

// Present and not null.
const json* find(const json& doc, const char* name) {
  auto it = doc.find(name);
  return it == doc.end() || it->is_null() ? nullptr : &*it;
}

// One structured-output constraint from its JSON value (`param` names it in errors): a schema is
// an object or a JSON string holding one; regex and grammar strings; choice a list of strings.
std::optional<StructuredOutputs> read_constraint(StructuredErrors& r, StructuredKind kind, const json& v,
                                                 const std::string& param) {
  StructuredOutputs out;
  out.kind = kind;
  switch (kind) {
    case StructuredKind::kJsonSchema: {
      json schema = v;
      if (v.is_string()) {
        schema = json::parse(v.get<std::string>(), nullptr, /*allow_exceptions=*/false);
        if (schema.is_discarded()) {
          r.fail("'" + param + "' is not valid JSON: give a JSON schema (an object)", param);
          return std::nullopt;
        }
      }
      if (!schema.is_object() && !schema.is_boolean()) {
        r.fail("'" + param + "' must be a JSON schema (an object)", param);
        return std::nullopt;
      }
      if (json_deeper_than(schema, kMaxSchemaDepth)) {
        r.fail("'" + param + "' nests deeper than " + std::to_string(kMaxSchemaDepth) + " levels", param);
        return std::nullopt;
      }
      // A string is kept as given; an object is written again in its keys' order by
      // schema_in_order() (the order of "properties" is the order of the output's keys).
      out.text = v.is_string() ? v.get<std::string>() : schema.dump();
      break;
    }
    case StructuredKind::kJsonObject:
      break;
    case StructuredKind::kRegex:
    case StructuredKind::kGrammar:
    case StructuredKind::kStructuralTag:  // never read from a request (the server's tool calls make it)
      if (!v.is_string() || v.get<std::string>().empty()) {
        r.fail("'" + param + "' must be a non-empty string", param);
        return std::nullopt;
      }
      out.text = v.get<std::string>();
      break;
    case StructuredKind::kChoice:
      if (!v.is_array() || v.empty()) {
        r.fail("'" + param + "' must be a non-empty array of strings", param);
        return std::nullopt;
      }
      for (const json& c : v) {
        if (!c.is_string() || c.get<std::string>().empty()) {
          r.fail("'" + param + "' must hold non-empty strings only", param);
          return std::nullopt;
        }
        out.choices.push_back(c.get<std::string>());
      }
      break;
  }
  return out;
}

// OpenAI's response_format: text (nothing), json_object, json_schema {name, schema, strict?}.
std::optional<StructuredOutputs> read_response_format(StructuredErrors& r, const json& f) {
  const char* kParam = "response_format";
  if (!f.is_object() || !f.contains("type") || !f["type"].is_string()) {
    r.fail("'response_format' must be an object with a 'type': \"text\", \"json_object\" or \"json_schema\"", kParam);
    return std::nullopt;
  }
  const std::string type = f["type"].get<std::string>();
  if (type == "text") return std::nullopt;
  if (type == "json_object") return read_constraint(r, StructuredKind::kJsonObject, f, kParam);
  if (type != "json_schema") {
    r.fail("'response_format.type' \"" + type + "\" is not supported (text, json_object, json_schema)",
           "response_format.type");
    return std::nullopt;
  }
  const auto js = f.find("json_schema");
  if (js == f.end() || !js->is_object()) {
    r.fail("'response_format.json_schema' must be an object: {\"name\": ..., \"schema\": {...}}",
           "response_format.json_schema");
    return std::nullopt;
  }
  const auto schema = js->find("schema");
  if (schema == js->end() || schema->is_null()) {
    r.fail("'response_format.json_schema.schema' is required: the JSON schema the output must match",
           "response_format.json_schema.schema");
    return std::nullopt;
  }
  return read_constraint(r, StructuredKind::kJsonSchema, *schema, "response_format.json_schema.schema");
}

// The JSON schema object at `path` (dot-separated) of `body`, with its keys in the order sent:
// `json` sorts them, and a schema's "properties" order is the order the output's keys come in.
std::optional<std::string> schema_in_order(std::string_view body, const std::string& path) {
  const nlohmann::ordered_json doc =
      nlohmann::ordered_json::parse(body.begin(), body.end(), nullptr, /*allow_exceptions=*/false);
  const nlohmann::ordered_json* node = &doc;
  size_t at = 0;
  while (at <= path.size()) {
    const size_t dot = std::min(path.find('.', at), path.size());
    const std::string key = path.substr(at, dot - at);
    if (!node->is_object() || !node->contains(key)) return std::nullopt;
    node = &(*node)[key];
    at = dot + 1;
  }
  if (!node->is_object()) return std::nullopt;
  return node->dump();
}

// vLLM's structured_outputs {json | regex | choice | grammar | json_object}, the older guided_*
// fields, and response_format: at most one constraint in all. Returns the parameter path of the
// constraint taken ("" when none).
std::string parse_structured(const json& doc, StructuredErrors& r, std::optional<StructuredOutputs>& structured) {
  struct Source {
    const char* param;
    StructuredKind kind;
  };
  static constexpr Source kGuided[] = {{"guided_json", StructuredKind::kJsonSchema},
                                       {"guided_regex", StructuredKind::kRegex},
                                       {"guided_choice", StructuredKind::kChoice},
                                       {"guided_grammar", StructuredKind::kGrammar}};
  static constexpr Source kStructured[] = {{"json", StructuredKind::kJsonSchema},
                                           {"regex", StructuredKind::kRegex},
                                           {"choice", StructuredKind::kChoice},
                                           {"grammar", StructuredKind::kGrammar}};
  std::vector<std::string> given;
  auto take = [&](std::optional<StructuredOutputs> s, const std::string& param) {
    if (r.failed()) return;
    given.push_back(param);
    if (given.size() > 1)
      return r.fail("give one output constraint, not several ('" + given[0] + "' and '" + param + "')", param);
    structured = std::move(s);
  };
  if (const json* f = find(doc, "response_format")) {
    std::optional<StructuredOutputs> s = read_response_format(r, *f);
    if (s)
      take(std::move(s),
           s->kind == StructuredKind::kJsonSchema ? "response_format.json_schema.schema" : "response_format");
  }
  for (const Source& g : kGuided)
    if (const json* v = find(doc, g.param)) take(read_constraint(r, g.kind, *v, g.param), g.param);
  if (const json* so = find(doc, "structured_outputs")) {
    if (!so->is_object()) {
      r.fail("'structured_outputs' must be an object with one of json, regex, choice, grammar, json_object",
             "structured_outputs");
      return "";
    }
    for (const auto& [k, v] : so->items()) {
      if (v.is_null()) continue;
      const std::string param = "structured_outputs." + k;
      if (k == "json_object") {
        if (!v.is_boolean()) {
          r.fail("'" + param + "' must be a boolean", param);
          return "";
        }
        if (v.get<bool>()) take(read_constraint(r, StructuredKind::kJsonObject, v, param), param);
        continue;
      }
      const Source* found = nullptr;
      for (const Source& s : kStructured)
        if (k == s.param) found = &s;
      if (found == nullptr) {
        r.fail("'" + param + "' is not supported (json, regex, choice, grammar, json_object)", param);
        return "";
      }
      take(read_constraint(r, found->kind, v, param), param);
    }
  }
  return given.empty() || r.failed() ? "" : given[0];
}

}  // namespace

std::variant<std::optional<StructuredOutputs>, ApiError> parse_structured_fields(const json& doc,
                                                                                 std::string_view body) {
  StructuredErrors r;
  std::optional<StructuredOutputs> structured;
  const std::string constraint = parse_structured(doc, r, structured);
  if (r.failed()) return *r.error();
  if (structured && structured->kind == StructuredKind::kJsonSchema) {
    if (std::optional<std::string> text = schema_in_order(body, constraint)) structured->text = *text;
  }
  return structured;
}

}  // namespace vosti
