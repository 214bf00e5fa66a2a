#include "sample/sampler.h"

#include <algorithm>
#include <numeric>
#include <random>

#include "core/check.h"
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
void process_logits(std::span<const float> logits, const SamplingParams& params,
                    std::span<const int32_t> prompt_tokens, std::span<const int32_t> output_tokens,
                    SamplerScratch& scratch) {
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

// Argmax with ties to the lowest id: a strict comparison in ascending id order.
int32_t argmax(const float* s, size_t vocab) {
  size_t best = 0;
  for (size_t i = 1; i < vocab; ++i) {
    if (s[i] > s[best]) best = i;
  }
  return static_cast<int32_t>(best);
}

// The tokens a draw chooses from: either every token (dense, weights of the excluded set
// to 0, which leaves every sum bit-identical) or scratch.kept.
struct Candidates {
  bool dense = true;
  double total = 0.0;  // W: sum of the kept weights in id order
};

// The total order (s desc, id asc) used by top-k and top-p.
struct BetterLogit {
  const float* s;
  bool operator()(int32_t a, int32_t b) const { return s[a] > s[b] || (s[a] == s[b] && a < b); }
};

// Makes order[0..n) the n best of order[0..size) under `better`, sorted best first.
void select_best(std::vector<int32_t>& order, size_t from, size_t n, size_t size, BetterLogit better) {
  auto first = order.begin() + static_cast<std::ptrdiff_t>(from);
  auto nth = order.begin() + static_cast<std::ptrdiff_t>(n);
  auto last = order.begin() + static_cast<std::ptrdiff_t>(size);
  if (nth < last) std::nth_element(first, nth, last, better);
  std::sort(first, nth, better);
}

// Step 6: the nucleus size within order[0..n), of which order[0..num_sorted) is sorted.
// Sorts further in growing chunks only as far as the nucleus reaches.
size_t nucleus_size(std::vector<int32_t>& order, size_t n, size_t num_sorted, double threshold,
                    const float* w, BetterLogit better) {
  double mass_before = 0.0;
  size_t r = 0;
  while (r < n) {
    if (r == num_sorted) {
      const size_t next = std::min(n, std::max<size_t>(2 * num_sorted, 64));
      select_best(order, num_sorted, next, n, better);
      num_sorted = next;
    }
    if (mass_before >= threshold) break;
    mass_before += static_cast<double>(w[order[r]]);
    ++r;
  }
  return r;
}

// Steps 5-7 of sampler.h on scratch.logits.
Candidates select_candidates(const SamplingParams& params, size_t vocab, SamplerScratch& scratch) {
  const float* s = scratch.logits.data();  // [vocab]
  float* w = scratch.weights.data();       // [vocab]
  const float m = *std::max_element(s, s + vocab);
  const bool top_k_on = params.top_k > 0 && static_cast<size_t>(params.top_k) < vocab;
  const bool top_p_on = params.top_p < 1.0f;

  Candidates c;
  if (!top_k_on && !top_p_on) {
    for (size_t i = 0; i < vocab; ++i) {
      const float wi = exp_from_max(s[i], m);
      w[i] = wi >= params.min_p ? wi : 0.0f;
      c.total += static_cast<double>(w[i]);
    }
    return c;
  }

  c.dense = false;
  const BetterLogit better{s};
  std::vector<int32_t>& order = scratch.order;
  std::iota(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(vocab), 0);
  size_t n = vocab, num_sorted = 0;
  if (top_k_on) {
    n = static_cast<size_t>(params.top_k);
    select_best(order, 0, n, vocab, better);
    num_sorted = n;
  }
  for (size_t r = 0; r < n; ++r) w[order[r]] = exp_from_max(s[order[r]], m);

  std::vector<int32_t>& kept = scratch.kept;
  kept.assign(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(n));
  if (top_p_on) {
    double z = 0.0;
    if (top_k_on) {
      std::sort(kept.begin(), kept.end());
      for (const int32_t t : kept) z += static_cast<double>(w[t]);
    } else {
      for (size_t i = 0; i < vocab; ++i) z += static_cast<double>(w[i]);
    }
    n = nucleus_size(order, n, num_sorted, static_cast<double>(params.top_p) * z, w, better);
    kept.assign(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(n));
  }
  std::erase_if(kept, [&](int32_t t) { return !(w[t] >= params.min_p); });
  std::sort(kept.begin(), kept.end());
  for (const int32_t t : kept) c.total += static_cast<double>(w[t]);
  return c;
}

// Step 8: the first kept id whose running weight sum exceeds u * W.
int32_t draw(const Candidates& c, size_t vocab, const SamplerScratch& scratch, double u) {
  const float* w = scratch.weights.data();
  const double target = u * c.total;
  double acc = 0.0;
  // The running sum repeats the additions that produced c.total, so it reaches
  // c.total > target at the last positive weight: the scan always chooses.
  if (c.dense) {
    for (size_t i = 0; i < vocab; ++i) {
      acc += static_cast<double>(w[i]);
      if (acc > target) return static_cast<int32_t>(i);
    }
  } else {
    for (const int32_t t : scratch.kept) {
      acc += static_cast<double>(w[t]);
      if (acc > target) return t;
    }
  }
  VOSTI_CHECK(false, "sampler: inverse CDF ran past the kept tokens");
  return 0;
}

void prepare(std::span<const float> logits, const SamplingParams& params, std::span<const int32_t> prompt_tokens,
             std::span<const int32_t> output_tokens, SamplerScratch& scratch) {
  VOSTI_CHECK(!logits.empty(), "sampler: empty logits row");
  VOSTI_DCHECK(params.validate(static_cast<int64_t>(logits.size())).ok(), "sampler: unvalidated SamplingParams");
  check_tokens(prompt_tokens, logits.size());
  check_tokens(output_tokens, logits.size());
  reserve_scratch(scratch, logits.size());
  process_logits(logits, params, prompt_tokens, output_tokens, scratch);
}

}  // namespace

int32_t choose_token(std::span<const float> logits, const SamplingParams& params, uint64_t seed,
                     int64_t output_position, std::span<const int32_t> prompt_tokens,
                     std::span<const int32_t> output_tokens, SamplerScratch& scratch) {
  prepare(logits, params, prompt_tokens, output_tokens, scratch);
  const size_t vocab = logits.size();
  if (is_greedy(params)) return argmax(scratch.logits.data(), vocab);
  const Candidates c = select_candidates(params, vocab, scratch);
  return draw(c, vocab, scratch, sampling_uniform(seed, static_cast<uint64_t>(output_position)));
}

ScoredToken sample_token(std::span<const float> logits, const SamplingParams& params, uint64_t seed,
                         int64_t output_position, std::span<const int32_t> prompt_tokens,
                         std::span<const int32_t> output_tokens, SamplerScratch& scratch) {
  ScoredToken out;
  out.token = choose_token(logits, params, seed, output_position, prompt_tokens, output_tokens, scratch);
  const LogSoftmaxStats stats = log_softmax_stats(logits);
  out.logprob = token_logprob(logits, stats, out.token);
  out.top = top_logprobs(logits, stats, params.num_top_logprobs);
  return out;
}

std::vector<TokenProb> sampling_distribution(std::span<const float> logits, const SamplingParams& params,
                                             std::span<const int32_t> prompt_tokens,
                                             std::span<const int32_t> output_tokens, SamplerScratch& scratch) {
  prepare(logits, params, prompt_tokens, output_tokens, scratch);
  const size_t vocab = logits.size();
  if (is_greedy(params)) return {TokenProb{argmax(scratch.logits.data(), vocab), 1.0}};
  const Candidates c = select_candidates(params, vocab, scratch);
  const float* w = scratch.weights.data();
  std::vector<TokenProb> dist;
  auto add = [&](int32_t t) {
    if (w[t] > 0.0f) dist.push_back({t, static_cast<double>(w[t]) / c.total});
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
