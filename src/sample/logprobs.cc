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

// The n best tokens of `logits` with their sanitized values, best first (top_logprobs' scan).
std::vector<TokenLogprob> top_values(std::span<const float> logits, int32_t num_top) {
  VOSTI_CHECK(num_top >= 0, "negative num_top");
  const size_t n = std::min(static_cast<size_t>(num_top), logits.size());
  std::vector<TokenLogprob> top;  // [n] (token, sanitized logit) best first while scanning
  if (n == 0) return top;
  top.reserve(n);
  // One scan in id order. Ids arrive ascending, so a token enters only with a value
  // strictly above the current n-th best; whole blocks below it are skipped at once
  // (find_first may also stop at a NaN, which the exact test below rejects).
  const float* x = logits.data();
  for (size_t i = 0; i < logits.size(); ++i) {
    if (top.size() == n) {
      const float worst = top.back().logprob;
      i = find_first(x, i, logits.size(), [worst](float v) { return greater_float(v, worst); });
      if (i == logits.size()) break;
      if (!(sanitize_logit(x[i]) > worst)) continue;
      top.pop_back();
    }
    const float value = sanitize_logit(x[i]);
    const auto id = static_cast<int32_t>(i);
    auto pos = top.end();
    while (pos != top.begin() && ranks_before(value, id, (pos - 1)->logprob, (pos - 1)->token)) --pos;
    top.insert(pos, TokenLogprob{id, value});
  }
  return top;
}

}  // namespace

const char* logprobs_mode_name(LogprobsMode mode) {
  switch (mode) {
    case LogprobsMode::kRawLogprobs:
      return "raw_logprobs";
    case LogprobsMode::kRawLogits:
      return "raw_logits";
    case LogprobsMode::kProcessedLogprobs:
      return "processed_logprobs";
    case LogprobsMode::kProcessedLogits:
      return "processed_logits";
  }
  return "?";
}

bool parse_logprobs_mode(std::string_view name, LogprobsMode& mode) {
  for (const LogprobsMode m : {LogprobsMode::kRawLogprobs, LogprobsMode::kRawLogits, LogprobsMode::kProcessedLogprobs,
                               LogprobsMode::kProcessedLogits}) {
    if (name == logprobs_mode_name(m)) {
      mode = m;
      return true;
    }
  }
  return false;
}

LogSoftmaxStats log_softmax_stats(std::span<const float> logits) {
  VOSTI_CHECK(!logits.empty(), "log_softmax of an empty logits row");
  // Chunks keep the sanitized values and the exps on the stack, so the work vectorises.
  constexpr size_t kChunk = 512;
  float values[kChunk];  // [kChunk] sanitized logits
  float exps[kChunk];    // [kChunk] exp_from_max of values
  float m = -std::numeric_limits<float>::infinity();
  for (size_t begin = 0; begin < logits.size(); begin += kChunk) {
    const size_t n = std::min(kChunk, logits.size() - begin);
    for (size_t i = 0; i < n; ++i) values[i] = sanitize_logit(logits[begin + i]);
    m = std::max(m, max_value(values, n));
  }
  static_assert(kChunk % kSumLanes == 0, "chunks must start on a lane boundary");
  LaneSums z;
  for (size_t begin = 0; begin < logits.size(); begin += kChunk) {
    const size_t n = std::min(kChunk, logits.size() - begin);
    for (size_t i = 0; i < n; ++i) values[i] = sanitize_logit(logits[begin + i]);
    exp_from_max_n(values, m, exps, n);
    add_lane_sums(exps, n, z);
  }
  return log_softmax_stats_from_lanes(m, z);
}

LogSoftmaxStats log_softmax_stats_from_lanes(float max, const LaneSums& lanes) {
  return {max, std::log(lanes.total())};
}

float logprob_of_value(float x, const LogSoftmaxStats& stats) {
  const float d = x == stats.max ? 0.0f : x - stats.max;
  return static_cast<float>(static_cast<double>(d) - stats.log_sum);
}

float token_logprob(std::span<const float> logits, const LogSoftmaxStats& stats, int32_t token) {
  VOSTI_CHECK(token >= 0 && static_cast<size_t>(token) < logits.size(), "token id out of the logits row");
  return logprob_of_value(sanitize_logit(logits[static_cast<size_t>(token)]), stats);
}

std::vector<TokenLogprob> top_logprobs(std::span<const float> logits, const LogSoftmaxStats& stats, int32_t num_top) {
  std::vector<TokenLogprob> top = top_values(logits, num_top);
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

ScoredToken report_token(std::span<const float> row, int32_t token, int32_t num_top, bool as_logits) {
  if (!as_logits) return score_token(row, token, num_top);
  VOSTI_CHECK(token >= 0 && static_cast<size_t>(token) < row.size(), "token id out of the logits row");
  ScoredToken out;
  out.token = token;
  out.logprob = sanitize_logit(row[static_cast<size_t>(token)]);
  out.top = top_values(row, num_top);
  return out;
}

}  // namespace vosti
