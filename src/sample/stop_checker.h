// StopChecker: decides after each output token whether a request is finished, and how
// much of its detokenised text may be streamed to the user now.
//
// Checks, in this order, after a new output token:
//  1. token stops: the last token is one of eos_token_ids (unless ignore_eos) or of
//     stop_token_ids -> finished; the whole text is released. Whether that token's own
//     text is in `text` is the caller's choice (vLLM leaves it out unless
//     include_stop_str_in_output).
//  2. stop strings: the earliest occurrence of any stop string in the text (ties: the one
//     listed first) -> finished; the text is cut before it (or after it with
//     include_stop_str_in_output). Matching is on UTF-8 bytes, which for valid UTF-8 is
//     matching on characters.
//  3. max_tokens: output_tokens.size() >= max_tokens -> finished; the whole text is released.
//  Otherwise not finished, and the longest suffix of the text that is a proper prefix of a
//  stop string is held back, because the next token could complete that stop string
//  (llama.cpp's partial-stop holdback; vLLM holds back a fixed max_len - 1 bytes).
// For an append-only text the released size never decreases from one call to the next.
//
// Invariants: no stop string is empty. Thread safety: immutable after construction;
// check() is a pure function of its arguments and the conditions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/status.h"

namespace vosti {

struct StopConditions {
  std::vector<int32_t> eos_token_ids;   // the model's end-of-sequence ids
  std::vector<int32_t> stop_token_ids;  // the request's extra stop ids (stop even with ignore_eos)
  std::vector<std::string> stop_strings;
  bool ignore_eos = false;
  bool include_stop_str_in_output = false;
  int32_t max_tokens = 16;

  // INVALID_ARGUMENT naming the field: empty stop string, token id outside the
  // vocabulary, negative max_tokens.
  Status validate(int64_t vocab_size) const;
};

enum class StopReason : uint8_t { kNone, kEosToken, kStopToken, kStopString, kMaxTokens };
const char* stop_reason_name(StopReason r);  // "none", "eos_token", "stop_token", "stop_string", "max_tokens"

struct StopDecision {
  StopReason reason = StopReason::kNone;
  size_t text_size = 0;      // bytes of text that may be released now (the final text if finished)
  int32_t stop_token = -1;   // the token, for kEosToken and kStopToken
  int32_t stop_string = -1;  // index into stop_strings, for kStopString

  bool finished() const { return reason != StopReason::kNone; }
};

class StopChecker {
 public:
  // REQUIRES: conditions.validate(...) is ok.
  explicit StopChecker(StopConditions conditions);

  // The decision after the newest of `output_tokens`. `text` is the detokenised output so
  // far; `checked_text_size` is text.size() at the previous call (0 on the first), so only
  // new text is searched. REQUIRES: checked_text_size <= text.size().
  StopDecision check(std::span<const int32_t> output_tokens, std::string_view text, size_t checked_text_size) const;

  const StopConditions& conditions() const { return conditions_; }

 private:
  bool is_stop_token(int32_t token, StopReason* reason) const;
  // The earliest stop string match not wholly inside text[0, checked_text_size): (position, index), index -1 if none.
  std::pair<size_t, int32_t> find_stop_string(std::string_view text, size_t checked_text_size) const;
  // Bytes at the end of `text` that could still begin a stop string.
  size_t holdback(std::string_view text) const;

  StopConditions conditions_;
  size_t max_stop_len_ = 0;
};

}  // namespace vosti
