// DeviceMemory: one owned cudaMalloc allocation, moved, never copied; freed on
// destruction. PinnedMemory (below): the same for page-locked host memory. Allocation failures become
// RESOURCE_EXHAUSTED naming what was being allocated and how many bytes, so "out of GPU memory" reaches the user as
// such. Thread safety: a value type; the memory itself is used on the owner's streams.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <string>
#include <utility>

#include "core/status.h"

namespace vosti {

class DeviceMemory {
 public:
  DeviceMemory() = default;
  ~DeviceMemory() { reset(); }
  DeviceMemory(DeviceMemory&& other) noexcept
      : ptr_(std::exchange(other.ptr_, nullptr)), bytes_(std::exchange(other.bytes_, 0)) {}
  DeviceMemory& operator=(DeviceMemory&& other) noexcept {
    if (this != &other) {
      reset();
      ptr_ = std::exchange(other.ptr_, nullptr);
      bytes_ = std::exchange(other.bytes_, 0);
    }
    return *this;
  }
  DeviceMemory(const DeviceMemory&) = delete;
  DeviceMemory& operator=(const DeviceMemory&) = delete;

  // `bytes` of uninitialised device memory (bytes == 0 gives an empty DeviceMemory).
  // Errors: kResourceExhausted naming `what` when the GPU is out of memory; kInternal otherwise.
  static Result<DeviceMemory> allocate(size_t bytes, const std::string& what) {
    DeviceMemory m;
    if (bytes == 0) return m;
    const cudaError_t err = cudaMalloc(&m.ptr_, bytes);
    if (err != cudaSuccess) {
      m.ptr_ = nullptr;
      (void)cudaGetLastError();  // a failed cudaMalloc is not sticky: clear it for later launch checks
      const std::string msg = "cudaMalloc of " + std::to_string(bytes) + " bytes for " + what + ": " +
                              cudaGetErrorName(err) + " (" + cudaGetErrorString(err) + ")";
      if (err == cudaErrorMemoryAllocation) return resource_exhausted("out of GPU memory: " + msg);
      return internal_error(msg);
    }
    m.bytes_ = bytes;
    return m;
  }

  // A copy of host[bytes] on the device (synchronous).
  static Result<DeviceMemory> upload(const void* host, size_t bytes, const std::string& what) {
    VOSTI_ASSIGN_OR_RETURN(DeviceMemory m, allocate(bytes, what));
    if (bytes > 0) {
      const cudaError_t err = cudaMemcpy(m.ptr_, host, bytes, cudaMemcpyHostToDevice);
      if (err != cudaSuccess) {
        return internal_error("cudaMemcpy of " + what + " to the GPU: " + cudaGetErrorName(err) + " (" +
                              cudaGetErrorString(err) + ")");
      }
    }
    return m;
  }

  template <typename T>
  T* as() const {
    return static_cast<T*>(ptr_);
  }
  size_t bytes() const { return bytes_; }
  bool empty() const { return ptr_ == nullptr; }

 private:
  void reset() {
    if (ptr_ != nullptr) (void)cudaFree(ptr_);  // cannot fail usefully in a destructor
    ptr_ = nullptr;
    bytes_ = 0;
  }

  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

// PinnedMemory: one owned page-locked host allocation (cudaMallocHost), so that copies to and
// from the device are real asynchronous DMA. Moved, never copied; freed on destruction.
class PinnedMemory {
 public:
  PinnedMemory() = default;
  ~PinnedMemory() { reset(); }
  PinnedMemory(PinnedMemory&& other) noexcept
      : ptr_(std::exchange(other.ptr_, nullptr)), bytes_(std::exchange(other.bytes_, 0)) {}
  PinnedMemory& operator=(PinnedMemory&& other) noexcept {
    if (this != &other) {
      reset();
      ptr_ = std::exchange(other.ptr_, nullptr);
      bytes_ = std::exchange(other.bytes_, 0);
    }
    return *this;
  }
  PinnedMemory(const PinnedMemory&) = delete;
  PinnedMemory& operator=(const PinnedMemory&) = delete;

  // `bytes` of page-locked host memory. Errors: kResourceExhausted naming `what`.
  static Result<PinnedMemory> allocate(size_t bytes, const std::string& what) {
    PinnedMemory m;
    if (bytes == 0) return m;
    const cudaError_t err = cudaMallocHost(&m.ptr_, bytes);
    if (err != cudaSuccess) {
      m.ptr_ = nullptr;
      (void)cudaGetLastError();
      return resource_exhausted("cudaMallocHost of " + std::to_string(bytes) + " bytes for " + what + ": " +
                                cudaGetErrorString(err));
    }
    m.bytes_ = bytes;
    return m;
  }

  template <typename T>
  T* as() const {
    return static_cast<T*>(ptr_);
  }
  size_t bytes() const { return bytes_; }

 private:
  void reset() {
    if (ptr_ != nullptr) (void)cudaFreeHost(ptr_);
    ptr_ = nullptr;
    bytes_ = 0;
  }

  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

}  // namespace vosti
