// CUDA runtime errors as vosti::Status, for the boundary between the CUDA backend and
// its callers. Kernel launch failures and runtime errors become kInternal with the
// failing call named; nothing here aborts.
// Thread safety: pure functions.
#pragma once

#include <cuda_runtime.h>

#include <string>

#include "core/status.h"

namespace vosti {

// Ok if `err` is cudaSuccess, else kInternal naming `what` and the CUDA error string.
inline Status cuda_status(cudaError_t err, const char* what) {
  if (err == cudaSuccess) return Status();
  return internal_error(std::string(what) + ": " + cudaGetErrorName(err) + " (" + cudaGetErrorString(err) + ")");
}

// The launch error of the last kernel launch on this thread, as a Status.
inline Status cuda_launch_status(const char* kernel) { return cuda_status(cudaGetLastError(), kernel); }

}  // namespace vosti

#define VOSTI_CUDA_RETURN_IF_ERROR(expr)                                \
  do {                                                                  \
    ::vosti::Status vosti_cuda_s = ::vosti::cuda_status((expr), #expr); \
    if (!vosti_cuda_s.ok()) return vosti_cuda_s;                        \
  } while (0)
