// Experiment (dev/, never linked into the engine): times logits_postprocess alone on
// 500 x 128256 random logits with the L2 flushed before each launch, so a profiler run
// (ncu) can look at its kernels without the whole benchmark.
//   nvcc -std=c++20 -O3 -arch=sm_90a -Isrc -I. dev/cuda/logits_probe/logits_probe.cu \
//        src/kernels/cuda/logits_kernels.cu src/core/status.cc -o logits_probe
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <vector>

#include "dev/cuda/logits_postprocess/logits_kernels.h"

__global__ void fill(float* x, size_t n) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    uint32_t h = uint32_t(i) * 2654435761u;
    h ^= h >> 15;
    x[i] = float(h % 20000) * 1e-3f - 10.f;
  }
}

int main() {
  const int64_t rows = 500, vocab = 128256;
  const size_t n = size_t(rows) * vocab;
  float *x = nullptr, *lp = nullptr;
  void* flush = nullptr;
  vosti::LogitsRowStats* stats = nullptr;
  void* ws = nullptr;
  const size_t ws_bytes = vosti::logits_workspace_bytes(rows, vocab);
  if (cudaMalloc(&x, n * 4) || cudaMalloc(&lp, n * 4) || cudaMalloc(&flush, 256 << 20) ||
      cudaMalloc(&stats, rows * sizeof(*stats)) || cudaMalloc(&ws, ws_bytes)) {
    std::printf("cudaMalloc failed\n");
    return 1;
  }
  fill<<<1024, 256>>>(x, n);
  cudaEvent_t a, b;
  cudaEventCreate(&a);
  cudaEventCreate(&b);
  for (int with_lp = 0; with_lp < 2; ++with_lp) {
    std::vector<float> t;
    for (int rep = 0; rep < 20; ++rep) {
      cudaMemsetAsync(flush, rep, 256 << 20);
      cudaEventRecord(a);
      const vosti::Status s =
          vosti::logits_postprocess(x, rows, vocab, stats, with_lp ? lp : nullptr, ws, ws_bytes, nullptr);
      cudaEventRecord(b);
      cudaEventSynchronize(b);
      if (!s.ok()) {
        std::printf("%s\n", s.to_string().c_str());
        return 1;
      }
      float ms = 0;
      cudaEventElapsedTime(&ms, a, b);
      t.push_back(ms * 1000);
    }
    std::sort(t.begin(), t.end());
    const double bytes = double(n) * 4 * (with_lp ? 2 : 1);
    std::printf("%s: median %.2f us, %.0f GB/s\n", with_lp ? "stats+logprobs" : "stats", t[10], bytes / t[10] / 1e3);
  }
  return cudaGetLastError() == cudaSuccess ? 0 : 1;
}
