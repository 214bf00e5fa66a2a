// NcclLibrary: NCCL (libnccl.so.2) opened at run time with dlopen, and NcclGroup: one
// communicator per GPU of a tensor-parallel group, made together in this process.
//
// Why at run time: a deployment with tensor_parallel_size 1 never touches NCCL, so neither the
// build nor the binary needs it (the GPU bundle ships without its 200 MB; the GPU machine
// provides it: its CUDA toolkit's or PyTorch's nvidia-nccl wheel, scripts/gpu-run). NCCL's C API
// is stable; the few types and constants used are declared below as NCCL declares them (the
// collective tests check them against <nccl.h> at compile time where the header exists).
//
// Only data movement is taken from NCCL on the engine's path (ncclAllGather: bytes, no
// arithmetic); every sum is ours, in rank order (allreduce.h). ncclAllReduce is loaded for the
// planted violation and the benchmark only.
// Thread safety: an NcclLibrary is immutable after load(). An NcclGroup's communicators are
// each used by one thread at a time (the rank's); abort() may be called from any thread.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/status.h"

namespace vosti {

// NCCL's C types, as nccl.h declares them (NCCL >= 2.0; checked where the header exists).
namespace nccl_abi {
struct Comm;               // ncclComm
using CommHandle = Comm*;  // ncclComm_t
using Result = int;        // ncclResult_t
inline constexpr Result kSuccess = 0;
inline constexpr int kFloat32 = 7;  // ncclDataType_t ncclFloat32
inline constexpr int kSum = 0;      // ncclRedOp_t ncclSum
}  // namespace nccl_abi

class NcclLibrary {
 public:
  // Opens libnccl.so.2 (the dynamic loader's search path: LD_LIBRARY_PATH, the cache).
  // Errors: kFailedPrecondition naming the library, the loader's message and the fix.
  static Result<std::shared_ptr<const NcclLibrary>> load();
  ~NcclLibrary();
  NcclLibrary(const NcclLibrary&) = delete;
  NcclLibrary& operator=(const NcclLibrary&) = delete;

  // NCCL's version code (22809 for 2.28.9).
  int version() const { return version_; }
  // A Status for an NCCL result: ok for success, else kInternal naming `what` and NCCL's message.
  Status status(nccl_abi::Result r, const char* what) const;

  // The entry points, as NCCL declares them.
  nccl_abi::Result (*comm_init_all)(nccl_abi::CommHandle* comms, int ndev, const int* devlist) = nullptr;
  nccl_abi::Result (*comm_destroy)(nccl_abi::CommHandle comm) = nullptr;
  nccl_abi::Result (*comm_abort)(nccl_abi::CommHandle comm) = nullptr;
  nccl_abi::Result (*all_gather)(const void* send, void* recv, size_t send_count, int dtype, nccl_abi::CommHandle comm,
                                 cudaStream_t stream) = nullptr;
  nccl_abi::Result (*all_reduce)(const void* send, void* recv, size_t count, int dtype, int op,
                                 nccl_abi::CommHandle comm, cudaStream_t stream) = nullptr;
  const char* (*error_string)(nccl_abi::Result r) = nullptr;

 private:
  NcclLibrary() = default;
  void* handle_ = nullptr;
  int version_ = 0;
};

// One rank's view of a group, passed by value to the collectives (allreduce.h).
struct RankComm {
  const NcclLibrary* nccl = nullptr;
  nccl_abi::CommHandle comm = nullptr;
  int rank = 0;
  int size = 1;
};

class NcclGroup {
 public:
  // Communicators for `devices` (rank r on devices[r]), made with ncclCommInitAll.
  // REQUIRES: devices distinct and present. Errors: kInvalidArgument for an empty list;
  // NCCL's errors as kInternal.
  static Result<NcclGroup> create(std::shared_ptr<const NcclLibrary> nccl, std::span<const int> devices);
  NcclGroup() = default;
  NcclGroup(NcclGroup&& other) noexcept;
  NcclGroup& operator=(NcclGroup&& other) noexcept;
  ~NcclGroup();

  int size() const { return static_cast<int>(comms_.size()); }
  RankComm rank(int r) const { return RankComm{nccl_.get(), comms_[static_cast<size_t>(r)], r, size()}; }
  // Aborts every communicator: collectives in flight return, and kernels waiting on a peer that
  // never came stop. The group is unusable afterwards (a runner failure).
  void abort();

 private:
  void release();
  std::shared_ptr<const NcclLibrary> nccl_;
  std::vector<nccl_abi::CommHandle> comms_;
  bool aborted_ = false;
};

}  // namespace vosti
