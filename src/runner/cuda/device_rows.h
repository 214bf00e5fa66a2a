// Between the engine's per-request tasks and the device sampler (kernels/cuda/sampler_kernels.h):
// the SamplerRowTask of a sampled row, its adjustment list (sample/sampler.h steps 1-3 as one
// entry per touched token), and the host's RowResult from what the device reported (the
// logprobs of sample/logprobs.h from the device's max and lane sums, with the host's log).
// Thread safety: pure functions.
#pragma once

#include <vector>

#include "kernels/cuda/sampler_kernels.h"
#include "runner/model_runner.h"
#include "runner/step_rows.h"

namespace vosti {

// The device task of a row sampled for `t` (REQUIRES: t.sampling non-null).
SamplerRowTask sample_task(const RequestLogitsTask& t);

// The device task of a scored prompt row.
SamplerRowTask score_task(const RequestLogitsTask& t, const WantedRow& row);

// Appends the adjustments of a row sampled for `t` (none without logit_bias or penalties).
void build_adjusts(const RequestLogitsTask& t, std::vector<SamplerAdjust>& out);

// The RowResult the host would compute from the row, given what the device reported for it.
// REQUIRES: d.status == kSamplerOk.
RowResult row_from_device(const SamplerRowResult& d, const WantedRow& row);

// Whether two scored tokens have the same token, logprob bits and top list.
bool same_scored(const ScoredToken& a, const ScoredToken& b);

}  // namespace vosti
