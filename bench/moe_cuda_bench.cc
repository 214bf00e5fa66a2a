// The grouped expert GEMM (kernels/cuda/moe/moe_kernels.h) at an MoE model's expert shapes
// (default Qwen3-30B-A3B: 128 experts, top-8, hidden 2048, expert FFN 768), 1 to 4,096 tokens
// with uniform random routing: gate_up then down over the permuted rows, beside a cuBLAS loop
// over the experts (cublasGemmEx per expert with its rows, default heuristics, not batch
// invariant) on the same rows in the same run. Median of 20 timed repetitions after 3 warm-ups.
//   build/bench/moe_cuda_bench [experts top_k hidden expert_ffn]
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <random>
#include <vector>

#include "kernels/cuda/moe/moe_kernels.h"

namespace {

#define CK(x)                                                                                 \
  do {                                                                                        \
    cudaError_t e_ = (x);                                                                     \
    if (e_ != cudaSuccess) {                                                                  \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      std::exit(1);                                                                           \
    }                                                                                         \
  } while (0)

void* dev(size_t bytes, int fill) {
  void* p = nullptr;
  CK(cudaMalloc(&p, bytes));
  CK(cudaMemset(p, fill, bytes));  // 0x3c3c: bf16 ~0.0115, finite
  return p;
}

// Median milliseconds of fn over 20 repetitions after 3 warm-ups.
template <class F>
float median_ms(F fn) {
  cudaEvent_t a, b;
  CK(cudaEventCreate(&a));
  CK(cudaEventCreate(&b));
  for (int i = 0; i < 3; ++i) fn();
  std::vector<float> t;
  for (int i = 0; i < 20; ++i) {
    CK(cudaEventRecord(a));
    fn();
    CK(cudaEventRecord(b));
    CK(cudaEventSynchronize(b));
    float ms = 0;
    CK(cudaEventElapsedTime(&ms, a, b));
    t.push_back(ms);
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  using namespace vosti;
  const int E = argc > 1 ? std::atoi(argv[1]) : 128, k = argc > 2 ? std::atoi(argv[2]) : 8;
  const int H = argc > 3 ? std::atoi(argv[3]) : 2048, I = argc > 4 ? std::atoi(argv[4]) : 768;
  const int W = (I + 63) / 64 * 64;
  const MoeGemmSchedule gu = select_moe_gemm_schedule(2 * W, H).value();
  const MoeGemmSchedule dn = select_moe_gemm_schedule(H, W).value();
  const int max_t = 4096;
  const int64_t max_p = int64_t{max_t} * k, rows = moe_rows_with_scratch(max_p, gu.block_m);
  auto* w_gu = static_cast<uint16_t*>(dev(size_t(E) * 2 * W * H * 2, 0x3c));
  auto* w_dn = static_cast<uint16_t*>(dev(size_t(E) * H * W * 2, 0x3c));
  auto* x = static_cast<uint16_t*>(dev(size_t(rows) * H * 2, 0x3c));
  auto* act = static_cast<uint16_t*>(dev(size_t(rows) * W * 2, 0x3c));
  auto* y_gu = static_cast<float*>(dev(size_t(rows) * 2 * W * 4, 0));
  auto* y = static_cast<float*>(dev(size_t(rows) * H * 4, 0));
  auto* ex = static_cast<int32_t*>(dev(size_t(max_p) * 4, 0));
  auto* pos = static_cast<int32_t*>(dev(size_t(max_p) * 4, 0));
  auto* src = static_cast<int32_t*>(dev(size_t(max_p) * 4, 0));
  const int64_t cap_tiles = moe_max_tiles(max_p, E, gu.block_m);
  auto* tiles = static_cast<MoeTile*>(dev(size_t(cap_tiles) * sizeof(MoeTile), 0));
  auto* num_tiles = static_cast<int32_t*>(dev(4, 0));
  cublasHandle_t handle;
  if (cublasCreate(&handle) != CUBLAS_STATUS_SUCCESS) return 1;
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  std::printf("moe_cuda_bench on %s: %d experts, top-%d, hidden %d, expert FFN %d (gate_up + down)\n", prop.name, E, k,
              H, I);
  std::printf("%6s %8s %8s %10s %10s %8s\n", "tokens", "rows", "experts", "ours_ms", "cublas_ms", "ratio");
  std::mt19937_64 rng(1);
  std::vector<int32_t> all(static_cast<size_t>(E));
  std::iota(all.begin(), all.end(), 0);
  for (int T : {1, 8, 64, 256, 1024, 4096}) {
    const int64_t P = int64_t{T} * k;
    std::vector<int32_t> h_ex;
    std::vector<int> count(static_cast<size_t>(E), 0);
    for (int t = 0; t < T; ++t) {
      std::shuffle(all.begin(), all.end(), rng);
      std::vector<int32_t> pick(all.begin(), all.begin() + k);
      std::sort(pick.begin(), pick.end());
      for (int32_t e : pick) ++count[static_cast<size_t>(e)];
      h_ex.insert(h_ex.end(), pick.begin(), pick.end());
    }
    CK(cudaMemcpy(ex, h_ex.data(), h_ex.size() * 4, cudaMemcpyHostToDevice));
    MoePermuteArgs pa;
    pa.experts = ex;
    pa.num_entries = P;
    pa.top_k = k;
    pa.num_experts = E;
    pa.block_m = gu.block_m;
    pa.pos = pos;
    pa.src_token = src;
    pa.tiles = tiles;
    pa.num_tiles = num_tiles;
    pa.max_tiles = cap_tiles;
    if (!moe_permute(pa, nullptr).ok()) return 1;
    MoeGroupedGemmArgs g;
    g.tiles = tiles;
    g.num_tiles = num_tiles;
    g.max_tiles = moe_max_tiles(P, E, gu.block_m);
    g.scratch_row = P;
    const float ours = median_ms([&] {
      g.x = x, g.w = w_gu, g.y = y_gu;
      (void)moe_grouped_gemm(gu, g, nullptr);
      g.x = act, g.w = w_dn, g.y = y;
      (void)moe_grouped_gemm(dn, g, nullptr);
    });
    const float alpha = 1.f, beta = 0.f;
    const float theirs = median_ms([&] {
      int64_t row0 = 0;
      for (int e = 0; e < E; ++e) {
        const int m = count[static_cast<size_t>(e)];
        if (m == 0) continue;
        cublasGemmEx(handle, CUBLAS_OP_T, CUBLAS_OP_N, 2 * W, m, H, &alpha, w_gu + size_t(e) * 2 * W * H, CUDA_R_16BF,
                     H, x + row0 * H, CUDA_R_16BF, H, &beta, y_gu + row0 * 2 * W, CUDA_R_32F, 2 * W, CUBLAS_COMPUTE_32F,
                     CUBLAS_GEMM_DEFAULT);
        cublasGemmEx(handle, CUBLAS_OP_T, CUBLAS_OP_N, H, m, W, &alpha, w_dn + size_t(e) * H * W, CUDA_R_16BF, W,
                     act + row0 * W, CUDA_R_16BF, W, &beta, y + row0 * H, CUDA_R_32F, H, CUBLAS_COMPUTE_32F,
                     CUBLAS_GEMM_DEFAULT);
        row0 += m;
      }
    });
    const int used = static_cast<int>(std::count_if(count.begin(), count.end(), [](int c) { return c > 0; }));
    std::printf("%6d %8lld %8d %10.4f %10.4f %8.2f\n", T, static_cast<long long>(P), used, ours, theirs, ours / theirs);
  }
  CK(cudaDeviceSynchronize());
  return 0;
}
