#include "tokenizer/added_vocabulary.h"

#include <unicode/uchar.h>

#include "tokenizer/utf8.h"

namespace vosti {
namespace {

// Rust regex \w (UTS #18): Alphabetic, marks, decimal digits, connector punctuation,
// Join_Control -- what HF's single_word check tests at a token's boundaries.
bool is_word_char(char32_t cp) {
  if (cp < 0x80) return (cp >= '0' && cp <= '9') || (cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z') || cp == '_';
  const auto c = static_cast<UChar32>(cp);
  const int8_t type = u_charType(c);
  return u_hasBinaryProperty(c, UCHAR_ALPHABETIC) || type == U_NON_SPACING_MARK || type == U_ENCLOSING_MARK ||
         type == U_COMBINING_SPACING_MARK || type == U_DECIMAL_DIGIT_NUMBER || type == U_CONNECTOR_PUNCTUATION ||
         u_hasBinaryProperty(c, UCHAR_JOIN_CONTROL);
}

bool ends_with_word(std::string_view s) {
  if (s.empty()) return false;
  size_t pos = s.size() - 1;
  while (pos > 0 && (static_cast<uint8_t>(s[pos]) & 0xC0) == 0x80) --pos;
  return is_word_char(next_code_point(s, pos));
}

bool starts_with_word(std::string_view s) {
  if (s.empty()) return false;
  size_t pos = 0;
  return is_word_char(next_code_point(s, pos));
}

}  // namespace

AddedVocabulary::AddedVocabulary(std::vector<AddedToken> tokens) : tokens_(std::move(tokens)) {
  for (size_t i = 0; i < tokens_.size(); ++i) {
    by_id_[tokens_[i].id] = i;
    by_content_[tokens_[i].content] = i;
    max_length_ = std::max(max_length_, tokens_[i].content.size());
    if (!tokens_[i].content.empty()) first_byte_[static_cast<uint8_t>(tokens_[i].content[0])] = true;
  }
}

const AddedToken* AddedVocabulary::find_id(int32_t id) const {
  const auto it = by_id_.find(id);
  return it == by_id_.end() ? nullptr : &tokens_[it->second];
}

const AddedToken* AddedVocabulary::find_content(std::string_view content) const {
  const auto it = by_content_.find(content);
  return it == by_content_.end() ? nullptr : &tokens_[it->second];
}

std::vector<AddedVocabulary::Match> AddedVocabulary::find_matches(std::string_view text, bool normalized_pass) const {
  std::vector<Match> raw;
  size_t pos = 0;
  while (pos < text.size()) {
    if (!first_byte_[static_cast<uint8_t>(text[pos])]) {
      ++pos;
      continue;
    }
    const AddedToken* best = nullptr;
    const size_t limit = std::min(max_length_, text.size() - pos);
    for (size_t len = limit; len > 0 && best == nullptr; --len) {
      const auto it = by_content_.find(text.substr(pos, len));
      if (it != by_content_.end() && tokens_[it->second].normalized == normalized_pass) best = &tokens_[it->second];
    }
    if (best == nullptr) {
      ++pos;
      continue;
    }
    raw.push_back({pos, pos + best->content.size(), best});
    pos += best->content.size();
  }
  // Flags, as HF's AddedVocabulary::find_matches applies them.
  std::vector<Match> out;
  size_t start_offset = 0;
  for (auto m : raw) {
    const AddedToken& t = *m.token;
    if (t.single_word) {
      const bool start_space = m.start == 0 || !ends_with_word(text.substr(0, m.start));
      const bool stop_space = m.end == text.size() || !starts_with_word(text.substr(m.end));
      if (!start_space || !stop_space) continue;
    }
    if (t.lstrip) {
      size_t s = m.start;
      while (s > 0) {
        size_t p = s - 1;
        while (p > 0 && (static_cast<uint8_t>(text[p]) & 0xC0) == 0x80) --p;
        size_t q = p;
        if (!is_unicode_whitespace(next_code_point(text, q))) break;
        s = p;
      }
      m.start = std::max(s, start_offset);
    }
    if (t.rstrip) {
      size_t e = m.end;
      while (e < text.size()) {
        size_t q = e;
        if (!is_unicode_whitespace(next_code_point(text, q))) break;
        e = q;
      }
      m.end = e;
    }
    out.push_back(m);
    start_offset = m.end;
  }
  return out;
}

void AddedVocabulary::split_normalized(std::string_view text, bool at_start, const Normalizer& normalizer,
                                       std::vector<InputSection>& out) const {
  const std::string norm = normalizer.normalize(text);
  const auto matches = find_matches(norm, /*normalized_pass=*/true);
  size_t last = 0;
  for (const auto& m : matches) {
    if (m.start > last) out.push_back({norm.substr(last, m.start - last), -1, at_start && last == 0});
    out.push_back({"", m.token->id, false});
    last = m.end;
  }
  if (last < norm.size()) out.push_back({norm.substr(last), -1, at_start && last == 0});
}

std::vector<InputSection> AddedVocabulary::split(std::string_view text, const Normalizer& normalizer) const {
  std::vector<InputSection> out;
  const auto matches = tokens_.empty() ? std::vector<Match>{} : find_matches(text, /*normalized_pass=*/false);
  size_t last = 0;
  for (const auto& m : matches) {
    if (m.start > last) split_normalized(text.substr(last, m.start - last), last == 0, normalizer, out);
    out.push_back({"", m.token->id, false});
    last = std::max(last, m.end);
  }
  if (last < text.size()) split_normalized(text.substr(last), last == 0, normalizer, out);
  return out;
}

}  // namespace vosti
