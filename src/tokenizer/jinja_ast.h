// The chat-template interpreter's syntax tree and parser: the Jinja2 subset that real
// chat templates use (output, if/elif/else, for with loop.* and else, set (names,
// namespace attributes, blocks), break/continue, {% generation %}, comments; the full
// expression grammar with filters, tests, calls, slicing, ~, in, is, conditionals),
// lexed with HF's environment settings: trim_blocks=True, lstrip_blocks=True, {%- -%}
// whitespace control, newlines normalized and one trailing newline dropped.
//
// Invariants: parse() either returns a complete tree or throws TemplateError naming
// the unsupported construct or syntax problem and its line:column.
// Thread safety: a parsed tree is immutable.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tokenizer/jinja_value.h"

namespace vosti::jinja {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
  enum class Kind {
    kLiteral,
    kName,
    kList,
    kTuple,
    kDict,
    kAttr,
    kIndex,
    kSlice,
    kCall,
    kFilter,
    kTest,
    kNeg,
    kPos,
    kNot,
    kBinary,
    kAnd,
    kOr,
    kCompare,
    kCondition,
  };
  Kind kind = Kind::kLiteral;
  size_t pos = 0;             // byte offset in the template source
  Value literal;              // kLiteral
  std::string name;           // kName; kAttr attribute; kFilter/kTest name; kBinary/kCompare operator
  std::vector<ExprPtr> args;  // operands; kCall: callee then positional args; kFilter/kTest: subject then args;
                              // kDict: key, value, key, value...; kSlice: object, start, stop, step (null when omitted)
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
  bool negated = false;  // kTest: `is not`
};

struct Node {
  enum class Kind { kText, kOutput, kIf, kFor, kSet, kSetBlock, kBreak, kContinue, kScope };
  Kind kind = Kind::kText;
  size_t pos = 0;
  std::string text;  // kText
  ExprPtr expr;      // kOutput value, kSet value, kFor iterable
  std::vector<std::string>
      targets;  // kSet/kSetBlock: name, or {object, attribute} when attribute_target; kFor: loop variables
  bool attribute_target = false;            // kSet: `set ns.attr = ...`
  ExprPtr filter;                           // kFor: `for x in xs if cond`
  std::vector<ExprPtr> conditions;          // kIf: one per if/elif branch
  std::vector<std::vector<Node>> branches;  // kIf: bodies (one more than conditions when there is an else)
  std::vector<Node> body;                   // kFor, kSetBlock, kScope
  std::vector<Node> else_body;              // kFor
};

struct ParsedTemplate {
  std::string source;  // after newline normalization
  std::vector<Node> nodes;
};

// Parses `source`. Throws TemplateError.
ParsedTemplate parse_template(const std::string& source);
// "line L, column C" of a byte offset in `source`.
std::string describe_position(const std::string& source, size_t pos);

}  // namespace vosti::jinja
