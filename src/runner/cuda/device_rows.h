// From what the device sampler (kernels/cuda/sampler/sampler_kernels.h) reported for a row to the
// host's RowResult (the logprobs of sample/logprobs.h from the device's max and lane sums, with
// the host's log). The rows' tasks are built with the step's batch (runner/step_batch.h).
// Thread safety: pure functions.
#pragma once

#include <vector>

#include "kernels/cuda/sampler/sampler_kernels.h"
#include "runner/model_runner.h"
#include "runner/step_batch.h"

namespace vosti {

// The RowResult the host would compute from the row under `mode`, given what the device reported
// for it. REQUIRES: d.status == kSamplerOk; a sampled row's mode is a raw one.
RowResult row_from_device(const SamplerRowResult& d, const WantedRow& row, LogprobsMode mode);

// Whether two scored tokens have the same token, logprob bits and top list.
bool same_scored(const ScoredToken& a, const ScoredToken& b);

}  // namespace vosti
