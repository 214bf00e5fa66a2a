// Token masks on the GPU (structured outputs): a masked row's disallowed logits set to -inf in
// place, before the sampler, the digests and the whole-row copies read the row, so the device
// computes what sample/token_bitmask.h's apply_token_bitmask does on the host (the sampler's step
// 3b, sample/sampler.h). Work: one thread per (row, token); a thread reads its token's bit and
// writes its own logit or nothing. No reduction, nothing depends on other rows or other tokens.
// Thread safety: stateless; calls are enqueued on the given stream.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "core/status.h"

namespace vosti {

// For i < num: logits[rows[i] * row_stride + t] = -inf for every t < vocab whose bit is clear in
// masks[i * mask_words ...] (bit t % 32 of word t / 32). REQUIRES: device pointers; mask_words >=
// (vocab + 31) / 32. Errors: kInvalidArgument for bad sizes; kInternal for launch failures.
Status apply_token_masks(float* logits, int64_t row_stride, int64_t vocab, const int32_t* rows, const uint32_t* masks,
                         int64_t mask_words, int64_t num, cudaStream_t stream);

}  // namespace vosti
