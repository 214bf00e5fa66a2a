// CPU serving throughput: N concurrent requests through the engine at several
// max_num_seqs, and the share of step time spent outside the model forward
// (scheduling, cache bookkeeping, sampling). Not a timed test: a benchmark whose
// numbers go to docs/BENCHMARKS.md.
//   build/bench/engine_throughput_bench [--model PATH] [--requests 32] [--prompt-len 128]
//       [--output-len 128] [--seqs 1,32] [--threads 2]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "model/model.h"

using namespace vosti;

int main(int argc, char** argv) {
  std::string model_path;
  if (const char* p = std::getenv("VOSTI_DEFAULT_MODEL")) model_path = p;
  int requests = 32, prompt_len = 128, output_len = 128, threads = 2;
  std::vector<int> seqs = {1, 32};
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i], v = argv[i + 1];
    if (k == "--model")
      model_path = v;
    else if (k == "--requests")
      requests = std::stoi(v);
    else if (k == "--prompt-len")
      prompt_len = std::stoi(v);
    else if (k == "--output-len")
      output_len = std::stoi(v);
    else if (k == "--threads")
      threads = std::stoi(v);
    else if (k == "--seqs") {
      seqs.clear();
      std::stringstream ss(v);
      for (std::string x; std::getline(ss, x, ',');) seqs.push_back(std::stoi(x));
    } else {
      std::fprintf(stderr, "unknown option %s\n", k.c_str());
      return 2;
    }
  }
  if (model_path.empty()) {
    std::fprintf(stderr, "give --model or set VOSTI_DEFAULT_MODEL\n");
    return 2;
  }
  auto t_load = std::chrono::steady_clock::now();
  auto model = Model::load(model_path);
  if (!model.ok()) {
    std::fprintf(stderr, "%s\n", model.status().to_string().c_str());
    return 1;
  }
  std::printf("model %s loaded in %.3f s (%lld MB of weights copied/dequantised)\n", (*model)->config().name.c_str(),
              std::chrono::duration<double>(std::chrono::steady_clock::now() - t_load).count(),
              static_cast<long long>((*model)->num_copied_bytes() >> 20));
  std::printf("%d requests x (%d prompt + %d output tokens), %d threads\n", requests, prompt_len, output_len, threads);
  std::printf("%10s %12s %14s %12s %12s\n", "max_seqs", "seconds", "output tok/s", "bookkeeping", "sampling");
  for (int s : seqs) {
    EngineConfig c;
    c.max_num_seqs = s;
    c.max_num_batched_tokens = 512;
    c.num_threads = threads;
    c.enable_prefix_caching = false;
    c.max_model_len = prompt_len + output_len + 16;
    c.num_blocks = (static_cast<int64_t>(requests) * c.max_model_len) / c.block_size + 64;
    auto engine = Engine::create(*model, c);
    if (!engine.ok()) {
      std::fprintf(stderr, "%s\n", engine.status().to_string().c_str());
      return 1;
    }
    std::mt19937 rng(1);
    const int64_t vocab = (*model)->config().vocab_size;
    for (int r = 0; r < requests; ++r) {
      RequestSpec spec;
      for (int i = 0; i < prompt_len; ++i) spec.prompt.push_back(static_cast<int32_t>(rng() % vocab));
      spec.max_tokens = output_len;
      spec.ignore_eos = true;
      spec.sampling.temperature = 0.8f;
      spec.sampling.seed = static_cast<uint64_t>(r);
      (void)(*engine)->add_request(spec, nullptr);
    }
    const auto t0 = std::chrono::steady_clock::now();
    while ((*engine)->has_work()) (*engine)->step();
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const EngineStats st = (*engine)->stats();
    const double other = st.seconds_in_steps - st.seconds_in_forward - st.seconds_in_sampling;
    std::printf("%10d %12.2f %14.1f %11.2f%% %11.2f%%\n", s, secs, static_cast<double>(st.num_generated_tokens) / secs,
                100.0 * other / st.seconds_in_steps, 100.0 * st.seconds_in_sampling / st.seconds_in_steps);
    std::fflush(stdout);
  }
  return 0;
}
