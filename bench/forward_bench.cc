// CPU forward of the default model (Google Benchmark): single-sequence decode
// tokens/s at a 128-token context, with 1 and 2 threads, and a 64-token prefill.
//   VOSTI_DEFAULT_MODEL=$(scripts/fetch-model) build/bench/forward_bench
#include <benchmark/benchmark.h>

#include <cstdlib>

#include "core/thread_pool.h"
#include "model/model.h"
#include "runner/single_sequence.h"

namespace vosti {
namespace {

std::shared_ptr<const Model> default_model() {
  static std::shared_ptr<const Model> model = [] {
    const char* path = std::getenv("VOSTI_DEFAULT_MODEL");
    if (!path) return std::shared_ptr<const Model>();
    auto m = Model::load(path);
    return m.ok() ? *m : std::shared_ptr<const Model>();
  }();
  return model;
}

void BM_Decode(benchmark::State& state) {
  auto model = default_model();
  if (!model) {
    state.SkipWithError("set VOSTI_DEFAULT_MODEL (scripts/fetch-model prints it)");
    return;
  }
  ThreadPool pool(static_cast<int>(state.range(0)));
  auto kernels = make_cpu_backend(&pool);
  const int64_t context = 128;
  std::vector<int32_t> prompt(static_cast<size_t>(context));
  for (int64_t i = 0; i < context; ++i) prompt[static_cast<size_t>(i)] = static_cast<int32_t>((i * 97) % 49152);
  SingleSequence seq(*model, *kernels, context + 4096);
  seq.append(prompt);
  int32_t token = 42;
  for (auto _ : state) {
    if (seq.num_tokens() >= context + 4095) state.SkipWithError("context exhausted");
    auto logits = seq.append(std::span<const int32_t>(&token, 1));
    benchmark::DoNotOptimize(logits.data());
  }
  state.counters["tok/s"] = benchmark::Counter(static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_Decode)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_Prefill64(benchmark::State& state) {
  auto model = default_model();
  if (!model) {
    state.SkipWithError("set VOSTI_DEFAULT_MODEL (scripts/fetch-model prints it)");
    return;
  }
  ThreadPool pool(static_cast<int>(state.range(0)));
  auto kernels = make_cpu_backend(&pool);
  std::vector<int32_t> prompt(64);
  for (size_t i = 0; i < prompt.size(); ++i) prompt[i] = static_cast<int32_t>((i * 131) % 49152);
  for (auto _ : state) {
    SingleSequence seq(*model, *kernels, 64);
    auto logits = seq.append(prompt);
    benchmark::DoNotOptimize(logits.data());
  }
  state.counters["tok/s"] =
      benchmark::Counter(64.0 * static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_Prefill64)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
}  // namespace vosti

BENCHMARK_MAIN();
