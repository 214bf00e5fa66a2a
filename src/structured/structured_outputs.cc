#include "structured/structured_outputs.h"

#include <cstdio>

namespace vosti {

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
  }
  return "?";
}

Status StructuredOutputs::validate() const {
  switch (kind) {
    case StructuredKind::kJsonSchema:
      if (text.empty()) return invalid_argument("structured outputs: the JSON schema is empty");
      break;
    case StructuredKind::kJsonObject:
      break;
    case StructuredKind::kRegex:
      if (text.empty()) return invalid_argument("structured outputs: the regex is empty");
      break;
    case StructuredKind::kGrammar:
      if (text.empty()) return invalid_argument("structured outputs: the grammar is empty");
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
