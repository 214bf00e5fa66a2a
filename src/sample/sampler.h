// The per-request sampler: one logits row -> one token (DESIGN.md rule 6).
//
// The chosen token is a pure function of (logits, params, seed, output_position,
// prompt_tokens, output_tokens): never of other requests, the batch row, the thread or
// what the scratch held before. Every reduction runs in one fixed order that depends only
// on token ids (sampler_math.h), and the arithmetic is the sampler's own (no libm exp).
//
// Processing order (vLLM-like), on s_i = the logit of token i (NaN -> -inf):
//  1. logit_bias:  s_i += bias_i.
//  2. repetition_penalty r (HF semantics), once per distinct token of prompt + output:
//                  s_i = s_i > 0 ? s_i / r : s_i * r.
//  3. frequency f and presence p (OpenAI semantics), per distinct output token with
//     count c:     s_i = s_i - f * c;  s_i = s_i - p.
//  3b. structured outputs (RequestLogitsTask::allowed): s_i = -inf for every token the grammar
//     does not allow. Steps 1-3 keep -inf at -inf, so the runner masks the raw row before calling
//     the sampler (the same bits; the digest and logprobs then see the masked row: docs/SPEC.md 9).
//  4. temperature T < kGreedyTemperature (in particular 0): greedy, the argmax of s with
//     ties to the lowest id; steps 5-8 are skipped. Otherwise s_i = s_i / T.
//  5. top_k (0 or >= vocab: off): keep the k best under the total order (s desc, id asc),
//     so ties at the k-th value go to the lowest ids and exactly k are kept.
//  6. top_p (1: off): w_i = exp_from_max(s_i, max s) (sampler_math.h: float, exactly 1
//     for the max); Z = lane sum (sampler_math.h) of w over the top-k set. In (s desc,
//     id asc) order keep a token while the mass of the tokens before it (a double running
//     sum in that order) is < top_p * Z: the shortest prefix reaching top_p * Z, never empty.
//  7. min_p (0: off): keep tokens with w_i >= min_p (that is p_i >= min_p * p_max).
//  8. draw: u = sampling_uniform(seed, output_position) (philox.h); lanes l_j = lane sums
//     of w over the kept tokens, W = ((l_0 + l_1) + ...) + l_127, t = u * W. The lane is the
//     first j whose running sum R_j = R_{j-1} + l_j exceeds t (R_{-1} = 0; the last lane if
//     none before). Within it, t' = t - R_{j-1}; the token is the first kept id of the lane
//     (ascending) whose running double sum of w exceeds t', or, if rounding leaves none,
//     the lane's last kept id with positive weight.
// The draw order is by token id, not by probability: the set of kept tokens decides the
// draw, not which path found it (top_k >= vocab or top_p = 1 give the same bits as no
// filter), the unfiltered path needs no sort, and a draw walks one lane, not the vocabulary.
//
// Reported logprobs are of the RAW logits (logprobs.h), before any of the steps above, unless
// the deployment's LogprobsMode asks for the processed row: s after steps 1-4, with every token
// that steps 5-7 did not keep set to -inf (a greedy request: s after steps 1-3, nothing dropped).
// Thread safety: pure functions; a SamplerScratch is used by one thread at a time.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "sample/logprobs.h"
#include "sample/sampling_params.h"

namespace vosti {

// Reusable buffers so that sampling allocates only when the vocabulary grows. Its
// contents never influence a result: every call overwrites what it reads, and the
// counters are left at zero.
struct SamplerScratch {
  std::vector<float> logits;     // [vocab] processed logits s_i
  std::vector<float> weights;    // [vocab] w_i = exp(s_i - max s), valid for candidates
  std::vector<int32_t> order;    // [vocab] token ids, best-first prefix when filtering
  std::vector<int32_t> kept;     // [num_kept] kept token ids, ascending
  std::vector<int32_t> counts;   // [vocab] output token counts, all zero between calls
  std::vector<uint8_t> seen;     // [vocab] repetition marks, all zero between calls
  std::vector<float> processed;  // [vocab] the processed row a processed LogprobsMode reports
};

// The support a sampled position drew from (vLLM's "sampling mask"): every token (no filter of steps
// 5-7 dropped one; a greedy request too, which filters nothing) or the kept token ids, ascending.
// Trainers renormalise importance ratios over it.
struct SamplingSupport {
  bool every_token = true;
  std::vector<int32_t> kept;  // ascending; empty when every_token
  bool operator==(const SamplingSupport&) const = default;
};

struct TokenProb {
  int32_t token = 0;
  double prob = 0.0;
};

// Samples the token at `output_position` and reports it as `mode` says (logprobs.h; the default:
// its logprob under the raw logits), with params.num_top_logprobs best alternatives; with
// `support`, also the support the token was drawn from.
// REQUIRES: params.validate(logits.size()) is ok; every token id is in [0, logits.size()).
// The engine passes output_position == output_tokens.size().
ScoredToken sample_token(std::span<const float> logits /*[vocab]*/, const SamplingParams& params, uint64_t seed,
                         int64_t output_position, std::span<const int32_t> prompt_tokens,
                         std::span<const int32_t> output_tokens, SamplerScratch& scratch,
                         LogprobsMode mode = LogprobsMode::kRawLogprobs, SamplingSupport* support = nullptr);

// The token sample_token would choose, without logprobs. Same REQUIRES.
int32_t choose_token(std::span<const float> logits /*[vocab]*/, const SamplingParams& params, uint64_t seed,
                     int64_t output_position, std::span<const int32_t> prompt_tokens,
                     std::span<const int32_t> output_tokens, SamplerScratch& scratch);

// The distribution step 8 draws from: the tokens with positive weight, ascending, with
// w_i / W. Greedy gives the argmax with probability 1. For tests and diagnostics.
std::vector<TokenProb> sampling_distribution(std::span<const float> logits /*[vocab]*/, const SamplingParams& params,
                                             std::span<const int32_t> prompt_tokens,
                                             std::span<const int32_t> output_tokens, SamplerScratch& scratch);

// A fresh 64-bit seed from std::random_device, for requests that bring none.
uint64_t fresh_seed();

}  // namespace vosti
