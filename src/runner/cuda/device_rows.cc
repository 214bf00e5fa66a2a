#include "runner/cuda/device_rows.h"

#include <cstring>
#include <map>

namespace vosti {

// The sampler adjustments of one sampled row (sampler.h steps 1-3), one entry per token.
void build_adjusts(const RequestLogitsTask& t, std::vector<SamplerAdjust>& out) {
  const SamplingParams& p = *t.sampling;
  const bool repetition = p.repetition_penalty != 1.0f;
  const bool counted = p.frequency_penalty != 0.0f || p.presence_penalty != 0.0f;
  if (p.logit_bias.empty() && !repetition && !counted) return;
  std::map<int32_t, SamplerAdjust> by_token;
  for (const auto& [token, bias] : p.logit_bias) {
    SamplerAdjust& a = by_token[token];
    a.token = token;
    a.flags |= kAdjustBias;
    a.bias = bias;
  }
  if (repetition) {
    for (const auto tokens : {t.prompt, t.outputs})
      for (const int32_t token : tokens) {
        SamplerAdjust& a = by_token[token];
        a.token = token;
        a.flags |= kAdjustRepeated;
      }
  }
  if (counted) {
    for (const int32_t token : t.outputs) {
      SamplerAdjust& a = by_token[token];
      a.token = token;
      a.flags |= kAdjustCounted;
      ++a.count;
    }
  }
  for (const auto& [token, a] : by_token) out.push_back(a);
}

SamplerRowTask score_task(const RequestLogitsTask& t, const WantedRow& row) {
  SamplerRowTask s;
  s.kind = kSamplerRowScore;
  s.target_token = row.target_token;
  s.num_top = t.sampling->num_top_logprobs;
  return s;
}

SamplerRowTask sample_task(const RequestLogitsTask& t) {
  const SamplingParams& p = *t.sampling;
  SamplerRowTask s;
  s.kind = kSamplerRowSample;
  s.num_top = p.num_top_logprobs;
  s.top_k = p.top_k;
  s.temperature = p.temperature;
  s.top_p = p.top_p;
  s.min_p = p.min_p;
  s.repetition_penalty = p.repetition_penalty;
  s.frequency_penalty = p.frequency_penalty;
  s.presence_penalty = p.presence_penalty;
  s.seed = t.seed;
  s.output_position = t.outputs.size();
  return s;
}

// The host's RowResult from what the device reported for the row (logprobs.h's formulas,
// the host's log).
RowResult row_from_device(const SamplerRowResult& d, const WantedRow& w) {
  RowResult out;
  out.plan_index = w.plan_index;
  out.position = w.position;
  out.kind = w.kind;
  LaneSums lanes;
  for (size_t j = 0; j < kSumLanes; ++j) lanes.lane[j] = d.lanes[j];
  const LogSoftmaxStats stats = log_softmax_stats_from_lanes(d.max, lanes);
  out.scored.token = d.token;
  out.scored.logprob = logprob_of_value(d.token_logit, stats);
  for (int k = 0; k < d.num_top; ++k)
    out.scored.top.push_back({d.top_ids[k], logprob_of_value(d.top_logits[k], stats)});
  return out;
}

bool same_scored(const ScoredToken& a, const ScoredToken& b) {
  if (a.token != b.token || std::memcmp(&a.logprob, &b.logprob, sizeof(float)) != 0 || a.top.size() != b.top.size())
    return false;
  for (size_t i = 0; i < a.top.size(); ++i)
    if (a.top[i].token != b.top[i].token || std::memcmp(&a.top[i].logprob, &b.top[i].logprob, sizeof(float)) != 0)
      return false;
  return true;
}

}  // namespace vosti
