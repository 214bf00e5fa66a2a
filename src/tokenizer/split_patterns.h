// Native matchers for the pre-tokenizer patterns that byte-level tokenizers run on all
// text (GPT-2/SmolLM2, Llama 3, Qwen2, digit splitting), equivalent to Oniguruma running them
// (ordered alternation, greedy quantifiers, the (?!\S) lookahead):
//   GPT-2:  's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
//   Llama 3 / Qwen2: kLlama3SplitPattern / kQwen2SplitPattern below
//   digits: \p{N}
// Character classes come from Oniguruma's own Unicode tables (\s, \p{L}, \p{N}).
// Equivalence with the Regex path is tested on the fixture corpus and random strings.
//
// Thread safety: pure functions.
#pragma once

#include <string_view>
#include <vector>

#include "tokenizer/regex.h"

namespace vosti {

inline constexpr const char* kGpt2SplitPattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
inline constexpr const char* kNumberCharPattern = R"(\p{N})";
inline constexpr const char* kLlama3SplitPattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
inline constexpr const char* kQwen2SplitPattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// REQUIRES: text is valid UTF-8. Same result as Regex(kGpt2Split).find_all(text).
std::vector<RegexMatch> gpt2_split_matches(std::string_view text);
// REQUIRES: text is valid UTF-8. Same result as Regex(kLlama3SplitPattern) (max_digits 3)
// or Regex(kQwen2SplitPattern) (max_digits 1) .find_all(text).
std::vector<RegexMatch> llama3_split_matches(std::string_view text, int max_digits);
// REQUIRES: text is valid UTF-8. Same result as Regex("\\p{N}").find_all(text).
std::vector<RegexMatch> number_char_matches(std::string_view text);

}  // namespace vosti
