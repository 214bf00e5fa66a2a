#include "runner/cuda/device_rows.h"

#include <cstring>

namespace vosti {

// The host's RowResult from what the device reported for the row (logprobs.h's formulas,
// the host's log).
RowResult row_from_device(const SamplerRowResult& d, const WantedRow& w, LogprobsMode mode) {
  RowResult out;
  out.plan_index = w.plan_index;
  out.position = w.position;
  out.kind = w.kind;
  LaneSums lanes;
  for (size_t j = 0; j < kSumLanes; ++j) lanes.lane[j] = d.lanes[j];
  const LogSoftmaxStats stats = log_softmax_stats_from_lanes(d.max, lanes);
  // The device reports raw rows: a processed mode's sampled rows never come here (step_batch.h).
  const bool values = reports_logits(mode);
  out.scored.token = d.token;
  out.scored.logprob = values ? d.token_logit : logprob_of_value(d.token_logit, stats);
  for (int k = 0; k < d.num_top; ++k)
    out.scored.top.push_back({d.top_ids[k], values ? d.top_logits[k] : logprob_of_value(d.top_logits[k], stats)});
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
