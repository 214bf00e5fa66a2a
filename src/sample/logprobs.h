// Log-probabilities reported to users: the chosen (or prompt) token's logprob and the
// n best alternatives, all under the log_softmax of the RAW model logits (vLLM's
// default "raw logprobs": before logit bias, penalties, temperature and filters).
//
// Exact definition, for a logits row l[0..V):
//   l'_i   = l_i, except NaN -> -inf (a NaN logit is treated as -inf everywhere)
//   m      = max_i l'_i (max_value, sampler_math.h: exact, so order does not matter)
//   d_i    = 0 if l'_i == m, else l'_i - m (float; so +inf/-inf rows stay defined)
//   Z      = sum_i exp(d_i), exp = exp_nonpositive in float, summed as double lane sums
//            (both in sampler_math.h: a fixed order by token id)
//   lp_i   = float(double(d_i) - log(Z))
// Top-n lists are best first under the total order (l'_i desc, id asc): ties by lowest id.
//
// What a position reports is the engine's LogprobsMode (vLLM's `logprobs_mode`, fixed per
// deployment): raw_logprobs (the default) lp_i of the raw row above; raw_logits the raw row's
// values l'_i themselves; processed_logprobs and processed_logits the same two of the row the
// sampler drew from (sampler.h: after logit bias, penalties and temperature, with the tokens
// top-k, top-p and min-p dropped set to -inf; a greedy request's row has no temperature and no
// filter). Top-n lists rank the reported row. A prompt position is not sampled: it reports the raw
// row (raw_logits and processed_logits its values, the two logprobs modes its logprobs).
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <limits>
#include <span>
#include <string_view>
#include <vector>

#include "sample/sampler_math.h"

namespace vosti {

enum class LogprobsMode : uint8_t { kRawLogprobs, kRawLogits, kProcessedLogprobs, kProcessedLogits };

// "raw_logprobs", "raw_logits", "processed_logprobs", "processed_logits".
const char* logprobs_mode_name(LogprobsMode mode);
// The mode named `name`; false if it names none.
bool parse_logprobs_mode(std::string_view name, LogprobsMode& mode);
// Whether the mode reports values (logits) rather than log-softmax values (logprobs).
inline bool reports_logits(LogprobsMode m) {
  return m == LogprobsMode::kRawLogits || m == LogprobsMode::kProcessedLogits;
}
// Whether the mode reports the sampler's processed row at sampled positions.
inline bool reports_processed(LogprobsMode m) {
  return m == LogprobsMode::kProcessedLogprobs || m == LogprobsMode::kProcessedLogits;
}

struct TokenLogprob {
  int32_t token = 0;
  float logprob = 0.0f;
};

// One produced or scored position: its token, its raw logprob, and the n best tokens.
struct ScoredToken {
  int32_t token = 0;
  float logprob = 0.0f;
  std::vector<TokenLogprob> top;  // [num_top_logprobs], best first, ties by lowest id
};

// The log-softmax normaliser of one raw logits row (m and log(Z) above).
struct LogSoftmaxStats {
  float max = 0.0f;
  double log_sum = 0.0;  // log(Z)
};

// sanitize_logit (sampler_scalar.h): NaN -> -inf, every other value unchanged.

// REQUIRES: !logits.empty().
LogSoftmaxStats log_softmax_stats(std::span<const float> logits /*[vocab]*/);

// The stats of a row given its max and the lane sums of exp_from_max(l'_i, max) (how the CUDA
// runner's device sampler reports a row): {max, log(lanes.total())}, log_softmax_stats' own steps.
LogSoftmaxStats log_softmax_stats_from_lanes(float max, const LaneSums& lanes);

// lp of a sanitized logit value x under `stats`: float(double(d) - log_sum), d as above.
float logprob_of_value(float x, const LogSoftmaxStats& stats);

// lp_token under `stats`. REQUIRES: 0 <= token < logits.size().
float token_logprob(std::span<const float> logits /*[vocab]*/, const LogSoftmaxStats& stats, int32_t token);

// The n best tokens (n = min(num_top, vocab)), best first, ties by lowest id.
std::vector<TokenLogprob> top_logprobs(std::span<const float> logits /*[vocab]*/, const LogSoftmaxStats& stats,
                                       int32_t num_top);

// Scores a given token (e.g. a prompt token) under the raw logits: its logprob and the
// num_top best. REQUIRES: 0 <= token < logits.size(), 0 <= num_top.
ScoredToken score_token(std::span<const float> logits /*[vocab]*/, int32_t token, int32_t num_top);

// `token` and the num_top best of `row`, reported as `as_logits` says: the sanitized values
// l'_i themselves (true), or their logprobs under the row's log_softmax_stats (false: score_token).
// REQUIRES: as score_token.
ScoredToken report_token(std::span<const float> row /*[vocab]*/, int32_t token, int32_t num_top, bool as_logits);

}  // namespace vosti
