// Benchmark of the paged attention on the GPU (kernels/cuda/attention/attention.h) at the cases of the
// peers' anchors (../shared/anchors/attn_anchors.py: 32 query heads, 8 KV heads, head_dim 128,
// bf16): causal prefill of whole prompts (B x L) and decode (B sequences attending over ctx
// positions), the KV in a shuffled paged pool (block 16). Each case: the tensor-core family
// through its plan, eager (the launcher's grid) and for decode also as a graph runs it (the
// runner's persistent grid), at several splits; the per-query family where it finishes in reasonable
// time; the device-to-device copy bandwidth in the same run. Two cases run under Mistral-7B-v0.1's
// sliding window of 4,096 positions (their TB/s count the bytes the window lets them read). Timing: CUDA events around
// each launch after an L2 flush (a 256 MiB memset, as triton's do_bench), median of --reps.
//   attention_cuda_bench [--reps N] [--json FILE] [--quick] [--case NAME (a prefix: "decode 64 x 2048 split 512")]
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "kernels/cuda/attention/attention.h"
#include "kernels/cuda/attention/attention_plan.h"
#include "kernels/cuda/attention/attention_kernels.h"
#include "kernels/cuda/cuda_device.h"
#include "tests/model_cuda/device_attention_plan.h"

namespace {

using namespace vosti;

#define CHECK_CUDA(x)                                                                          \
  do {                                                                                         \
    const cudaError_t e_ = (x);                                                                \
    if (e_ != cudaSuccess) {                                                                   \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      std::exit(1);                                                                            \
    }                                                                                          \
  } while (0)
#define CHECK_OK(x)                                                                    \
  do {                                                                                 \
    const ::vosti::Status s_ = (x);                                                    \
    if (!s_.ok()) {                                                                    \
      std::fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, s_.to_string().c_str()); \
      std::exit(1);                                                                    \
    }                                                                                  \
  } while (0)

constexpr int kHeads = 32, kKvHeads = 8, kHd = 128, kBlock = 16;

struct Timer {
  void* flush = nullptr;  // the L2 flush buffer
  size_t flush_bytes = 256ull << 20;
  cudaEvent_t a{}, b{};
  Timer() {
    CHECK_CUDA(cudaMalloc(&flush, flush_bytes));
    CHECK_CUDA(cudaEventCreate(&a));
    CHECK_CUDA(cudaEventCreate(&b));
  }
  // Median microseconds of fn() over reps, each after an L2 flush (or back to back, as the
  // PyTorch anchors time, with flush = false).
  template <typename F>
  double median_us(int reps, F&& fn, bool flush = true) {
    fn();  // warm-up (and the first launch's attribute setting)
    CHECK_CUDA(cudaDeviceSynchronize());
    std::vector<double> t;
    for (int i = 0; i < reps; ++i) {
      if (flush) CHECK_CUDA(cudaMemsetAsync(this->flush, i & 0xff, flush_bytes));
      CHECK_CUDA(cudaEventRecord(a));
      fn();
      CHECK_CUDA(cudaEventRecord(b));
      CHECK_CUDA(cudaEventSynchronize(b));
      float ms = 0;
      CHECK_CUDA(cudaEventElapsedTime(&ms, a, b));
      t.push_back(ms * 1e3);
    }
    std::sort(t.begin(), t.end());
    return t[t.size() / 2];
  }
};

// A pool holding `seqs` sequences of `len` positions each, pages shuffled, random bf16 values.
struct Case {
  std::string kind;  // prefill or decode
  int batch = 0;
  int len = 0;     // prefill: prompt length; decode: context (positions attended)
  int window = 0;  // sliding window (Mistral-7B-v0.1's 4,096); 0: none
};

struct Pool {
  uint16_t* k = nullptr;
  uint16_t* v = nullptr;
  int32_t* tables = nullptr;
  int32_t* stride = nullptr;
  CudaKvLayer layer{};
  int64_t blocks = 0;
  Pool(int seqs, int len, std::mt19937& rng) {
    const int per_seq = (len + kBlock - 1) / kBlock;
    blocks = static_cast<int64_t>(seqs) * per_seq;
    const size_t elems = static_cast<size_t>(blocks) * kBlock * kKvHeads * kHd;
    std::vector<uint16_t> host(elems);
    std::uniform_int_distribution<int> bits(0x3c00, 0x3f80);  // bf16 in [2^-7, 1): finite, varied
    for (auto& x : host) x = static_cast<uint16_t>(bits(rng) | (rng() & 1 ? 0x8000 : 0));
    CHECK_CUDA(cudaMalloc(&k, elems * 2));
    CHECK_CUDA(cudaMalloc(&v, elems * 2));
    CHECK_CUDA(cudaMemcpy(k, host.data(), elems * 2, cudaMemcpyHostToDevice));
    std::reverse(host.begin(), host.end());
    CHECK_CUDA(cudaMemcpy(v, host.data(), elems * 2, cudaMemcpyHostToDevice));
    std::vector<int32_t> perm(static_cast<size_t>(blocks));
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), rng);
    CHECK_CUDA(cudaMalloc(&tables, perm.size() * 4));
    CHECK_CUDA(cudaMemcpy(tables, perm.data(), perm.size() * 4, cudaMemcpyHostToDevice));
    CHECK_CUDA(cudaMalloc(&stride, 4));
    CHECK_CUDA(cudaMemcpy(stride, &per_seq, 4, cudaMemcpyHostToDevice));
    layer = CudaKvLayer{k, v, DType::kBF16, blocks, kBlock, kKvHeads, kHd};
  }
  ~Pool() {
    cudaFree(k);
    cudaFree(v);
    cudaFree(tables);
    cudaFree(stride);
  }
};

struct Measured {
  std::string name;
  double us = 0;
  double tflops = 0;
  double kv_tbps = 0;
  double copy_fraction = 0;
};

// FLOPs of causal attention as the anchors count them (4 * B * H * Lq * Lk * d, halved when causal;
// under a window, 4 * H * d per (query, key) pair the window keeps).
double flops(const Case& c) {
  if (c.window > 0 && c.kind == "prefill") {
    double pairs = 0;
    for (int p = 0; p < c.len; ++p) pairs += std::min(p + 1, c.window);
    return 4.0 * c.batch * kHeads * pairs * kHd;
  }
  if (c.kind == "prefill") return 4.0 * c.batch * kHeads * static_cast<double>(c.len) * c.len * kHd / 2;
  return 4.0 * c.batch * kHeads * static_cast<double>(c.window > 0 ? std::min(c.len, c.window) : c.len) * kHd;
}
// KV bytes the step must read: each sequence's positions, or the last window of them.
double kv_bytes(const Case& c) {
  const int read = c.window > 0 ? std::min(c.len, c.window) : c.len;
  return 2.0 * c.batch * static_cast<double>(read) * kKvHeads * kHd * 2;
}

}  // namespace

int main(int argc, char** argv) {
  int reps = 30;
  bool quick = false;
  std::string json, only;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--reps" && i + 1 < argc) {
      reps = std::stoi(argv[++i]);
    } else if (a == "--json" && i + 1 < argc) {
      json = argv[++i];
    } else if (a == "--quick") {
      quick = true;
    } else if (a == "--case" && i + 1 < argc) {
      only = argv[++i];
    } else {
      std::fprintf(stderr, "usage: attention_cuda_bench [--reps N] [--json FILE] [--quick] [--case NAME]\n");
      return 2;
    }
  }
  cudaDeviceProp prop{};
  CHECK_CUDA(cudaGetDeviceProperties(&prop, 0));
  const AttentionKernels kernels = prepare_attention_kernels(read_cuda_device().value(), kHd).value();
  Timer timer;
  std::mt19937 rng(1);

  // Copy bandwidth (bytes read + written) in the same run.
  double copy_tbps = 0;
  {
    const size_t bytes = 2ull << 30;
    void *src = nullptr, *dst = nullptr;
    CHECK_CUDA(cudaMalloc(&src, bytes));
    CHECK_CUDA(cudaMalloc(&dst, bytes));
    CHECK_CUDA(cudaMemset(src, 1, bytes));
    const double us =
        timer.median_us(reps, [&] { CHECK_CUDA(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice)); });
    copy_tbps = 2.0 * bytes / (us * 1e-6) / 1e12;
    cudaFree(src);
    cudaFree(dst);
  }
  std::printf("device %s, %d SMs; copy %.2f TB/s\n", prop.name, prop.multiProcessorCount, copy_tbps);

  std::vector<Case> cases = {{"prefill", 1, 1024},  {"prefill", 8, 1024},       {"prefill", 1, 8192},
                             {"prefill", 1, 2048},  {"prefill", 1, 4096},       {"decode", 1, 2048},
                             {"decode", 1, 8192},   {"decode", 1, 32768},       {"decode", 64, 2048},
                             {"decode", 256, 1536}, {"prefill", 1, 8192, 4096}, {"decode", 64, 8192, 4096}};
  if (quick) cases = {{"prefill", 8, 1024}, {"decode", 64, 2048}};
  std::vector<Measured> results;
  std::printf("%-34s %10s %9s %9s %8s\n", "case", "us", "TFLOP/s", "KV TB/s", "of copy");
  for (const Case& c : cases) {
    const std::string base = c.kind + " " + std::to_string(c.batch) + " x " + std::to_string(c.len) +
                             (c.window > 0 ? " window " + std::to_string(c.window) : "");
    // --case names a configuration by a prefix: a case can hold one only if either starts the other.
    if (base.rfind(only, 0) != 0 && only.rfind(base, 0) != 0) continue;
    const int seqs = c.batch;
    Pool pool(seqs, c.len, rng);
    // The step's rows: every position of each prompt (prefill), or each sequence's last.
    std::vector<int32_t> positions, row_seq;
    for (int s = 0; s < seqs; ++s) {
      const int first = c.kind == "prefill" ? 0 : c.len - 1;
      for (int p = first; p < c.len; ++p) positions.push_back(p), row_seq.push_back(s);
    }
    const int64_t m = static_cast<int64_t>(positions.size());
    float* q = nullptr;
    uint16_t* out = nullptr;
    int32_t *pos_dev = nullptr, *seq_dev = nullptr;
    CHECK_CUDA(cudaMalloc(&q, static_cast<size_t>(m) * kHeads * kHd * 4));
    CHECK_CUDA(cudaMalloc(&out, static_cast<size_t>(m) * kHeads * kHd * 2));
    CHECK_CUDA(cudaMalloc(&pos_dev, static_cast<size_t>(m) * 4));
    CHECK_CUDA(cudaMalloc(&seq_dev, static_cast<size_t>(m) * 4));
    {
      std::vector<float> qh(static_cast<size_t>(m) * kHeads * kHd);
      std::normal_distribution<float> dist(0.f, 1.f);
      for (auto& x : qh) x = dist(rng);
      CHECK_CUDA(cudaMemcpy(q, qh.data(), qh.size() * 4, cudaMemcpyHostToDevice));
      CHECK_CUDA(cudaMemcpy(pos_dev, positions.data(), positions.size() * 4, cudaMemcpyHostToDevice));
      CHECK_CUDA(cudaMemcpy(seq_dev, row_seq.data(), row_seq.size() * 4, cudaMemcpyHostToDevice));
    }
    AttentionArgs a;
    a.q = q;
    a.q_row_stride = kHeads * kHd;
    a.num_heads = kHeads;
    a.positions = pos_dev;
    a.row_seq = seq_dev;
    a.block_tables = pool.tables;
    a.block_table_stride = pool.stride;
    a.scale = 1.0f / std::sqrt(static_cast<float>(kHd));
    a.window = c.window;
    a.out = out;
    a.out_row_stride = kHeads * kHd;
    a.out_dtype = DType::kBF16;
    a.m = m;
    a.kernels = &kernels;
    const auto record = [&](const std::string& name, double us) {
      Measured r{name, us, flops(c) / (us * 1e-6) / 1e12, kv_bytes(c) / (us * 1e-6) / 1e12, 0};
      r.copy_fraction = r.kv_tbps / copy_tbps;
      std::printf("%-34s %10.1f %9.1f %9.2f %7.0f%%\n", name.c_str(), us, r.tflops, r.kv_tbps, 100 * r.copy_fraction);
      results.push_back(r);
    };
    const std::vector<int> splits =
        c.kind == "prefill" ? std::vector<int>{512} : std::vector<int>{256, 512, 1024, 2048};
    // The per-split launch's CTAs a KV head in a decode graph (the runner's), which the plan folds
    // decode rows against where the decode kernel runs (the runner's deployment).
    const int graph_ctas = (2 * prop.multiProcessorCount + kKvHeads - 1) / kKvHeads;
    const int fold_ctas = attention_decode_fits(kHd, kHeads / kKvHeads, kBlock) ? graph_ctas : 0;
    struct Config {
      int split, folded_rows;
      bool cut;  // decode rows cut per split whatever the step (the plan before decode folding)
    };
    std::vector<Config> configs;
    for (int split : splits) {
      configs.push_back({split, kAttnRowsPerCta, false});
      if (c.kind == "decode") configs.push_back({split, kAttnRowsPerCta, true});
    }
    if (c.kind == "prefill")  // 128-row CTAs; the split's cost to prefill (each split's state is folded)
      for (int split : {512, 1024, 2048}) configs.push_back({split, 2 * kAttnRowsPerCta, false});
    for (const auto& [split, folded_rows, cut] : configs) {
      const std::string name = base + " split " + std::to_string(split) +
                               (folded_rows != kAttnRowsPerCta ? " rows 128" : "") + (cut ? " cut" : "");
      if (name.rfind(only, 0) != 0) continue;  // --case: only the configurations it names (a profile's)
      AttentionShape shape{kHeads, kKvHeads, kHd, split, folded_rows, c.window};
      shape.decode_fold_ctas = cut ? 0 : fold_ctas;
      if (cut && !attention_decode_rows_fold(positions, row_seq,
                                             {kHeads, kKvHeads, kHd, split, folded_rows, c.window, fold_ctas}))
        continue;  // the same plan as the configuration without the cut
      const int32_t capacity = seqs * attention_num_splits(c.len, split) + 16;
      AttentionPlan plan;
      const auto t0 = std::chrono::steady_clock::now();
      CHECK_OK(plan_attention(positions, row_seq, shape, capacity, &plan));
      const double plan_us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
      cuda_test::DeviceAttentionPlan work(m, capacity, kHeads, kHd);
      auto view = work.upload(plan);
      CHECK_OK(view.status());
      a.work = view.value();
      record(name, timer.median_us(reps, [&] { CHECK_OK(attention_tensor_cores(a, pool.layer, nullptr)); }));
      if (c.kind == "prefill") {  // the anchors' method: back to back, KV warm in the L2
        record(name + " no flush", timer.median_us(
                                       reps, [&] { CHECK_OK(attention_tensor_cores(a, pool.layer, nullptr)); }, false));
      }
      std::printf("    plan: %zu folded, %zu per-split items%s, %zu merges, %.1f us on the host\n", plan.folded.size(),
                  plan.per_split.size(), plan.decode_folds ? " (folding decodes)" : "", plan.merges.size(), plan_us);
      if (c.kind == "decode" && plan.folded.empty()) {  // as a decode graph launches it
        a.work = work.graph_view(split, c.window, m, graph_ctas);
        record(name + " graph grid",
               timer.median_us(reps, [&] { CHECK_OK(attention_tensor_cores(a, pool.layer, nullptr)); }));
      }
    }
    if ((c.kind == "decode" || c.len <= 2048) && only.empty()) {
      record(base + " per-query (old)",
             timer.median_us(std::min(reps, 10), [&] { CHECK_OK(attention_per_query(a, pool.layer, nullptr)); }));
    }
    CHECK_CUDA(cudaDeviceSynchronize());
    cudaFree(q);
    cudaFree(out);
    cudaFree(pos_dev);
    cudaFree(seq_dev);
  }
  if (!json.empty()) {
    std::ofstream f(json, std::ios::app);
    for (const Measured& r : results) {
      f << "{\"bench\": \"attention\", \"device\": \"" << prop.name << "\", \"case\": \"" << r.name
        << "\", \"us\": " << r.us << ", \"tflops\": " << r.tflops << ", \"kv_tbps\": " << r.kv_tbps
        << ", \"copy_tbps\": " << copy_tbps << ", \"of_copy\": " << r.copy_fraction << "}\n";
    }
  }
  return 0;
}
