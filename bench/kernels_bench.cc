// CPU kernel benchmarks at the default model's shapes (SmolLM2-135M: hidden 576,
// 9 heads x 64, 3 kv heads, intermediate 1536, vocab 49152).
//   build-*/bench/kernels_bench [--benchmark_filter=Matmul]
// Reports FLOP/s (2*m*n*k per matmul) and, for matmul, weight bytes/s (4*n*k).
#include <benchmark/benchmark.h>

#include <cmath>
#include <memory>
#include <random>
#include <vector>

#include "core/thread_pool.h"
#include "kernels/kernel_backend.h"

namespace vosti {
namespace {

std::vector<float> random_floats(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

// Args: m, k, n, threads.
void BM_Matmul(benchmark::State& state) {
  const int64_t m = state.range(0), k = state.range(1), n = state.range(2);
  ThreadPool pool(static_cast<int>(state.range(3)));
  auto cpu = make_cpu_backend(&pool);
  const auto x = random_floats(static_cast<size_t>(m * k), 1);  // [m, k]
  const auto w = random_floats(static_cast<size_t>(n * k), 2);  // [n, k]
  std::vector<float> y(static_cast<size_t>(m * n));             // [m, n]
  for (auto _ : state) {
    cpu->matmul(x.data(), m, k, w.data(), n, nullptr, y.data());
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  state.counters["FLOP/s"] =
      benchmark::Counter(2.0 * static_cast<double>(m * n * k), benchmark::Counter::kIsIterationInvariantRate);
  state.counters["W_bytes/s"] =
      benchmark::Counter(4.0 * static_cast<double>(n * k), benchmark::Counter::kIsIterationInvariantRate);
}

void MatmulArgs(benchmark::internal::Benchmark* b) {
  b->ArgNames({"m", "k", "n", "threads"});
  const int64_t shapes[][2] = {{576, 960}, {576, 576}, {576, 3072}, {1536, 576}, {576, 49152}};  // {k, n}
  for (const auto& s : shapes) {
    for (int64_t m : {1, 8, 32, 128}) {
      for (int64_t t : {1, 2}) b->Args({m, s[0], s[1], t});
    }
  }
}
BENCHMARK(BM_Matmul)->Apply(MatmulArgs)->Unit(benchmark::kMicrosecond)->UseRealTime();

// Decode attention: m query tokens, each of its own sequence at context `ctx`.
// Args: m, ctx, threads. FLOP/s counts 4*ctx*head_dim per (token, head) (q.k and p.v).
void BM_Attention(benchmark::State& state) {
  const int64_t m = state.range(0);
  const int ctx = static_cast<int>(state.range(1));
  ThreadPool pool(static_cast<int>(state.range(2)));
  auto cpu = make_cpu_backend(&pool);
  const int num_heads = 9, kv_heads = 3, head_dim = 64, block_size = 16;
  const int64_t blocks_per_seq = (ctx + block_size - 1) / block_size;
  const int64_t num_blocks = blocks_per_seq * m;
  auto k = random_floats(static_cast<size_t>(num_blocks * block_size * kv_heads * head_dim), 3);
  auto v = random_floats(k.size(), 4);
  const PagedKvView kv{k.data(), v.data(), num_blocks, block_size, kv_heads, head_dim};
  std::vector<int32_t> tables(static_cast<size_t>(num_blocks));  // [m, blocks_per_seq], reversed order
  for (int64_t i = 0; i < num_blocks; ++i) tables[static_cast<size_t>(i)] = static_cast<int32_t>(num_blocks - 1 - i);
  std::vector<AttentionQuery> queries;
  for (int64_t r = 0; r < m; ++r) queries.push_back({tables.data() + r * blocks_per_seq, ctx - 1});
  const auto q = random_floats(static_cast<size_t>(m * num_heads * head_dim), 5);
  std::vector<float> out(q.size());
  for (auto _ : state) {
    cpu->attention(q.data(), m, num_heads, queries.data(), kv, 0.125f, out.data());
    benchmark::DoNotOptimize(out.data());
  }
  state.counters["FLOP/s"] = benchmark::Counter(4.0 * static_cast<double>(m * num_heads) * ctx * head_dim,
                                                benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_Attention)
    ->ArgNames({"m", "ctx", "threads"})
    ->Args({1, 512, 1})
    ->Args({1, 512, 2})
    ->Args({32, 512, 1})
    ->Args({32, 512, 2})
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();

// Prefill attention: one sequence, queries at positions 0..ctx-1 (a whole prompt), the
// KV shared by all queries (L2-resident: the compute-bound case). Args: ctx, threads.
void BM_AttentionPrefill(benchmark::State& state) {
  const int ctx = static_cast<int>(state.range(0));
  ThreadPool pool(static_cast<int>(state.range(1)));
  auto cpu = make_cpu_backend(&pool);
  const int num_heads = 9, kv_heads = 3, head_dim = 64, block_size = 16;
  const int64_t num_blocks = (ctx + block_size - 1) / block_size;
  auto k = random_floats(static_cast<size_t>(num_blocks * block_size * kv_heads * head_dim), 3);
  auto v = random_floats(k.size(), 4);
  const PagedKvView kv{k.data(), v.data(), num_blocks, block_size, kv_heads, head_dim};
  std::vector<int32_t> table(static_cast<size_t>(num_blocks));  // [num_blocks]
  for (int64_t i = 0; i < num_blocks; ++i) table[static_cast<size_t>(i)] = static_cast<int32_t>(i);
  std::vector<AttentionQuery> queries;
  double pairs = 0;  // sum over queries of (position + 1)
  for (int p = 0; p < ctx; ++p) {
    queries.push_back({table.data(), p});
    pairs += p + 1;
  }
  const auto q = random_floats(static_cast<size_t>(ctx * num_heads * head_dim), 5);
  std::vector<float> out(q.size());
  for (auto _ : state) {
    cpu->attention(q.data(), ctx, num_heads, queries.data(), kv, 0.125f, out.data());
    benchmark::DoNotOptimize(out.data());
  }
  state.counters["FLOP/s"] =
      benchmark::Counter(4.0 * pairs * num_heads * head_dim, benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_AttentionPrefill)
    ->ArgNames({"ctx", "threads"})
    ->Args({512, 1})
    ->Args({512, 2})
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();

}  // namespace
}  // namespace vosti

BENCHMARK_MAIN();
