// StructuredOutputs: what a request's output must match (vLLM's StructuredOutputsParams): a JSON
// schema, any JSON object, a regular expression, one of a list of strings, an EBNF grammar
// (xgrammar's GBNF dialect), or an xgrammar structural tag (the server's forced tool calls:
// server/tool_request.h). The engine compiles it once per distinct value (GrammarCache) and
// masks every sampled row with the tokens it allows next (sample/token_bitmask.h).
// Thread safety: a value type.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "core/status.h"

namespace vosti {

enum class StructuredKind : uint8_t { kJsonSchema, kJsonObject, kRegex, kChoice, kGrammar, kStructuralTag };
// "json", "json_object", "regex", "choice", "grammar", "structural_tag"
const char* structured_kind_name(StructuredKind k);

struct StructuredOutputs {
  StructuredKind kind = StructuredKind::kJsonObject;
  // kJsonSchema: the schema's JSON text; kRegex: the pattern; kGrammar: EBNF; kStructuralTag: the
  // tag's JSON text ({"type": "structural_tag", "format": {...}}, xgrammar's format)
  std::string text;
  std::vector<std::string> choices;  // kChoice: the allowed outputs (non-empty, each non-empty)

  // INVALID_ARGUMENT naming what is missing (an empty schema, pattern, grammar, tag or choice
  // list) or, for a JSON schema, check_json_schema's refusal.
  Status validate() const;
  // The grammar's identity: equal keys compile to the same grammar (the cache's key).
  std::string cache_key() const;
  // kChoice as an EBNF grammar: root ::= "a" | "b", each string escaped.
  std::string choice_grammar() const;
};

// Schemas nest at most this deep (the checks and xgrammar's parser recurse).
inline constexpr int kMaxSchemaDepth = 64;

// Whether `j` nests deeper than `max_depth` arrays/objects (an iterative walk: no recursion).
bool json_deeper_than(const nlohmann::json& j, int max_depth);

// A JSON schema's text: valid JSON, at most kMaxSchemaDepth deep, an object, and no keyword xgrammar would ignore (not,
// if/then/ else, dependentRequired/-Schemas, uniqueItems, contains, min/maxContains, a string format it has no grammar
// for, a non-integer multipleOf). INVALID_ARGUMENT naming the keyword and its path.
Status check_json_schema(const std::string& schema_text);

}  // namespace vosti
