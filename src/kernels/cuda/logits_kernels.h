// Logits post-processing on the GPU: per logits row, the greedy token and the log-softmax
// normaliser, and optionally the whole log-softmax row, so that a decode step needs to copy
// back only what its requests ask for (a token id and its logprob, not 49k-152k floats).
//
// Definitions follow sample/logprobs.h (the host's raw logprobs), for a row l[0..V):
//   l'_i   = l_i, except NaN -> -inf
//   max    = max_i l'_i;  argmax = the lowest i with l'_i == max (+0 == -0)
//   e(x, m) = 1 if x == m (+0 == -0, infinities too), else __expf(x - m)    (x <= m)
//   Z      = sum_i e(l'_i, max), evaluated in one read of the row as below;  log_sum = log(double(Z))
//   lp_i   = float(double(d_i) - log_sum),  d_i = 0 if l'_i == max, else l'_i - max
// The exp and the summation order differ from the host sampler's (sampler_math.h), so
// log_sum agrees with log_softmax_stats() to rounding, not bit for bit; max and argmax are exact.
//
// Reduction order (fixed by V and kLogitsThreads only, never by the row count m or the row index):
// one block of kLogitsThreads threads per row. Thread t owns the groups of four elements
// [4g, 4g + 4) (the last one cut at V) for g = t, t + kLogitsThreads, ... and walks its elements
// in increasing order keeping its running max m_t (from -inf) and an f32 sum z_t (from 0):
// when an element x > m_t arrives, z_t = z_t * e(m_t, x) and m_t = x; then z_t = z_t + e(x, m_t).
// Then max and argmax over the block under the total order (value desc, id asc), exact in any
// order; then c_t = z_t * e(m_t, max), summed by a butterfly __shfl_xor tree with offsets
// 16, 8, 4, 2, 1 in each warp and the warp sums added in warp order 0..7. The logprobs row, if
// asked for, is a second read of the row by the same threads.
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
