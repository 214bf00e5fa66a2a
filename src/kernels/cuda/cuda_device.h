// CudaDevice: what the kernels need to know of the GPU a deployment runs on (multiprocessors,
// architecture, memory), read from the driver once (read_cuda_device, when a model is loaded)
// and passed to every launch that depends on it, as CUTLASS's KernelHardwareInfo is: no launch
// queries the driver, and nothing about the device is cached in a function-local static. The
// kernels' arithmetic never reads it (DESIGN.md rule 1): it only decides where work runs (grid
// sizes, which of equal-bits kernel forms runs: attention.h, gemm_schedule.h).
// Thread safety: a value type; read_cuda_device() may be called from any thread.
#pragma once

#include <cstddef>
#include <string>

#include "core/status.h"
#include "kernels/cuda/gemm/gemm_bf16.h"

namespace vosti {

struct CudaDevice {
  int ordinal = 0;                  // the CUDA device ordinal
  std::string name;                 // "NVIDIA H200"
  int num_sms = 0;                  // multiprocessors
  int compute_capability = 0;       // 90 for sm_90
  bool has_wgmma = false;           // sm_90 (H100, H200): the wgmma and TMA kernel forms run
  size_t total_memory = 0;          // bytes
  size_t shared_memory_per_sm = 0;  // bytes
  GemmDevice gemm() const { return {ordinal, num_sms, has_wgmma}; }
};

// The calling thread's current device. Errors: kFailedPrecondition "no CUDA device" without a
// usable GPU; kInternal for another CUDA failure.
Result<CudaDevice> read_cuda_device();

}  // namespace vosti
