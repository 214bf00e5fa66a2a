// The structured-output fields of an OpenAI request body: OpenAI's response_format (text,
// json_object, json_schema), vLLM's structured_outputs {json, regex, choice, grammar, json_object}
// and its older guided_json / guided_regex / guided_choice / guided_grammar. At most one
// constraint per request; a JSON schema keeps the key order sent (its "properties" order is the
// output's), a string schema is kept as sent. What needs the vocabulary (compiling the grammar,
// xgrammar's own errors) is the engine's (structured/grammar.h).
// Thread safety: pure functions; never throws (fuzzed with the rest of the request parser).
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string_view>
#include <variant>

#include "server/api_error.h"
#include "structured/structured_outputs.h"

namespace vosti {

// The constraint of request object `doc` (its text `body`), none, or a 400 naming the field.
std::variant<std::optional<StructuredOutputs>, ApiError> parse_structured_fields(const nlohmann::json& doc,
                                                                                 std::string_view body);

}  // namespace vosti
