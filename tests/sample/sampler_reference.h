// A brute-force reference of the sampler specification in sample/sampler.h: full sorts,
// std::set/std::map bookkeeping, no scratch, no shortcuts. It performs the same float and
// double operations in the same order as the spec prescribes, so the real sampler must
// agree with it bit for bit (kept set, weights, total and chosen token).
#pragma once

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <set>
#include <span>
#include <vector>

#include "sample/sampler_math.h"
#include "sample/logprobs.h"
#include "sample/sampler.h"

namespace vosti::testing {

// The specification's lane count, written out (sampler.h step 8; sampler_scalar.h kSumLanes).
inline constexpr int kReferenceLanes = 128;
static_assert(kReferenceLanes == kSumLanes, "the reference follows the documented lane count");

struct ReferenceDraw {
  std::vector<int32_t> kept;           // ascending ids (may include weight-0 tokens)
  std::vector<float> w;                // [vocab] weights (valid for kept)
  double lanes[kReferenceLanes] = {};  // lane j: ids with id % kReferenceLanes == j, ascending
  double total = 0.0;
  int32_t greedy = -1;  // the token when greedy, else -1
};

// The lane sums of sampler_math.h, written out: lane j sums ids == j mod kReferenceLanes in id order.
inline double reference_lane_total(const std::vector<float>& w, const std::vector<int32_t>& ascending_ids,
                                   double* lanes_out = nullptr) {
  double lanes[kReferenceLanes] = {};
  for (const int32_t t : ascending_ids) lanes[t % kReferenceLanes] += w[static_cast<size_t>(t)];
  double total = 0.0;
  for (int j = 0; j < kReferenceLanes; ++j) {
    total += lanes[j];
    if (lanes_out != nullptr) lanes_out[j] = lanes[j];
  }
  return total;
}

inline std::vector<float> reference_processed(std::span<const float> logits, const SamplingParams& p,
                                              std::span<const int32_t> prompt, std::span<const int32_t> output) {
  std::vector<float> s(logits.begin(), logits.end());
  for (float& x : s) x = std::isnan(x) ? -INFINITY : x;
  for (const auto& [t, b] : p.logit_bias) s[t] += b;
  if (p.repetition_penalty != 1.0f) {
    std::set<int32_t> seen(prompt.begin(), prompt.end());
    seen.insert(output.begin(), output.end());
    for (const int32_t t : seen) s[t] = s[t] > 0 ? s[t] / p.repetition_penalty : s[t] * p.repetition_penalty;
  }
  if (p.frequency_penalty != 0.0f || p.presence_penalty != 0.0f) {
    std::map<int32_t, int> counts;
    for (const int32_t t : output) ++counts[t];
    for (const auto& [t, c] : counts) {
      s[t] = s[t] - p.frequency_penalty * static_cast<float>(c);
      s[t] = s[t] - p.presence_penalty;
    }
  }
  if (p.temperature >= kGreedyTemperature && p.temperature != 1.0f)
    for (float& x : s) x = x / p.temperature;
  return s;
}

inline ReferenceDraw reference_draw_set(std::span<const float> logits, const SamplingParams& p,
                                        std::span<const int32_t> prompt, std::span<const int32_t> output) {
  const std::vector<float> s = reference_processed(logits, p, prompt, output);
  const auto vocab = static_cast<int32_t>(s.size());
  std::vector<int32_t> order(s.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return s[a] > s[b] || (s[a] == s[b] && a < b); });
  ReferenceDraw r;
  if (p.temperature < kGreedyTemperature) {
    r.greedy = order[0];
    return r;
  }
  const float m = s[order[0]];
  r.w.resize(s.size());
  for (size_t i = 0; i < s.size(); ++i) r.w[i] = exp_from_max(s[i], m);
  std::vector<int32_t> k_set = order;
  if (p.top_k > 0 && p.top_k < vocab) k_set.resize(static_cast<size_t>(p.top_k));
  if (p.top_p < 1.0f) {
    std::vector<int32_t> by_id = k_set;
    std::sort(by_id.begin(), by_id.end());
    const double z = reference_lane_total(r.w, by_id);
    const double threshold = static_cast<double>(p.top_p) * z;
    double before = 0.0;
    size_t n = 0;
    while (n < k_set.size() && before < threshold) before += r.w[k_set[n++]];
    k_set.resize(n);
  }
  for (const int32_t t : k_set)
    if (r.w[t] >= p.min_p) r.kept.push_back(t);
  std::sort(r.kept.begin(), r.kept.end());
  r.total = reference_lane_total(r.w, r.kept, r.lanes);
  return r;
}

// The token the spec draws with uniform u.
inline int32_t reference_choose(const ReferenceDraw& r, double u) {
  if (r.greedy >= 0) return r.greedy;
  const double t = u * r.total;
  int lane = 0;
  double before = 0.0;
  while (lane < kReferenceLanes - 1 && !(before + r.lanes[lane] > t)) before += r.lanes[lane++];
  double acc = 0.0;
  int32_t last = -1;
  for (const int32_t id : r.kept) {
    if (id % kReferenceLanes != lane) continue;
    acc += r.w[id];
    if (r.w[id] > 0.0f) last = id;
    if (acc > t - before) return id;
  }
  return last;
}

}  // namespace vosti::testing
