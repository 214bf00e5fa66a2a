#include "sample/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>

#include "core/check.h"
#include "sample/sampler_math.h"
#include "sample/philox.h"

namespace vosti {
namespace {

bool is_greedy(const SamplingParams& params) { return params.temperature < kGreedyTemperature; }

// Sizes the buffers for `vocab`; counts and seen keep their all-zero invariant.
void reserve_scratch(SamplerScratch& scratch, size_t vocab) {
  if (scratch.logits.size() < vocab) {
    scratch.logits.resize(vocab);
    scratch.weights.resize(vocab);
    scratch.order.resize(vocab);
    scratch.counts.resize(vocab, 0);
    scratch.seen.resize(vocab, 0);
  }
}

void check_tokens(std::span<const int32_t> tokens, size_t vocab) {
  for (const int32_t t : tokens)
    VOSTI_CHECK(t >= 0 && static_cast<size_t>(t) < vocab, "sampler: token id outside the vocabulary");
}

// Steps 1-4 of sampler.h: writes s into scratch.logits[0..vocab).
void process_logits(std::span<const float> logits, const SamplingParams& params, std::span<const int32_t> prompt_tokens,
                    std::span<const int32_t> output_tokens, SamplerScratch& scratch) {
  float* s = scratch.logits.data();  // [vocab]
  const size_t vocab = logits.size();
  for (size_t i = 0; i < vocab; ++i) s[i] = sanitize_logit(logits[i]);
  for (const auto& [token, bias] : params.logit_bias) s[token] += bias;

  if (params.repetition_penalty != 1.0f) {
    const float r = params.repetition_penalty;
    for (const auto tokens : {prompt_tokens, output_tokens}) {
      for (const int32_t t : tokens) {
        if (scratch.seen[t] != 0) continue;
        scratch.seen[t] = 1;
        s[t] = s[t] > 0.0f ? s[t] / r : s[t] * r;
      }
    }
    for (const int32_t t : prompt_tokens) scratch.seen[t] = 0;
    for (const int32_t t : output_tokens) scratch.seen[t] = 0;
  }

  if (params.frequency_penalty != 0.0f || params.presence_penalty != 0.0f) {
    for (const int32_t t : output_tokens) ++scratch.counts[t];
    for (const int32_t t : output_tokens) {
      if (scratch.counts[t] == 0) continue;  // already applied
      s[t] = s[t] - params.frequency_penalty * static_cast<float>(scratch.counts[t]);
      s[t] = s[t] - params.presence_penalty;
      scratch.counts[t] = 0;
    }
  }

  if (!is_greedy(params) && params.temperature != 1.0f) {
    for (size_t i = 0; i < vocab; ++i) s[i] = s[i] / params.temperature;
  }
}

// Argmax with ties to the lowest id: the first token holding the maximum.
int32_t argmax(const float* s, size_t vocab) {
  const float m = max_value(s, vocab);
  return static_cast<int32_t>(find_first(s, 0, vocab, [m](float x) { return same_float(x, m); }));
}

// The tokens a draw chooses from: either every token (dense, weights of the excluded set
// to 0, which leaves every sum bit-identical) or scratch.kept.
struct Candidates {
  bool dense = true;
  LaneSums sums;  // lane sums of the kept weights; W = sums.total()
};

// The total order (s desc, id asc) used by top-k and top-p.
struct BetterLogit {
  const float* s;
  bool operator()(int32_t a, int32_t b) const { return s[a] > s[b] || (s[a] == s[b] && a < b); }
};

using OrderIt = std::vector<int32_t>::iterator;

// Makes [first, nth) the best of [first, last) under `better`, sorted best first.
void select_best(OrderIt first, OrderIt nth, OrderIt last, BetterLogit better) {
  if (nth < last) std::nth_element(first, nth, last, better);
  std::sort(first, nth, better);
}

// Step 5: order[0..k) = the k best token ids, best first. A small k takes one scan with
// a heap whose front is the worst kept token; the set is unique either way.
void select_top_k(size_t vocab, size_t k, std::vector<int32_t>& order, BetterLogit better) {
  const OrderIt first = order.begin();
  if (k * 8 > vocab) {
    std::iota(first, first + static_cast<std::ptrdiff_t>(vocab), 0);
    select_best(first, first + static_cast<std::ptrdiff_t>(k), first + static_cast<std::ptrdiff_t>(vocab), better);
    return;
  }
  const OrderIt heap_end = first + static_cast<std::ptrdiff_t>(k);
  std::iota(first, heap_end, 0);
  std::make_heap(first, heap_end, better);
  // Ids arrive ascending, so a tie with the worst kept token never beats it: a plain
  // comparison with its value is the whole test.
  const float* s = better.s;
  float worst = s[order[0]];
  for (size_t i = k;; ++i) {
    i = find_first(s, i, vocab, [worst](float x) { return greater_float(x, worst); });
    if (i == vocab) break;
    std::pop_heap(first, heap_end, better);
    *(heap_end - 1) = static_cast<int32_t>(i);
    std::push_heap(first, heap_end, better);
    worst = s[order[0]];
  }
  std::sort(first, heap_end, better);
}

// Step 6 over order[0..n), of which order[0..num_sorted) is sorted best first and ranks
// before the rest: the nucleus size. Sorts further, in growing chunks, only if the
// nucleus reaches past the sorted part.
size_t nucleus_size(std::vector<int32_t>& order, size_t n, size_t num_sorted, double threshold, const float* w,
                    BetterLogit better) {
  double mass_before = 0.0;
  size_t r = 0;
  while (r < n) {
    if (r == num_sorted) {
      const size_t next = std::min(n, std::max<size_t>(2 * num_sorted, 64));
      select_best(order.begin() + static_cast<std::ptrdiff_t>(num_sorted),
                  order.begin() + static_cast<std::ptrdiff_t>(next), order.begin() + static_cast<std::ptrdiff_t>(n),
                  better);
      num_sorted = next;
    }
    if (mass_before >= threshold) break;
    mass_before += static_cast<double>(w[order[r]]);
    ++r;
  }
  return r;
}

// Top-p over the whole vocabulary (w computed for every token): order[0..vocab) gets the
// tokens with s >= tau first, sorted, then the rest. Tau is chosen so that the tokens
// below it weigh at most half of what top-p cuts, so the nucleus nearly always ends inside
// the sorted part; when it does not, nucleus_size sorts on. Tau affects speed, not the result.
size_t full_vocab_nucleus(const float* s, const float* w, float m, double z, float top_p, size_t vocab,
                          std::vector<int32_t>& order) {
  const double cut = (1.0 - static_cast<double>(top_p)) * z / (2.0 * static_cast<double>(vocab));
  const auto tau = static_cast<float>(static_cast<double>(m) + std::log(cut));
  size_t front = 0, back = vocab;
  for (size_t i = 0; i < vocab; ++i) {
    if (s[i] >= tau) {
      order[front++] = static_cast<int32_t>(i);
    } else {
      order[--back] = static_cast<int32_t>(i);
    }
  }
  const BetterLogit better{s};
  std::sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(front), better);
  return nucleus_size(order, vocab, front, static_cast<double>(top_p) * z, w, better);
}

// Steps 5-7 of sampler.h on scratch.logits.
Candidates select_candidates(const SamplingParams& params, size_t vocab, SamplerScratch& scratch) {
  const float* s = scratch.logits.data();  // [vocab]
  float* w = scratch.weights.data();       // [vocab]
  const float m = max_value(s, vocab);
  const bool top_k_on = params.top_k > 0 && static_cast<size_t>(params.top_k) < vocab;
  const bool top_p_on = params.top_p < 1.0f;

  Candidates c;
  if (!top_k_on) {
    exp_from_max_n(s, m, w, vocab);
    if (!top_p_on) {
      if (params.min_p > 0.0f) {
        for (size_t i = 0; i < vocab; ++i) w[i] = w[i] >= params.min_p ? w[i] : 0.0f;
      }
      add_lane_sums(w, vocab, c.sums);
      return c;
    }
  }

  c.dense = false;
  std::vector<int32_t>& order = scratch.order;
  std::vector<int32_t>& kept = scratch.kept;
  size_t n = vocab;
  if (top_k_on) {
    n = static_cast<size_t>(params.top_k);
    select_top_k(vocab, n, order, BetterLogit{s});
    for (size_t r = 0; r < n; ++r) w[order[r]] = exp_from_max(s[order[r]], m);
    if (top_p_on) {
      kept.assign(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(n));
      std::sort(kept.begin(), kept.end());
      const double z = lane_sums_of(w, kept).total();
      n = nucleus_size(order, n, n, static_cast<double>(params.top_p) * z, w, BetterLogit{s});
    }
  } else {
    LaneSums z;
    add_lane_sums(w, vocab, z);
    n = full_vocab_nucleus(s, w, m, z.total(), params.top_p, vocab, order);
  }
  kept.assign(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(n));
  std::erase_if(kept, [&](int32_t t) { return !(w[t] >= params.min_p); });
  std::sort(kept.begin(), kept.end());
  c.sums = lane_sums_of(w, kept);
  return c;
}

// Step 8 (sampler.h): the lane, then the token within it.
int32_t draw(const Candidates& c, size_t vocab, const SamplerScratch& scratch, double u) {
  const float* w = scratch.weights.data();
  const LanePick pick = pick_lane(c.sums.lane.data(), u);
  const auto lane = static_cast<size_t>(pick.lane);
  const double lane_target = pick.lane_target;
  double acc = 0.0;
  int32_t last_positive = -1;
  auto visit = [&](int32_t id) {
    acc += static_cast<double>(w[id]);
    if (w[id] > 0.0f) last_positive = id;
    return acc > lane_target;
  };
  if (c.dense) {
    for (size_t i = lane; i < vocab; i += kSumLanes)
      if (visit(static_cast<int32_t>(i))) return static_cast<int32_t>(i);
  } else {
    for (const int32_t id : scratch.kept)
      if (static_cast<size_t>(id) % kSumLanes == lane && visit(id)) return id;
  }
  // Rounding in target - before can leave the lane's sum at or below lane_target.
  VOSTI_CHECK(last_positive >= 0, "sampler: the chosen lane has no positive weight");
  return last_positive;
}

void prepare(std::span<const float> logits, const SamplingParams& params, std::span<const int32_t> prompt_tokens,
             std::span<const int32_t> output_tokens, SamplerScratch& scratch) {
  VOSTI_CHECK(!logits.empty(), "sampler: empty logits row");
  VOSTI_DCHECK(params.validate(static_cast<int64_t>(logits.size())).ok(), "sampler: unvalidated SamplingParams");
  // Token ids are only read by the penalties; a long prompt is not rescanned otherwise.
  const bool repetition = params.repetition_penalty != 1.0f;
  if (repetition) check_tokens(prompt_tokens, logits.size());
  if (repetition || params.frequency_penalty != 0.0f || params.presence_penalty != 0.0f)
    check_tokens(output_tokens, logits.size());
  reserve_scratch(scratch, logits.size());
  process_logits(logits, params, prompt_tokens, output_tokens, scratch);
}

// The token of choose_token, leaving scratch.logits = s and, unless greedy, the candidates in
// `c` (with scratch.weights and scratch.kept as select_candidates left them).
int32_t choose(std::span<const float> logits, const SamplingParams& params, uint64_t seed, int64_t output_position,
               std::span<const int32_t> prompt_tokens, std::span<const int32_t> output_tokens, SamplerScratch& scratch,
               Candidates& c) {
  prepare(logits, params, prompt_tokens, output_tokens, scratch);
  const size_t vocab = logits.size();
  if (is_greedy(params)) return argmax(scratch.logits.data(), vocab);
  c = select_candidates(params, vocab, scratch);
  return draw(c, vocab, scratch, sampling_uniform(seed, static_cast<uint64_t>(output_position)));
}

// scratch.processed = the row step 8 drew from (sampler.h): s, with the tokens steps 5-7 did not
// keep at -inf. A dense candidate set keeps every token, or with min_p those of positive weight
// (min_p > 0 zeroed the rest, and an underflowed weight is below min_p too).
void processed_row(const SamplingParams& params, size_t vocab, const Candidates& c, SamplerScratch& scratch) {
  std::vector<float>& p = scratch.processed;
  const float* s = scratch.logits.data();
  p.assign(s, s + vocab);
  if (is_greedy(params)) return;
  constexpr float kDropped = -std::numeric_limits<float>::infinity();
  const float* w = scratch.weights.data();
  if (c.dense) {
    if (params.min_p > 0.0f)
      for (size_t i = 0; i < vocab; ++i) p[i] = w[i] > 0.0f ? p[i] : kDropped;
    return;
  }
  std::fill(p.begin(), p.end(), kDropped);
  for (const int32_t t : scratch.kept) p[static_cast<size_t>(t)] = s[t];
}

}  // namespace

int32_t choose_token(std::span<const float> logits, const SamplingParams& params, uint64_t seed,
                     int64_t output_position, std::span<const int32_t> prompt_tokens,
                     std::span<const int32_t> output_tokens, SamplerScratch& scratch) {
  Candidates c;
  return choose(logits, params, seed, output_position, prompt_tokens, output_tokens, scratch, c);
}

ScoredToken sample_token(std::span<const float> logits, const SamplingParams& params, uint64_t seed,
                         int64_t output_position, std::span<const int32_t> prompt_tokens,
                         std::span<const int32_t> output_tokens, SamplerScratch& scratch, LogprobsMode mode) {
  Candidates c;
  const int32_t token = choose(logits, params, seed, output_position, prompt_tokens, output_tokens, scratch, c);
  if (!reports_processed(mode)) return report_token(logits, token, params.num_top_logprobs, reports_logits(mode));
  processed_row(params, logits.size(), c, scratch);
  return report_token(scratch.processed, token, params.num_top_logprobs, reports_logits(mode));
}

std::vector<TokenProb> sampling_distribution(std::span<const float> logits, const SamplingParams& params,
                                             std::span<const int32_t> prompt_tokens,
                                             std::span<const int32_t> output_tokens, SamplerScratch& scratch) {
  prepare(logits, params, prompt_tokens, output_tokens, scratch);
  const size_t vocab = logits.size();
  if (is_greedy(params)) return {TokenProb{argmax(scratch.logits.data(), vocab), 1.0}};
  const Candidates c = select_candidates(params, vocab, scratch);
  const float* w = scratch.weights.data();
  const double total = c.sums.total();
  std::vector<TokenProb> dist;
  auto add = [&](int32_t t) {
    if (w[t] > 0.0f) dist.push_back({t, static_cast<double>(w[t]) / total});
  };
  if (c.dense) {
    for (size_t i = 0; i < vocab; ++i) add(static_cast<int32_t>(i));
  } else {
    for (const int32_t t : scratch.kept) add(t);
  }
  return dist;
}

uint64_t fresh_seed() {
  std::random_device device;
  const uint64_t hi = device();
  const uint64_t lo = device();
  return (hi << 32) ^ lo;
}

}  // namespace vosti
