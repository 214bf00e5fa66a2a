// (dev/: no engine path runs this; the CUDA runner's device sampler, src/kernels/cuda/
// sampler_kernels.h, replaced it, because this log_sum agrees with the host's only to rounding.
// Built for its test and the benchmark as vosti_kernels_cuda_dev.)
// Logits post-processing on the GPU: per logits row, the greedy token and the log-softmax
// normaliser, and optionally the whole log-softmax row, so that a decode step needs to copy
// back only what its requests ask for (a token id and its logprob, not 49k-152k floats).
//
// Definitions follow sample/logprobs.h (the host's raw logprobs), for a row l[0..V):
//   l'_i    = l_i, except NaN -> -inf
//   max     = max_i l'_i;  argmax = the lowest i with l'_i == max (+0 == -0)
//   e(x, m) = 1 if x == m (+0 == -0, infinities too), else __expf(x - m)    (x <= m)
//   Z       = sum_i e(l'_i, max), evaluated as below;  log_sum = log(double(Z))
//   lp_i    = float(double(d_i) - log_sum),  d_i = 0 if l'_i == max, else l'_i - max
// The exp and the summation order differ from the host sampler's (sampler_math.h), so
// log_sum agrees with log_softmax_stats() to rounding, not bit for bit; max and argmax are exact.
//
// Reduction order (fixed by V and the constants below only, never by the row count m or the
// row index). The row is cut into chunks of kLogitsChunk elements, c = 0 .. C - 1 (the last
// one shorter), C = ceil(V / kLogitsChunk); one block of kLogitsThreads threads per (row, chunk).
//   1. Thread t owns the groups of four elements [4g, 4g + 4) of its chunk (cut at V) for
//      g = t, t + kLogitsThreads, ...; m_t = l' at the lowest owned index holding the owned
//      maximum (-inf if it owns none), z_t = e(x, m_t) summed in f32 over its elements in
//      increasing index order, from 0.
//   2. The chunk's max m_c and argmax under the total order (value desc, id asc): exact in any
//      order. z_c = the threads' z_t * e(m_t, m_c) summed by a butterfly __shfl_xor tree with
//      offsets 16, 8, 4, 2, 1 in each warp, then the warp sums added in warp order 0..3.
//   3. One warp per row: max and argmax over the chunks (exact), then
//      Z = (((z_0 * e(m_0, max)) + z_1 * e(m_1, max)) + ...) in chunk order 0 .. C - 1.
//   The logprobs row, if asked for, is a second pass over the chunks, element by element.
// How values reach the threads never enters the arithmetic: step 1 reads the chunk from shared
// memory, staged there by one bulk asynchronous copy (sm_90, V % 4 == 0, 16-byte aligned rows)
// or by the block's threads; steps 3 and the logprobs pass are launched as programmatic
// dependent launches on sm_90 and wait for the previous kernel's results before reading them.
// Thread safety: stateless; calls are enqueued on the given stream; concurrent calls need
// their own workspace.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "core/status.h"

namespace vosti {

inline constexpr int kLogitsThreads = 128;
inline constexpr int64_t kLogitsChunk = 4096;  // elements per block: 32 per thread

// One row's summary (16 bytes; device memory layout of logits_postprocess's output).
struct LogitsRowStats {
  double log_sum = 0.0;  // log(Z)
  float max = 0.0f;      // max of the sanitized row
  int32_t argmax = 0;    // lowest id holding max
};

// Device workspace bytes logits_postprocess needs for m rows of `vocab` logits (per-chunk partials).
size_t logits_workspace_bytes(int64_t m, int64_t vocab);

// stats[m] = the summary of each row of logits[m, vocab] (f32, device); if logprobs is non-null
// it receives lp [m, vocab] (f32, device; may alias logits).
// Errors: kInvalidArgument for null pointers, vocab < 1 or > 2^31 - 1 - kLogitsChunk, m < 0 or > 65535, or a
// workspace smaller than logits_workspace_bytes(m, vocab); kInternal for a launch failure.
Status logits_postprocess(const float* logits, int64_t m, int64_t vocab, LogitsRowStats* stats, float* logprobs,
                          void* workspace, size_t workspace_bytes, cudaStream_t stream);

}  // namespace vosti
