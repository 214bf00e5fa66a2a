// Logits post-processing on the GPU: per logits row, the greedy token and the log-softmax
// normaliser, and optionally the whole log-softmax row, so that a decode step needs to copy
// back only what its requests ask for (a token id and its logprob, not 49k-152k floats).
//
// Definitions follow sample/logprobs.h (the host's raw logprobs), for a row l[0..V):
//   l'_i   = l_i, except NaN -> -inf
//   max    = max_i l'_i;  argmax = the lowest i with l'_i == max (+0 == -0)
//   d_i    = 0 if l'_i == max, else l'_i - max (f32; so rows holding +inf or only -inf stay defined)
//   Z      = sum_i expf(d_i) in f32, in the fixed order below;  log_sum = log(double(Z))
//   lp_i   = float(double(d_i) - log_sum)
// The exp and the summation order differ from the host sampler's (sampler_math.h), so
// log_sum agrees with log_softmax_stats() to rounding, not bit for bit; max and argmax are exact.
//
// Reduction order (fixed by V and kLogitsThreads only, never by the row count m or the row index):
// one block of kLogitsThreads threads per row. Thread t owns the groups of four elements
// [4g, 4g + 4) (the last one cut at V) for g = t, t + kLogitsThreads, ... and keeps an f32 chain of
// expf(d_i) over its elements in increasing order (whatever the row's alignment); then a butterfly __shfl_xor
// tree with offsets 16, 8, 4, 2, 1 in each warp; then the warp sums added in warp order 0..7.
// max and argmax use the total order (value desc, id asc), which makes their reduction exact
// in any order.
// Thread safety: stateless; calls are enqueued on the given stream.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "core/status.h"

namespace vosti {

inline constexpr int kLogitsThreads = 256;

// One row's summary (16 bytes; device memory layout of logits_postprocess's output).
struct LogitsRowStats {
  double log_sum = 0.0;  // log(Z)
  float max = 0.0f;      // max of the sanitized row
  int32_t argmax = 0;    // lowest id holding max
};

// stats[m] = the summary of each row of logits[m, vocab] (f32, device); if logprobs is non-null
// it receives lp [m, vocab] (f32, device; may alias logits).
// Errors: kInvalidArgument for null pointers, vocab < 1 or >= 2^31, m < 0 or >= 2^31; kInternal
// for a launch failure.
Status logits_postprocess(const float* logits, int64_t m, int64_t vocab, LogitsRowStats* stats, float* logprobs,
                          cudaStream_t stream);

}  // namespace vosti
