// Native matchers for the two pre-tokenizer patterns the default model (SmolLM2) and
// every GPT-2-style byte-level tokenizer run on all text, equivalent to Oniguruma
// running them (ordered alternation, greedy quantifiers, the (?!\S) lookahead):
//   GPT-2:  's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
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

// REQUIRES: text is valid UTF-8. Same result as Regex(kGpt2Split).find_all(text).
std::vector<RegexMatch> gpt2_split_matches(std::string_view text);
// REQUIRES: text is valid UTF-8. Same result as Regex("\\p{N}").find_all(text).
std::vector<RegexMatch> number_char_matches(std::string_view text);

}  // namespace vosti
