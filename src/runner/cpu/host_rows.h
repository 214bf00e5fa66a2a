// The host's way to turn one logits row into a RowResult: sample/sampler.h's sample_token
// for a sampled row, sample/logprobs.h's score_token for a scored prompt token, the digest
// and the row copy on request. The CPU runner uses it for every row; the CUDA runner for the
// rows its device sampler hands back (and, checking, for rows it sampled itself).
// Thread safety: pure, given one SamplerScratch per thread.
#pragma once

#include <span>

#include "runner/model_runner.h"
#include "runner/step_batch.h"
#include "sample/sampler.h"

namespace vosti {

// REQUIRES: logits.size() == vocab; task's sampling params validated against it.
RowResult finish_row_on_host(std::span<const float> logits /*[vocab]*/, const WantedRow& row,
                             const RequestLogitsTask& task, SamplerScratch& scratch);

}  // namespace vosti
