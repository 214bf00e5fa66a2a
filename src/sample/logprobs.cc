#include "sample/logprobs.h"

#include <algorithm>
#include <cmath>

#include "core/check.h"

namespace vosti {
namespace {

// The total order of the top-n lists: a ranks before b.
bool ranks_before(float value_a, int32_t id_a, float value_b, int32_t id_b) {
  return value_a > value_b || (value_a == value_b && id_a < id_b);
}

}  // namespace

float exp_from_max(float x, float m) { return x == m ? 1.0f : std::exp(x - m); }

LogSoftmaxStats log_softmax_stats(std::span<const float> logits) {
  VOSTI_CHECK(!logits.empty(), "log_softmax of an empty logits row");
  float m = -std::numeric_limits<float>::infinity();
  for (const float x : logits) m = std::max(m, sanitize_logit(x));
  double z = 0.0;
  for (const float x : logits) z += static_cast<double>(exp_from_max(sanitize_logit(x), m));
  return {m, std::log(z)};
}

float token_logprob(std::span<const float> logits, const LogSoftmaxStats& stats, int32_t token) {
  VOSTI_CHECK(token >= 0 && static_cast<size_t>(token) < logits.size(), "token id out of the logits row");
  const float x = sanitize_logit(logits[static_cast<size_t>(token)]);
  const float d = x == stats.max ? 0.0f : x - stats.max;
  return static_cast<float>(static_cast<double>(d) - stats.log_sum);
}

std::vector<TokenLogprob> top_logprobs(std::span<const float> logits, const LogSoftmaxStats& stats,
                                       int32_t num_top) {
  VOSTI_CHECK(num_top >= 0, "negative num_top");
  const size_t n = std::min(static_cast<size_t>(num_top), logits.size());
  std::vector<TokenLogprob> top;  // [n] (token, sanitized logit) best first while scanning
  if (n == 0) return top;
  top.reserve(n);
  // One scan in id order; an insertion into the small sorted list only when a token beats
  // the current n-th best, so the common case is one comparison per token.
  for (size_t i = 0; i < logits.size(); ++i) {
    const float x = sanitize_logit(logits[i]);
    const auto id = static_cast<int32_t>(i);
    if (top.size() == n && !ranks_before(x, id, top.back().logprob, top.back().token)) continue;
    if (top.size() == n) top.pop_back();
    auto pos = top.end();
    while (pos != top.begin() && ranks_before(x, id, (pos - 1)->logprob, (pos - 1)->token)) --pos;
    top.insert(pos, TokenLogprob{id, x});
  }
  for (auto& t : top) t.logprob = token_logprob(logits, stats, t.token);
  return top;
}

ScoredToken score_token(std::span<const float> logits, int32_t token, int32_t num_top) {
  const LogSoftmaxStats stats = log_softmax_stats(logits);
  ScoredToken out;
  out.token = token;
  out.logprob = token_logprob(logits, stats, token);
  out.top = top_logprobs(logits, stats, num_top);
  return out;
}

}  // namespace vosti
