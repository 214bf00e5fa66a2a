// The collectives of tensor parallelism, with a fixed reduction order (DESIGN.md rule 7).
//
// all_reduce (kGatherRankOrder, the engine's): NCCL all-gathers every rank's message into a
// [size, count] buffer on every rank (ncclAllGather: bytes moved, no arithmetic), then a local
// kernel sums the copies in rank order, element by element (rank_order_sum.h):
//   out[i] = ((c_0[i] + c_1[i]) + c_2[i]) + ... + c_{size-1}[i]   (f32 adds, never fused)
// Every rank computes the same chain on the same bits, so every rank gets the same bits, and the
// chain depends on nothing but the rank count: not on the message size (the step's token count),
// the element's index, the grid, or NCCL's algorithm, protocol and channel choices, which NCCL
// makes per message size and which decide the order of its own sums.
// Cost: each rank receives size x count values where a ring all-reduce moves about 2 x count; at
// decode sizes (tens of KB to a few MB) both are latency-bound (docs/BENCHMARKS.md measures it).
//
// kNcclSum is the planted violation (EngineConfig::tp_all_reduce_nccl_sum, tests only): NCCL's
// own ncclAllReduce, whose summation order follows its algorithm and message size. With two
// ranks it is bitwise the same (a + b == b + a in IEEE arithmetic); from three ranks on some
// elements differ at some sizes, which the tests and the harness show.
//
// all_gather_columns: the vocabulary-split lm_head's logits side by side, pure data movement.
// Shapes: row-major device buffers on the rank's device; "[m, n]": m rows of n values.
// Thread safety: calls are enqueued on the given stream; a RankComm is used by one thread at a
// time, and every rank must make the same calls in the same order (NCCL's rule).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "core/status.h"
#include "kernels/cuda/collective/nccl_library.h"

namespace vosti {

enum class AllReduceAlgorithm : uint8_t {
  kGatherRankOrder,  // ncclAllGather, then the rank-order sum (the engine's)
  kNcclSum,          // ncclAllReduce (planted violation: the order follows NCCL's choices)
};

// data[count] (f32) <- the sum of every rank's data[count], by `algorithm` (header comment).
// gather: scratch of [comm.size, count] f32 (unused by kNcclSum). A group of one rank leaves
// data as it is. Errors: NCCL's and CUDA's as kInternal.
Status all_reduce(const RankComm& comm, AllReduceAlgorithm algorithm, float* data, int64_t count, float* gather,
                  cudaStream_t stream);

// out[rows, comm.size * shard_cols] <- every rank's shard[rows, shard_cols] side by side:
// out[r, s * shard_cols + j] = shard of rank s [r, j], on every rank. gather: scratch of
// [comm.size, rows, shard_cols] f32. Errors: NCCL's and CUDA's as kInternal.
Status all_gather_columns(const RankComm& comm, const float* shard, int64_t rows, int64_t shard_cols, float* gather,
                          float* out, cudaStream_t stream);

// The local halves, without communication (one GPU runs them in the tests):
// out[count] <- the rank-order sum of copies[num_ranks, stride] (rank_order_sum.h), out apart
// from the copies. Errors: kInvalidArgument unless 1 <= num_ranks and 0 <= count <= stride.
Status rank_order_sum(const float* copies, int64_t stride, int num_ranks, int64_t count, float* out,
                      cudaStream_t stream);
// out[r, s * shard_cols + j] <- gathered[s, r, j] for s < num_ranks, r < rows, j < shard_cols.
Status interleave_columns(const float* gathered, int num_ranks, int64_t rows, int64_t shard_cols, float* out,
                          cudaStream_t stream);

}  // namespace vosti
