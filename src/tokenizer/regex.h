// Regex: a compiled Oniguruma pattern (UTF-8, Ruby syntax -- what HF tokenizers uses
// through the `onig` crate), so pre-tokenizer splits have the same semantics as HF:
// lookahead, \p{L}/\p{N} categories, (?i:...) groups.
//
// Invariants: a Regex always holds a successfully compiled pattern.
// Thread safety: find_all may be called concurrently (each call uses its own region).
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace vosti {

// Initializes Oniguruma once per process (idempotent, thread-safe).
void ensure_oniguruma_initialized();

struct RegexMatch {
  size_t start = 0;  // byte offsets into the searched text
  size_t end = 0;
};

class Regex {
 public:
  // Compiles `pattern`; INVALID_ARGUMENT naming the pattern and Oniguruma's message on failure.
  static Result<std::shared_ptr<const Regex>> compile(const std::string& pattern);
  ~Regex();
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;

  // All non-overlapping matches, left to right; an empty match advances one character.
  // REQUIRES: text is valid UTF-8.
  std::vector<RegexMatch> find_all(std::string_view text) const;
  const std::string& pattern() const { return pattern_; }

 private:
  Regex() = default;
  std::string pattern_;
  void* regex_ = nullptr;  // OnigRegex
};

}  // namespace vosti
