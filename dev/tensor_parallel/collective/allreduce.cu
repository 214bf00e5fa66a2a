// The tensor-parallel collectives: NCCL all-gathers and the local rank-order kernels.
#include "kernels/cuda/collective/allreduce.h"

#include <algorithm>

#include "kernels/cuda/collective/rank_order_sum.h"
#include "kernels/cuda/cuda_status.h"

namespace vosti {
namespace {

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = 2048;  // a grid-stride loop past this (the order is per element)

int64_t cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

__global__ void rank_order_sum_kernel(const float* __restrict__ copies, int64_t stride, int num_ranks, int64_t count,
                                      int64_t num_groups, float* out) {
  const int64_t t = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t num_threads = static_cast<int64_t>(gridDim.x) * blockDim.x;
  rank_order::thread_share(copies, stride, num_ranks, count, num_groups, out, t, num_threads);
}

// One thread per output element of [rows, num_ranks * shard_cols], grid-stride.
__global__ void interleave_columns_kernel(const float* __restrict__ gathered, int num_ranks, int64_t rows,
                                          int64_t shard_cols, float* __restrict__ out) {
  const int64_t width = num_ranks * shard_cols;
  const int64_t total = rows * width;
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < total;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = e / width, c = e % width;
    const int64_t s = c / shard_cols, j = c % shard_cols;
    out[e] = gathered[(s * rows + r) * shard_cols + j];
  }
}

}  // namespace

Status rank_order_sum(const float* copies, int64_t stride, int num_ranks, int64_t count, float* out,
                      cudaStream_t stream) {
  if (num_ranks < 1 || count < 0 || count > stride)
    return invalid_argument("rank_order_sum: " + std::to_string(num_ranks) + " ranks, count " + std::to_string(count) +
                            ", stride " + std::to_string(stride));
  if (count == 0) return Status();
  const int64_t groups = rank_order::float4_aligned(copies, stride, out) ? count / 4 : 0;
  const int64_t work = std::max(groups, count - 4 * groups);
  const int64_t blocks = std::min(cdiv(work, kThreads), kMaxBlocks);
  rank_order_sum_kernel<<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(copies, stride, num_ranks, count,
                                                                                groups, out);
  return cuda_launch_status("rank_order_sum_kernel");
}

Status interleave_columns(const float* gathered, int num_ranks, int64_t rows, int64_t shard_cols, float* out,
                          cudaStream_t stream) {
  const int64_t total = rows * num_ranks * shard_cols;
  if (total == 0) return Status();
  const int64_t blocks = std::min(cdiv(total, kThreads), kMaxBlocks);
  interleave_columns_kernel<<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(gathered, num_ranks, rows,
                                                                                    shard_cols, out);
  return cuda_launch_status("interleave_columns_kernel");
}

Status all_reduce(const RankComm& comm, AllReduceAlgorithm algorithm, float* data, int64_t count, float* gather,
                  cudaStream_t stream) {
  if (comm.size == 1 || count == 0) return Status();
  const NcclLibrary& nccl = *comm.nccl;
  if (algorithm == AllReduceAlgorithm::kNcclSum) {
    return nccl.status(
        nccl.all_reduce(data, data, static_cast<size_t>(count), nccl_abi::kFloat32, nccl_abi::kSum, comm.comm, stream),
        "ncclAllReduce");
  }
  VOSTI_RETURN_IF_ERROR(
      nccl.status(nccl.all_gather(data, gather, static_cast<size_t>(count), nccl_abi::kFloat32, comm.comm, stream),
                  "ncclAllGather"));
  return rank_order_sum(gather, count, comm.size, count, data, stream);
}

Status all_gather_columns(const RankComm& comm, const float* shard, int64_t rows, int64_t shard_cols, float* gather,
                          float* out, cudaStream_t stream) {
  const int64_t count = rows * shard_cols;
  if (count == 0) return Status();
  if (comm.size == 1) {
    return cuda_status(
        cudaMemcpyAsync(out, shard, static_cast<size_t>(count) * sizeof(float), cudaMemcpyDeviceToDevice, stream),
        "all_gather_columns copy");
  }
  const NcclLibrary& nccl = *comm.nccl;
  VOSTI_RETURN_IF_ERROR(
      nccl.status(nccl.all_gather(shard, gather, static_cast<size_t>(count), nccl_abi::kFloat32, comm.comm, stream),
                  "ncclAllGather"));
  return interleave_columns(gather, comm.size, rows, shard_cols, out, stream);
}

}  // namespace vosti
