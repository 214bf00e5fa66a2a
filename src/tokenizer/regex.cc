#include "tokenizer/regex.h"

#include <oniguruma.h>

#include <mutex>

#include "tokenizer/utf8.h"

namespace vosti {
void ensure_oniguruma_initialized() {
  static std::once_flag once;
  std::call_once(once, [] {
    OnigEncoding encodings[] = {ONIG_ENCODING_UTF8};
    onig_initialize(encodings, 1);
  });
}

Result<std::shared_ptr<const Regex>> Regex::compile(const std::string& pattern) {
  ensure_oniguruma_initialized();
  std::shared_ptr<Regex> re(new Regex());
  re->pattern_ = pattern;
  OnigRegex handle = nullptr;
  OnigErrorInfo info;
  const auto* p = reinterpret_cast<const OnigUChar*>(pattern.data());
  const int rc =
      onig_new(&handle, p, p + pattern.size(), ONIG_OPTION_NONE, ONIG_ENCODING_UTF8, ONIG_SYNTAX_RUBY, &info);
  if (rc != ONIG_NORMAL) {
    OnigUChar msg[ONIG_MAX_ERROR_MESSAGE_LEN];
    onig_error_code_to_str(msg, rc, &info);
    return invalid_argument("cannot compile pre-tokenizer regex '" + pattern + "': " + reinterpret_cast<char*>(msg));
  }
  re->regex_ = handle;
  return std::shared_ptr<const Regex>(std::move(re));
}

Regex::~Regex() {
  if (regex_ != nullptr) onig_free(static_cast<OnigRegex>(regex_));
}

std::vector<RegexMatch> Regex::find_all(std::string_view text) const {
  std::vector<RegexMatch> out;
  OnigRegion* region = onig_region_new();
  const auto* begin = reinterpret_cast<const OnigUChar*>(text.data());
  const auto* end = begin + text.size();
  size_t pos = 0;
  while (pos < text.size()) {  // a match at the very end would be empty, and empty matches are skipped
    const int r = onig_search(static_cast<OnigRegex>(regex_), begin, end, begin + pos, end, region, ONIG_OPTION_NONE);
    if (r < 0) break;  // ONIG_MISMATCH (or an error, which a compiled pattern on valid UTF-8 does not raise)
    const auto s = static_cast<size_t>(region->beg[0]);
    const auto e = static_cast<size_t>(region->end[0]);
    if (e > s) {
      out.push_back({s, e});
      pos = e;
    } else {
      if (s >= text.size()) break;
      size_t next = s;
      next_code_point(text, next);
      pos = next;
    }
  }
  onig_region_free(region, 1);
  return out;
}

}  // namespace vosti
