// The simple form of the CUDA paged attention, kept for the tests only: one warp per (query,
// head) walking its KV tiles in order, exactly the order kernels/cuda/attention/attention.h documents.
// The production kernel spreads the same operations over a CTA; the attention tests check
// the two give the same bits on every query.
// Thread safety: stateless.
#pragma once

#include <cuda_runtime.h>

#include "kernels/cuda/attention/attention.h"

namespace vosti::cuda_test {

Status reference_attention(const AttentionArgs& args, CudaKvLayer kv, cudaStream_t stream);

}  // namespace vosti::cuda_test
