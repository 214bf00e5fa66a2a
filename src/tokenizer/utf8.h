// UTF-8 helpers for the tokenizers: validation, lossy repair, code-point iteration,
// the GPT-2 byte <-> printable-character map, and Unicode normalization forms.
//
// Invariants: every function that returns text returns valid UTF-8, except
// gpt2_bytes_from_chars, which returns raw bytes. Lossy repair follows the Unicode
// "maximal subpart" practice, exactly as Python's bytes.decode(errors="replace") and
// Rust's String::from_utf8_lossy: one U+FFFD per maximal invalid subsequence.
// Thread safety: pure functions; the byte map is an immutable static table.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "core/status.h"

namespace vosti {

inline constexpr std::string_view kReplacementChar = "\xEF\xBF\xBD";  // U+FFFD

// Length (1-4) of the valid UTF-8 sequence at s[pos], or 0 if the bytes there are not one.
size_t utf8_sequence_length(std::string_view s, size_t pos);
bool is_valid_utf8(std::string_view s);
// s with each maximal invalid subsequence replaced by U+FFFD.
std::string repair_utf8(std::string_view s);
// Length of the longest prefix of s that does not end inside a truncated (but so far
// valid) multi-byte sequence. Bytes that can never become valid count as complete.
size_t utf8_complete_prefix_length(std::string_view s);

// Decodes the code point starting at s[pos] and advances pos. REQUIRES: s is valid UTF-8.
char32_t next_code_point(std::string_view s, size_t& pos);
void append_utf8(std::string& out, char32_t cp);
// Rust's char::is_whitespace (the Unicode White_Space property).
bool is_unicode_whitespace(char32_t cp);

// GPT-2's byte-level alphabet: byte b <-> a printable character (UTF-8 encoded).
std::string_view gpt2_char_for_byte(uint8_t b);
// The byte a byte-level character stands for, or -1 if cp is not in the alphabet.
int gpt2_byte_for_char(char32_t cp);
// Maps every byte of s to its byte-level character.
std::string gpt2_chars_from_bytes(std::string_view s);

enum class UnicodeForm { kNFC, kNFD, kNFKC, kNFKD };
// s in normalization form `form`. REQUIRES: s is valid UTF-8.
Result<std::string> unicode_normalize(std::string_view s, UnicodeForm form);

}  // namespace vosti
