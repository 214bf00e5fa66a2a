// The sampler on the GPU: per logits row, what the engine needs to emit a token without the
// row leaving the device: the raw log-softmax statistics and top-n (sample/logprobs.h), and
// for a sampled row the token sample/sampler.h's sample_token() chooses, bit for bit.
//
// What the device computes, per row l[0..V) (l' = l with NaN -> -inf):
//   max   = max of l' (order_key: -0 < +0), lanes[j] = the double lane sums of
//           exp_from_max(l'_i, max) (sampler_scalar.h: lane j = ids i % kSumLanes == j, ascending);
//           the host then takes log_sum = log(total(lanes)) with the CPU's log, so logprobs are
//           the host's function of (max, lanes, the token's l'), exactly logprobs.h's.
//   top   = the num_top best ids under (l' desc, id asc) with their l'.
//   token = kScore: the task's target; kSample: sampler.h's steps 1-8 on the row:
//           the adjustments (logit bias, repetition, frequency and presence penalties, given as a
//           per-row list the host builds) applied to l' in sampler.h's order, then greedy argmax
//           (lowest id) or temperature, top-k, top-p, min-p and the Philox draw, with every sum,
//           comparison and walk in the host's order (sampler_core.h holds the shared arithmetic).
// A row the device cannot finish in its fixed resources (top_k above kMaxSamplerCandidates, a
// top-p nucleus longer than that) comes back with status kSamplerHostFallback: the runner then
// samples it on the host from the same row. Vocabularies above kMaxSamplerVocab are refused
// (sample_rows and the CUDA runner name the limit).
// Work: one CTA of kSamplerThreads threads per row; the lane sums are kSumLanes (128) sequential
// double chains, one a thread (the host's order), so a row costs about V / 128 dependent adds per
// chain it needs, and a draw walks one lane.
// Order of a row's result never depends on other rows, the row's index or the row count.
// Thread safety: stateless; calls are enqueued on the given stream.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "core/status.h"
#include "sample/sampler_scalar.h"
#include "sample/sampler_task.h"

namespace vosti {

inline constexpr int kSamplerThreads = 512;
inline constexpr int kMaxSamplerCandidates = 1024;   // top_k / nucleus length the device sorts
inline constexpr int64_t kMaxSamplerVocab = 327680;  // above Gemma's 262,144; ids and counts stay int32
inline constexpr int kMaxSamplerTop = 20;            // sampling_params.h kMaxTopLogprobs

enum SamplerRowStatus : int32_t { kSamplerOk = 0, kSamplerHostFallback = 1 };

// What comes back per row (device memory; copied to the host in one transfer).
struct SamplerRowResult {
  double lanes[kSumLanes];  // raw log-softmax lane sums (sample/sampler_scalar.h's lanes)
  float max = 0.0f;         // raw sanitized max
  int32_t token = -1;
  float token_logit = 0.0f;  // l'[token]
  int32_t status = kSamplerOk;
  int32_t num_top = 0;
  int32_t top_ids[kMaxSamplerTop];
  float top_logits[kMaxSamplerTop];
};

// results[r] for each row r < num_rows of logits [num_rows, row_stride] (f32, device; the
// first `vocab` columns are the row). scratch: [num_rows, vocab] f32 device buffer the
// kernel may overwrite (rows with adjustments hold their adjusted logits there).
// REQUIRES: device pointers; tasks validated by the host (SamplingParams::validate).
// Errors: kInvalidArgument for bad sizes or null pointers; kInternal for a launch failure.
Status sample_rows(const float* logits, int64_t row_stride, int64_t vocab, const SamplerRowTask* tasks,
                   const SamplerAdjust* adjusts, float* scratch, SamplerRowResult* results, int64_t num_rows,
                   cudaStream_t stream);

}  // namespace vosti
