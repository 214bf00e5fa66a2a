// Logits digests on the GPU: XXH3-128 (seed 0) of a logits row's raw f32 bytes, the
// function sample/logits_digest.h computes on the host, so that a request asking for digests
// never copies its rows to the host. Rows of 60 floats or fewer (240 bytes: XXH3's short
// paths) are not handled here: the runner digests those on the host.
// Work (xxh3_core.h's parallel form): one CTA per row; each thread sums the stripes of whole
// 1024-byte blocks (integer adds mod 2^64, any order), then eight threads chain the per-block
// scrambles in block order, then one thread merges. Nothing depends on other rows.
// Thread safety: stateless; calls are enqueued on the given stream.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "core/status.h"

namespace vosti {

inline constexpr int64_t kMinDeviceDigestVocab = 61;  // > 240 bytes

// digests[2 * i] = low64, digests[2 * i + 1] = high64 of row rows[i] of logits [*, row_stride]
// (its first `vocab` floats), for i < num. REQUIRES: device pointers, rows 4-byte aligned.
// Errors: kInvalidArgument for vocab < kMinDeviceDigestVocab or bad sizes; kInternal for launch failures.
Status digest_rows(const float* logits, int64_t row_stride, int64_t vocab, const int32_t* rows, int64_t num,
                   uint64_t* digests, cudaStream_t stream);

}  // namespace vosti
