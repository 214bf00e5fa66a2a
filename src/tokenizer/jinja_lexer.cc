// Lexer for the chat-template interpreter (see jinja_ast.h and jinja_lexer.h).
#include "tokenizer/jinja_lexer.h"

#include <cctype>
#include <cstring>

#include "tokenizer/utf8.h"

namespace vosti::jinja {
namespace {

// Python's str.isspace for the characters templates contain.
bool is_space_at(const std::string& s, size_t pos, size_t* len) {
  const auto c = static_cast<unsigned char>(s[pos]);
  if (c == ' ' || (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x1F)) {
    *len = 1;
    return true;
  }
  if (c < 0x80) return false;
  size_t p = pos;
  const char32_t cp = next_code_point(s, p);
  *len = p - pos;
  return is_unicode_whitespace(cp);
}

size_t skip_spaces(const std::string& s, size_t pos) {
  size_t len = 0;
  while (pos < s.size() && is_space_at(s, pos, &len)) pos += len;
  return pos;
}

std::string rstrip(const std::string& s) {
  size_t end = s.size();
  while (end > 0) {
    size_t start = end - 1;
    while (start > 0 && (static_cast<unsigned char>(s[start]) & 0xC0) == 0x80) --start;
    size_t len = 0;
    if (!is_space_at(s, start, &len)) break;
    end = start;
  }
  return s.substr(0, end);
}

bool all_space(const std::string& s, size_t from) {
  size_t len = 0;
  for (size_t p = from; p < s.size(); p += len) {
    if (!is_space_at(s, p, &len)) return false;
  }
  return from < s.size();
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

std::string normalize_source(const std::string& source) {
  std::string out;
  out.reserve(source.size());
  for (size_t i = 0; i < source.size(); ++i) {
    if (source[i] == '\r') {
      out.push_back('\n');
      if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
    } else {
      out.push_back(source[i]);
    }
  }
  if (!out.empty() && out.back() == '\n') out.pop_back();  // keep_trailing_newline=False
  return out;
}

std::vector<Token> Lexer::run() {
  size_t pos = 0;
  bool line_starting = true;
  while (pos < src_.size()) {
    size_t p = pos;
    while (true) {
      p = src_.find('{', p);
      if (p == std::string::npos || p + 1 >= src_.size()) break;
      const char k = src_[p + 1];
      if (k == '{' || k == '%' || k == '#') break;
      ++p;
    }
    if (p == std::string::npos || p + 1 >= src_.size()) {
      emit(Token::kText, src_.substr(pos), pos);
      break;
    }
    const char kind = src_[p + 1];
    const char sign = p + 2 < src_.size() && (src_[p + 2] == '-' || src_[p + 2] == '+') ? src_[p + 2] : 0;
    std::string text = src_.substr(pos, p - pos);
    if (sign == '-') {
      text = rstrip(text);
    } else if (sign != '+' && kind != '{') {  // lstrip_blocks: blocks and comments, not variables
      const size_t line_start = text.rfind('\n') == std::string::npos ? 0 : text.rfind('\n') + 1;
      if ((line_start > 0 || line_starting) && all_space(text, line_start)) text.resize(line_start);
    }
    if (!text.empty()) emit(Token::kText, std::move(text), pos);
    size_t body = p + 2 + (sign ? 1 : 0);
    if (kind == '#') {
      const size_t q = src_.find("#}", body);
      if (q == std::string::npos) fail("missing end of comment tag '#}'", p);
      size_t after = q + 2;
      if (q > body && src_[q - 1] == '-')
        after = skip_spaces(src_, after);
      else if (!(q > body && src_[q - 1] == '+') && after < src_.size() && src_[after] == '\n')
        ++after;
      line_starting = after > 0 && src_[after - 1] == '\n';
      pos = after;
      continue;
    }
    emit(kind == '{' ? Token::kVarBegin : Token::kBlockBegin, "", p);
    pos = lex_tag(body, kind == '{');
    line_starting = pos > 0 && src_[pos - 1] == '\n';
  }
  emit(Token::kEof, "", src_.size());
  return std::move(tokens_);
}

// Lexes expression tokens up to and including the tag end; returns the offset after it.
size_t Lexer::lex_tag(size_t pos, bool variable) {
  const char* close = variable ? "}}" : "%}";
  while (true) {
    pos = skip_spaces(src_, pos);
    if (pos >= src_.size()) fail(std::string("missing end of tag '") + close + "'", pos);
    const bool minus = src_.compare(pos, 3, std::string("-") + close) == 0;
    const bool plus = !variable && src_.compare(pos, 3, std::string("+") + close) == 0;
    if (minus || plus || src_.compare(pos, 2, close) == 0) {
      emit(variable ? Token::kVarEnd : Token::kBlockEnd, "", pos);
      size_t after = pos + (minus || plus ? 3 : 2);
      if (minus)
        after = skip_spaces(src_, after);
      else if (!variable && !plus && after < src_.size() && src_[after] == '\n')
        ++after;  // trim_blocks
      return after;
    }
    pos = lex_token(pos);
  }
}

size_t Lexer::lex_token(size_t pos) {
  const char c = src_[pos];
  if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
    size_t e = pos;
    while (e < src_.size() && (std::isalnum(static_cast<unsigned char>(src_[e])) || src_[e] == '_')) ++e;
    emit(Token::kName, src_.substr(pos, e - pos), pos);
    return e;
  }
  if (std::isdigit(static_cast<unsigned char>(c))) {
    size_t e = pos;
    while (e < src_.size() && (std::isdigit(static_cast<unsigned char>(src_[e])) || src_[e] == '_')) ++e;
    bool is_float = false;
    if (e + 1 < src_.size() && src_[e] == '.' && std::isdigit(static_cast<unsigned char>(src_[e + 1]))) {
      is_float = true;
      ++e;
      while (e < src_.size() && std::isdigit(static_cast<unsigned char>(src_[e]))) ++e;
    }
    if (e < src_.size() && (src_[e] == 'e' || src_[e] == 'E')) {  // exponent: 1e20, 2.5e-3
      size_t x = e + 1;
      if (x < src_.size() && (src_[x] == '+' || src_[x] == '-')) ++x;
      if (x < src_.size() && std::isdigit(static_cast<unsigned char>(src_[x]))) {
        is_float = true;
        e = x;
        while (e < src_.size() && std::isdigit(static_cast<unsigned char>(src_[e]))) ++e;
      }
    }
    std::string digits;
    for (size_t i = pos; i < e; ++i)
      if (src_[i] != '_') digits.push_back(src_[i]);
    emit(is_float ? Token::kFloat : Token::kInt, digits, pos);
    return e;
  }
  if (c == '\'' || c == '"') return lex_string(pos);
  static const char* kOps[] = {"//", "**", "==", "!=", "<=", ">=", "+", "-", "*", "/", "%", "~", "<",
                               ">",  "=",  "(",  ")",  "[",  "]",  "{", "}", ",", ".", ":", "|"};
  for (const char* op : kOps) {
    const size_t n = std::strlen(op);
    if (src_.compare(pos, n, op) == 0) {
      emit(Token::kOp, op, pos);
      return pos + n;
    }
  }
  fail(std::string("unexpected character '") + c + "'", pos);
}

// Python string-literal escapes, as Jinja2 decodes them ("unicode-escape").
size_t Lexer::lex_string(size_t pos) {
  const char quote = src_[pos];
  std::string out;
  size_t i = pos + 1;
  while (true) {
    if (i >= src_.size()) fail("unterminated string literal", pos);
    const char c = src_[i];
    if (c == quote) break;
    if (c != '\\' || i + 1 >= src_.size()) {
      out.push_back(c);
      ++i;
      continue;
    }
    const char e = src_[i + 1];
    i += 2;
    switch (e) {
      case 'n':
        out.push_back('\n');
        break;
      case 't':
        out.push_back('\t');
        break;
      case 'r':
        out.push_back('\r');
        break;
      case '\\':
        out.push_back('\\');
        break;
      case '\'':
        out.push_back('\'');
        break;
      case '"':
        out.push_back('"');
        break;
      case 'a':
        out.push_back('\a');
        break;
      case 'b':
        out.push_back('\b');
        break;
      case 'f':
        out.push_back('\f');
        break;
      case 'v':
        out.push_back('\v');
        break;
      case '\n':
        break;
      case 'x':
      case 'u':
      case 'U': {
        const size_t n = e == 'x' ? 2 : e == 'u' ? 4 : 8;
        char32_t cp = 0;
        for (size_t k = 0; k < n; ++k) {
          const int h = i + k < src_.size() ? hex_value(src_[i + k]) : -1;
          if (h < 0) fail("truncated \\" + std::string(1, e) + " escape in string literal", i - 2);
          cp = cp * 16 + static_cast<char32_t>(h);
        }
        if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) fail("invalid code point escape in string literal", i - 2);
        append_utf8(out, cp);
        i += n;
        break;
      }
      default:
        if (e >= '0' && e <= '7') {
          char32_t cp = static_cast<char32_t>(e - '0');
          for (int k = 0; k < 2 && i < src_.size() && src_[i] >= '0' && src_[i] <= '7'; ++k, ++i)
            cp = cp * 8 + static_cast<char32_t>(src_[i] - '0');
          append_utf8(out, cp);
        } else {
          out.push_back('\\');
          out.push_back(e);
        }
    }
  }
  emit(Token::kString, std::move(out), pos);
  return i + 1;
}

void Lexer::emit(Token::Type type, std::string value, size_t pos) { tokens_.push_back({type, std::move(value), pos}); }

void Lexer::fail(const std::string& message, size_t pos) const {
  throw TemplateError("chat template syntax error at " + describe_position(src_, pos) + ": " + message);
}

std::string describe_position(const std::string& source, size_t pos) {
  size_t line = 1, col = 1;
  for (size_t i = 0; i < pos && i < source.size(); ++i) {
    if (source[i] == '\n') {
      ++line;
      col = 1;
    } else {
      ++col;
    }
  }
  return "line " + std::to_string(line) + ", column " + std::to_string(col);
}

}  // namespace vosti::jinja
