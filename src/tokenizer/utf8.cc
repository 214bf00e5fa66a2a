#include "tokenizer/utf8.h"

#include <unicode/normalizer2.h>
#include <unicode/unistr.h>

#include <array>

namespace vosti {
namespace {

// The valid range of the second byte for each lead byte (Unicode Table 3-7).
bool second_byte_ok(uint8_t lead, uint8_t b) {
  switch (lead) {
    case 0xE0:
      return b >= 0xA0 && b <= 0xBF;
    case 0xED:
      return b >= 0x80 && b <= 0x9F;
    case 0xF0:
      return b >= 0x90 && b <= 0xBF;
    case 0xF4:
      return b >= 0x80 && b <= 0x8F;
    default:
      return b >= 0x80 && b <= 0xBF;
  }
}

// Expected total length for a lead byte, 0 if it can never start a sequence.
size_t lead_length(uint8_t lead) {
  if (lead < 0x80) return 1;
  if (lead >= 0xC2 && lead <= 0xDF) return 2;
  if (lead >= 0xE0 && lead <= 0xEF) return 3;
  if (lead >= 0xF0 && lead <= 0xF4) return 4;
  return 0;
}

// Number of bytes at s[pos] that form a valid prefix of a sequence (>= 1 when the
// lead byte is valid); `total` receives the full length the lead byte asks for.
size_t valid_prefix(std::string_view s, size_t pos, size_t& total) {
  const auto lead = static_cast<uint8_t>(s[pos]);
  total = lead_length(lead);
  if (total <= 1) return total;
  size_t n = 1;
  while (n < total && pos + n < s.size()) {
    const auto b = static_cast<uint8_t>(s[pos + n]);
    const bool ok = n == 1 ? second_byte_ok(lead, b) : (b >= 0x80 && b <= 0xBF);
    if (!ok) break;
    ++n;
  }
  return n;
}

struct ByteMap {
  std::array<std::string, 256> chars;
  std::array<int16_t, 324> bytes{};  // code point -> byte; the alphabet lies below U+0144
  ByteMap() {
    bytes.fill(-1);
    int extra = 0;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      const char32_t cp = printable ? static_cast<char32_t>(b) : static_cast<char32_t>(256 + extra++);
      append_utf8(chars[b], cp);
      bytes[cp] = static_cast<int16_t>(b);
    }
  }
};

const ByteMap& byte_map() {
  static const ByteMap map;
  return map;
}

}  // namespace

size_t utf8_sequence_length(std::string_view s, size_t pos) {
  size_t total = 0;
  const size_t n = valid_prefix(s, pos, total);
  return (total != 0 && n == total) ? total : 0;
}

bool is_valid_utf8(std::string_view s) {
  size_t pos = 0;
  while (pos < s.size()) {
    if (static_cast<uint8_t>(s[pos]) < 0x80) {
      ++pos;
      continue;
    }
    const size_t n = utf8_sequence_length(s, pos);
    if (n == 0) return false;
    pos += n;
  }
  return true;
}

std::string repair_utf8(std::string_view s) {
  std::string out;
  out.reserve(s.size() + 8);
  size_t pos = 0;
  while (pos < s.size()) {
    size_t total = 0;
    const size_t n = valid_prefix(s, pos, total);
    if (total != 0 && n == total) {
      out.append(s.substr(pos, n));
      pos += n;
    } else {
      out.append(kReplacementChar);
      pos += n == 0 ? 1 : n;
    }
  }
  return out;
}

size_t utf8_complete_prefix_length(std::string_view s) {
  // A truncated sequence is at most 3 bytes long and sits at the very end.
  const size_t start = s.size() > 3 ? s.size() - 3 : 0;
  for (size_t pos = start; pos < s.size(); ++pos) {
    const auto b = static_cast<uint8_t>(s[pos]);
    if (b < 0x80 || (b >= 0x80 && b <= 0xBF)) continue;
    size_t total = 0;
    const size_t n = valid_prefix(s, pos, total);
    if (total > 1 && n == s.size() - pos && n < total) return pos;
  }
  return s.size();
}

char32_t next_code_point(std::string_view s, size_t& pos) {
  const auto b0 = static_cast<uint8_t>(s[pos]);
  if (b0 < 0x80) {
    ++pos;
    return b0;
  }
  size_t len = b0 >= 0xF0 ? 4 : b0 >= 0xE0 ? 3 : 2;
  if (pos + len > s.size()) len = s.size() - pos;
  char32_t cp = b0 & (0x7F >> len);
  for (size_t i = 1; i < len; ++i) cp = (cp << 6) | (static_cast<uint8_t>(s[pos + i]) & 0x3F);
  pos += len;
  return cp;
}

void append_utf8(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

bool is_unicode_whitespace(char32_t cp) {
  return (cp >= 0x09 && cp <= 0x0D) || cp == 0x20 || cp == 0x85 || cp == 0xA0 || cp == 0x1680 ||
         (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

std::string_view gpt2_char_for_byte(uint8_t b) { return byte_map().chars[b]; }

int gpt2_byte_for_char(char32_t cp) {
  if (cp >= byte_map().bytes.size()) return -1;
  return byte_map().bytes[cp];
}

std::string gpt2_chars_from_bytes(std::string_view s) {
  std::string out;
  out.reserve(s.size() * 2);
  const auto& map = byte_map();
  for (char c : s) out.append(map.chars[static_cast<uint8_t>(c)]);
  return out;
}

Result<std::string> unicode_normalize(std::string_view s, UnicodeForm form) {
  UErrorCode err = U_ZERO_ERROR;
  const icu::Normalizer2* norm = nullptr;
  switch (form) {
    case UnicodeForm::kNFC:
      norm = icu::Normalizer2::getNFCInstance(err);
      break;
    case UnicodeForm::kNFD:
      norm = icu::Normalizer2::getNFDInstance(err);
      break;
    case UnicodeForm::kNFKC:
      norm = icu::Normalizer2::getNFKCInstance(err);
      break;
    case UnicodeForm::kNFKD:
      norm = icu::Normalizer2::getNFKDInstance(err);
      break;
  }
  if (U_FAILURE(err) || norm == nullptr)
    return internal_error("ICU normalizer unavailable: " + std::string(u_errorName(err)));
  const icu::UnicodeString in =
      icu::UnicodeString::fromUTF8(icu::StringPiece(s.data(), static_cast<int32_t>(s.size())));
  if (norm->isNormalized(in, err) && U_SUCCESS(err)) return std::string(s);
  err = U_ZERO_ERROR;
  const icu::UnicodeString normalized = norm->normalize(in, err);
  if (U_FAILURE(err)) return invalid_argument("Unicode normalization failed: " + std::string(u_errorName(err)));
  std::string out;
  normalized.toUTF8String(out);
  return out;
}

}  // namespace vosti
