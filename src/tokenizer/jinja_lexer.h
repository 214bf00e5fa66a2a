// Lexer for the chat-template interpreter: template source -> text and tag tokens, with
// Jinja2's whitespace rules under HF's settings (trim_blocks, lstrip_blocks, `-`/`+`
// modifiers, comments dropped).
//
// Invariants: the token list ends with kEof; text tokens are never empty.
// Thread safety: a Lexer is used by one thread for one run().
#pragma once

#include <string>
#include <vector>

#include "tokenizer/jinja_ast.h"

namespace vosti::jinja {

struct Token {
  enum Type { kText, kVarBegin, kVarEnd, kBlockBegin, kBlockEnd, kName, kString, kInt, kFloat, kOp, kEof };
  Type type = kEof;
  std::string value;
  size_t pos = 0;  // byte offset in the normalized source
};

// CRLF/CR -> LF, and one trailing newline removed (Jinja2's keep_trailing_newline=False).
std::string normalize_source(const std::string& source);

class Lexer {
 public:
  // REQUIRES: src was passed through normalize_source.
  explicit Lexer(const std::string& src) : src_(src) {}
  // Throws TemplateError on an unterminated tag, comment or string.
  std::vector<Token> run();

 private:
  size_t lex_tag(size_t pos, bool variable);
  size_t lex_token(size_t pos);
  size_t lex_string(size_t pos);
  void emit(Token::Type type, std::string value, size_t pos);
  [[noreturn]] void fail(const std::string& message, size_t pos) const;

  const std::string& src_;
  std::vector<Token> tokens_;
};

}  // namespace vosti::jinja
