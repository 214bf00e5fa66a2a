#include "sample/stop_checker.h"

#include <algorithm>

#include <fmt/format.h>

#include "core/check.h"

namespace vosti {
namespace {

Status check_ids(const char* field, const std::vector<int32_t>& ids, int64_t vocab_size) {
  for (const int32_t t : ids) {
    if (t < 0 || t >= vocab_size)
      return invalid_argument(
          fmt::format("{} has token id {} outside the vocabulary (ids 0..{})", field, t, vocab_size - 1));
  }
  return Status::ok_status();
}

}  // namespace

Status StopConditions::validate(int64_t vocab_size) const {
  VOSTI_RETURN_IF_ERROR(check_ids("eos_token_ids", eos_token_ids, vocab_size));
  VOSTI_RETURN_IF_ERROR(check_ids("stop_token_ids", stop_token_ids, vocab_size));
  for (size_t i = 0; i < stop_strings.size(); ++i) {
    if (stop_strings[i].empty())
      return invalid_argument(fmt::format("stop string {} is empty: remove it or give it text", i));
  }
  if (max_tokens < 0) return invalid_argument(fmt::format("max_tokens = {} is invalid: must be >= 0", max_tokens));
  return Status::ok_status();
}

const char* stop_reason_name(StopReason r) {
  switch (r) {
    case StopReason::kNone:
      return "none";
    case StopReason::kEosToken:
      return "eos_token";
    case StopReason::kStopToken:
      return "stop_token";
    case StopReason::kStopString:
      return "stop_string";
    case StopReason::kMaxTokens:
      return "max_tokens";
  }
  return "unknown";
}

StopChecker::StopChecker(StopConditions conditions) : conditions_(std::move(conditions)) {
  for (const auto& s : conditions_.stop_strings) {
    VOSTI_CHECK(!s.empty(), "StopChecker: empty stop string (validate() first)");
    max_stop_len_ = std::max(max_stop_len_, s.size());
  }
}

bool StopChecker::is_stop_token(int32_t token, StopReason* reason) const {
  auto contains = [token](const std::vector<int32_t>& ids) {
    return std::find(ids.begin(), ids.end(), token) != ids.end();
  };
  if (!conditions_.ignore_eos && contains(conditions_.eos_token_ids)) {
    *reason = StopReason::kEosToken;
    return true;
  }
  if (contains(conditions_.stop_token_ids)) {
    *reason = StopReason::kStopToken;
    return true;
  }
  return false;
}

std::pair<size_t, int32_t> StopChecker::find_stop_string(std::string_view text, size_t checked_text_size) const {
  size_t best_pos = std::string_view::npos;
  int32_t best = -1;
  for (size_t i = 0; i < conditions_.stop_strings.size(); ++i) {
    const std::string& stop = conditions_.stop_strings[i];
    // A match that ended inside the already checked text was found by an earlier call.
    const size_t from = checked_text_size - std::min(checked_text_size, stop.size() - 1);
    const size_t pos = text.find(stop, from);
    if (pos != std::string_view::npos && (best < 0 || pos < best_pos)) {
      best_pos = pos;
      best = static_cast<int32_t>(i);
    }
  }
  return {best_pos, best};
}

size_t StopChecker::holdback(std::string_view text) const {
  if (max_stop_len_ <= 1) return 0;
  for (size_t len = std::min(max_stop_len_ - 1, text.size()); len > 0; --len) {
    const std::string_view suffix = text.substr(text.size() - len);
    for (const auto& stop : conditions_.stop_strings) {
      if (stop.size() > len && std::string_view(stop).substr(0, len) == suffix) return len;
    }
  }
  return 0;
}

StopDecision StopChecker::check(std::span<const int32_t> output_tokens, std::string_view text,
                                size_t checked_text_size) const {
  VOSTI_CHECK(checked_text_size <= text.size(), "StopChecker: checked_text_size beyond the text");
  StopDecision d;
  d.text_size = text.size();
  if (!output_tokens.empty() && is_stop_token(output_tokens.back(), &d.reason)) {
    d.stop_token = output_tokens.back();
    return d;
  }
  const auto [pos, index] = find_stop_string(text, checked_text_size);
  if (index >= 0) {
    d.reason = StopReason::kStopString;
    d.stop_string = index;
    d.text_size = pos + (conditions_.include_stop_str_in_output ? conditions_.stop_strings[index].size() : 0);
    return d;
  }
  if (static_cast<int64_t>(output_tokens.size()) >= conditions_.max_tokens) {
    d.reason = StopReason::kMaxTokens;
    return d;
  }
  d.text_size = text.size() - holdback(text);
  return d;
}

}  // namespace vosti
