// Helpers for the CUDA backend's tests: device detection (tests skip with "no CUDA
// device" without one) and its description, an owning device buffer, random bf16/f32 data, and the relative
// error ||out - ref|| / ||ref|| that METHOD-style accuracy checks use.
// Thread safety: none needed (tests are single-threaded).
#pragma once

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <map>
#include <random>
#include <vector>

#include "core/dtype.h"
#include "kernels/cuda/attention/attention_kernels.h"
#include "kernels/cuda/cuda_device.h"

namespace vosti::cuda_test {

inline bool cuda_device_available() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}

// The test process's device, read once (the product reads it once per model: CudaDevice).
// REQUIRES: cuda_device_available().
inline const CudaDevice& device() {
  static const CudaDevice d = read_cuda_device().value();
  return d;
}

#define VOSTI_SKIP_WITHOUT_CUDA()                                                       \
  do {                                                                                  \
    if (!::vosti::cuda_test::cuda_device_available()) GTEST_SKIP() << "no CUDA device"; \
  } while (0)

// The attention kernels of head_dim on the test process's device, prepared once per head_dim
// (the product prepares them once per model: CudaModel::attention_kernels). REQUIRES: a device.
inline const AttentionKernels* attention_kernels(int head_dim) {
  static std::map<int, AttentionKernels> prepared;
  auto it = prepared.find(head_dim);
  if (it == prepared.end())
    it = prepared.emplace(head_dim, prepare_attention_kernels(device(), head_dim).value()).first;
  return &it->second;
}

// An owning device allocation of n elements of T (poisoned with 0xFF bytes: NaN for floats).
template <typename T>
class DeviceBuffer {
 public:
  explicit DeviceBuffer(size_t n) : n_(n) {
    if (cudaMalloc(&p_, sizeof(T) * (n == 0 ? 1 : n)) != cudaSuccess) p_ = nullptr;
    if (p_ != nullptr) cudaMemset(p_, 0xFF, sizeof(T) * n);
  }
  explicit DeviceBuffer(const std::vector<T>& host) : DeviceBuffer(host.size()) { upload(host); }
  ~DeviceBuffer() { cudaFree(p_); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  T* get() const { return p_; }
  size_t size() const { return n_; }
  void upload(const std::vector<T>& host, size_t offset = 0) {
    EXPECT_EQ(cudaMemcpy(p_ + offset, host.data(), sizeof(T) * host.size(), cudaMemcpyHostToDevice), cudaSuccess);
  }
  std::vector<T> download(size_t offset = 0, size_t count = SIZE_MAX) const {
    if (count == SIZE_MAX) count = n_ - offset;
    std::vector<T> out(count);
    EXPECT_EQ(cudaMemcpy(out.data(), p_ + offset, sizeof(T) * count, cudaMemcpyDeviceToHost), cudaSuccess);
    return out;
  }
  void poison() { EXPECT_EQ(cudaMemset(p_, 0xFF, sizeof(T) * n_), cudaSuccess); }

 private:
  T* p_ = nullptr;
  size_t n_ = 0;
};

// n bf16 values ~ N(0, scale^2), from `seed`.
inline std::vector<uint16_t> random_bf16(size_t n, uint64_t seed, float scale = 1.0f) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<uint16_t> out(n);
  for (auto& v : out) v = f32_to_bf16(dist(rng));
  return out;
}

inline std::vector<float> random_f32(size_t n, uint64_t seed, float scale = 1.0f, float mean = 0.0f) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> dist(mean, scale);
  std::vector<float> out(n);
  for (auto& v : out) v = dist(rng);
  return out;
}

// ||out - ref|| / ||ref|| over all elements; any NaN in out gives +inf.
inline double relative_error(const std::vector<double>& ref, const std::vector<double>& out) {
  double num = 0, den = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    if (std::isnan(out[i])) return INFINITY;
    num += (out[i] - ref[i]) * (out[i] - ref[i]);
    den += ref[i] * ref[i];
  }
  return std::sqrt(num / den);
}

inline bool same_bits(const void* a, const void* b, size_t bytes) { return std::memcmp(a, b, bytes) == 0; }

}  // namespace vosti::cuda_test
