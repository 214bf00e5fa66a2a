#include "tokenizer/split_patterns.h"

#include <oniguruma.h>

#include <string>

#include "tokenizer/utf8.h"

namespace vosti {
namespace {

enum Class : uint8_t { kLetter, kNumber, kSpace, kOther };

// Character classes straight from Oniguruma's Unicode tables, so the native matcher
// agrees with the regex (and with HF, which uses Oniguruma) even where ICU's Unicode
// version differs. The BMP is tabulated once; other planes are looked up per character.
struct OnigClasses {
  int letter = -1, number = -1;
  std::vector<uint8_t> bmp;  // [65536] Class per code point
  OnigClasses() {
    ensure_oniguruma_initialized();
    const std::string l = "L", n = "N";
    OnigEncoding enc = ONIG_ENCODING_UTF8;
    letter = ONIGENC_PROPERTY_NAME_TO_CTYPE(enc, reinterpret_cast<OnigUChar*>(const_cast<char*>(l.data())),
                                            reinterpret_cast<OnigUChar*>(const_cast<char*>(l.data() + l.size())));
    number = ONIGENC_PROPERTY_NAME_TO_CTYPE(enc, reinterpret_cast<OnigUChar*>(const_cast<char*>(n.data())),
                                            reinterpret_cast<OnigUChar*>(const_cast<char*>(n.data() + n.size())));
    bmp.resize(0x10000);
    for (char32_t cp = 0; cp < 0x10000; ++cp) bmp[cp] = lookup(cp);
  }
  uint8_t lookup(char32_t cp) const {
    OnigEncoding enc = ONIG_ENCODING_UTF8;
    if (ONIGENC_IS_CODE_CTYPE(enc, cp, ONIGENC_CTYPE_SPACE)) return kSpace;
    if (letter >= 0 && ONIGENC_IS_CODE_CTYPE(enc, cp, static_cast<unsigned>(letter))) return kLetter;
    if (number >= 0 && ONIGENC_IS_CODE_CTYPE(enc, cp, static_cast<unsigned>(number))) return kNumber;
    return kOther;
  }
};

const OnigClasses& onig_classes() {
  static const OnigClasses classes;
  return classes;
}

Class classify(char32_t cp) {
  if (cp < 0x80) {
    if ((cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z')) return kLetter;
    if (cp >= '0' && cp <= '9') return kNumber;
    if (cp == ' ' || (cp >= 0x09 && cp <= 0x0D)) return kSpace;
    return kOther;
  }
  const OnigClasses& c = onig_classes();
  return static_cast<Class>(cp < 0x10000 ? c.bmp[cp] : c.lookup(cp));
}

// The text as (byte offset, class) per code point, plus an end sentinel.
struct Chars {
  std::vector<size_t> offset;  // [num_chars + 1]
  std::vector<Class> cls;      // [num_chars]
  explicit Chars(std::string_view text) {
    offset.reserve(text.size() + 1);
    cls.reserve(text.size());
    size_t pos = 0;
    while (pos < text.size()) {
      offset.push_back(pos);
      cls.push_back(classify(next_code_point(text, pos)));
    }
    offset.push_back(text.size());
  }
  size_t size() const { return cls.size(); }
};

// Length in characters of the contraction at i ('s 't 're 've 'm 'll 'd), or 0.
size_t contraction(std::string_view text, const Chars& c, size_t i) {
  if (text[c.offset[i]] != '\'' || i + 1 >= c.size()) return 0;
  const char a = text[c.offset[i + 1]];
  if (a == 's' || a == 't' || a == 'm' || a == 'd') return 2;
  if (i + 2 < c.size()) {
    const char b = text[c.offset[i + 2]];
    if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return 3;
  }
  return 0;
}

// ` ?X+` at i: characters matched, or 0.
size_t space_then_run(std::string_view text, const Chars& c, size_t i, Class x) {
  size_t j = i;
  if (text[c.offset[i]] == ' ' && i + 1 < c.size() && c.cls[i + 1] == x) ++j;
  if (c.cls[j] != x) return 0;
  while (j < c.size() && c.cls[j] == x) ++j;
  return j - i;
}

size_t match_at(std::string_view text, const Chars& c, size_t i) {
  if (size_t n = contraction(text, c, i)) return n;
  for (Class x : {kLetter, kNumber, kOther}) {
    if (size_t n = space_then_run(text, c, i, x)) return n;
  }
  // \s+(?!\S), then \s+.
  size_t j = i;
  while (j < c.size() && c.cls[j] == kSpace) ++j;
  if (j == i) return 0;
  if (j == c.size() || j - i == 1) return j - i;  // at the end, or a single space before a non-space (\s+ fallback)
  return j - i - 1;                               // leave the last space to join the next word
}

}  // namespace

namespace {

// Left-to-right leftmost matches of a pattern whose matcher length_at(c, i) returns the
// length in code points of the match starting at code point i.
template <typename LengthAt>
std::vector<RegexMatch> split_matches(std::string_view text, LengthAt length_at) {
  const Chars c(text);
  std::vector<RegexMatch> out;
  size_t i = 0;
  while (i < c.size()) {
    const size_t n = length_at(c, i);
    if (n == 0) {  // unreachable: every character is matched by some alternative
      ++i;
      continue;
    }
    out.push_back({c.offset[i], c.offset[i + n]});
    i += n;
  }
  return out;
}

}  // namespace

std::vector<RegexMatch> gpt2_split_matches(std::string_view text) {
  return split_matches(text, [&](const Chars& c, size_t i) { return match_at(text, c, i); });
}

namespace {

bool is_newline(std::string_view text, const Chars& c, size_t i) {
  const char b = text[c.offset[i]];
  return b == '\r' || b == '\n';
}

// (?i:'s|'t|'re|'ve|'m|'ll|'d): characters matched, or 0. U+017F (long s) case-folds to s.
size_t contraction_ci(std::string_view text, const Chars& c, size_t i) {
  if (text[c.offset[i]] != '\'' || i + 1 >= c.size()) return 0;
  auto lower = [&](size_t k) -> char32_t {
    size_t pos = c.offset[k];
    const char32_t cp = next_code_point(text, pos);
    if (cp == 0x17F) return 's';
    return (cp >= 'A' && cp <= 'Z') ? cp + 32 : cp;
  };
  const char32_t a = lower(i + 1);
  if (a == 's' || a == 't' || a == 'm' || a == 'd') return 2;
  if (i + 2 < c.size()) {
    const char32_t b = lower(i + 2);
    if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return 3;
  }
  return 0;
}

size_t llama3_match_at(std::string_view text, const Chars& c, size_t i, int max_digits) {
  const size_t n = c.size();
  if (size_t k = contraction_ci(text, c, i)) return k;
  // [^\r\n\p{L}\p{N}]?\p{L}+
  {
    size_t j = i;
    if (c.cls[i] != kLetter && c.cls[i] != kNumber && !is_newline(text, c, i) && i + 1 < n && c.cls[i + 1] == kLetter)
      ++j;
    if (c.cls[j] == kLetter) {
      while (j < n && c.cls[j] == kLetter) ++j;
      return j - i;
    }
  }
  // \p{N}{1,max_digits}
  if (c.cls[i] == kNumber) {
    size_t j = i;
    while (j < n && c.cls[j] == kNumber && static_cast<int>(j - i) < max_digits) ++j;
    return j - i;
  }
  // ' ?[^\s\p{L}\p{N}]+[\r\n]*'
  {
    size_t j = i;
    if (text[c.offset[i]] == ' ' && i + 1 < n && c.cls[i + 1] == kOther) ++j;
    if (c.cls[j] == kOther) {
      while (j < n && c.cls[j] == kOther) ++j;
      while (j < n && is_newline(text, c, j)) ++j;
      return j - i;
    }
  }
  size_t run = i;
  while (run < n && c.cls[run] == kSpace) ++run;
  if (run == i) return 0;
  // \s*[\r\n]+: up to and including the last newline of the whitespace run.
  for (size_t k = run; k > i; --k) {
    if (is_newline(text, c, k - 1)) return k - i;
  }
  // \s+(?!\S), then \s+.
  if (run == n || run - i == 1) return run - i;
  return run - i - 1;
}

}  // namespace

std::vector<RegexMatch> llama3_split_matches(std::string_view text, int max_digits) {
  return split_matches(text, [&](const Chars& c, size_t i) { return llama3_match_at(text, c, i, max_digits); });
}

std::vector<RegexMatch> number_char_matches(std::string_view text) {
  std::vector<RegexMatch> out;
  size_t pos = 0;
  while (pos < text.size()) {
    const size_t start = pos;
    const char32_t cp = next_code_point(text, pos);
    if (classify(cp) == kNumber) out.push_back({start, pos});
  }
  return out;
}

}  // namespace vosti
