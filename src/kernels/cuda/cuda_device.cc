#include "kernels/cuda/cuda_device.h"

#include <cuda_runtime.h>

#include "kernels/cuda/cuda_status.h"

namespace vosti {

Result<CudaDevice> read_cuda_device() {
  int num_devices = 0;
  const cudaError_t count_err = cudaGetDeviceCount(&num_devices);
  if (count_err != cudaSuccess || num_devices == 0) {
    (void)cudaGetLastError();
    return failed_precondition(std::string("no CUDA device: cudaGetDeviceCount: ") +
                               (count_err == cudaSuccess ? "0 devices" : cudaGetErrorString(count_err)));
  }
  CudaDevice d;
  VOSTI_CUDA_RETURN_IF_ERROR(cudaGetDevice(&d.ordinal));
  cudaDeviceProp prop{};
  VOSTI_CUDA_RETURN_IF_ERROR(cudaGetDeviceProperties(&prop, d.ordinal));
  d.name = prop.name;
  d.num_sms = prop.multiProcessorCount;
  d.compute_capability = prop.major * 10 + prop.minor;
  d.has_wgmma = prop.major == 9 && prop.minor == 0;
  d.total_memory = prop.totalGlobalMem;
  d.shared_memory_per_sm = prop.sharedMemPerMultiprocessor;
  return d;
}

}  // namespace vosti
