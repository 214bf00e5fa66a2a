// The per-request sampler (Google Benchmark): microseconds per produced token at the
// default model's vocabulary (49,152) and Qwen's (152,064), for sample_token (token plus
// raw logprobs, what the engine calls) and choose_token (token only).
//   build/bench/sampler_bench
#include <benchmark/benchmark.h>

#include <cmath>
#include <string>
#include <vector>

#include "sample/philox.h"
#include "sample/sampler.h"

namespace vosti {
namespace {

// LM-like logits: Gumbel-distributed, so a few large values and a long tail.
std::vector<float> make_logits(int64_t vocab) {
  std::vector<float> logits(static_cast<size_t>(vocab));
  for (int64_t i = 0; i < vocab; ++i) {
    const double u = uniform_from_philox(philox4x32_10({static_cast<uint32_t>(i), 1, 2, 3}, {4, 5}));
    logits[static_cast<size_t>(i)] = static_cast<float>(-std::log(-std::log(u + 1e-12)) * 2.0);
  }
  return logits;
}

struct Case {
  const char* name;
  SamplingParams params;
  bool history;  // 1,000 prompt + 200 output tokens for the penalties
};

std::vector<Case> cases() {
  SamplingParams greedy;
  greedy.temperature = 0;
  SamplingParams temp;
  temp.temperature = 0.7f;
  SamplingParams top_k = temp;
  top_k.top_k = 50;
  SamplingParams top_p = temp;
  top_p.top_p = 0.9f;
  SamplingParams min_p = temp;
  min_p.min_p = 0.05f;
  SamplingParams penalties = temp;
  penalties.repetition_penalty = 1.1f;
  penalties.frequency_penalty = 0.5f;
  penalties.presence_penalty = 0.5f;
  return {{"greedy", greedy, false},   {"temperature_0.7", temp, false}, {"top_k_50", top_k, false},
          {"top_p_0.9", top_p, false}, {"min_p_0.05", min_p, false},     {"penalties", penalties, true}};
}

void BM_Sampler(benchmark::State& state, int64_t vocab, Case c, bool with_logprobs) {
  const std::vector<float> logits = make_logits(vocab);
  std::vector<int32_t> prompt, output;
  if (c.history) {
    for (int64_t i = 0; i < 1000; ++i) prompt.push_back(static_cast<int32_t>((i * 7919) % vocab));
    for (int64_t i = 0; i < 200; ++i) output.push_back(static_cast<int32_t>((i * 104729) % vocab));
  }
  SamplerScratch scratch;
  int64_t position = 0;
  for (auto _ : state) {
    if (with_logprobs) {
      benchmark::DoNotOptimize(sample_token(logits, c.params, 1, position++, prompt, output, scratch).token);
    } else {
      benchmark::DoNotOptimize(choose_token(logits, c.params, 1, position++, prompt, output, scratch));
    }
  }
}

const bool kRegistered = [] {
  for (int64_t vocab : {49152, 152064})
    for (const Case& c : cases())
      for (bool lp : {true, false})
        benchmark::RegisterBenchmark(
            (std::string(lp ? "sample_token/" : "choose_token/") + c.name + "/vocab:" + std::to_string(vocab)).c_str(),
            [vocab, c, lp](benchmark::State& s) { BM_Sampler(s, vocab, c, lp); })
            ->Unit(benchmark::kMicrosecond);
  return true;
}();

}  // namespace
}  // namespace vosti

BENCHMARK_MAIN();
