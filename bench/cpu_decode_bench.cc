// The CPU forward alone, shaped like llama-bench's tests so the two can be run side by side
// on the same GGUF (bench/cpu_vs_llama_cpp.sh): "tg N" decodes N tokens one at a time from
// an empty context (llama-bench -p 0 -n N), "pp N" runs an N-token prompt as one batch
// (llama-bench -p N -n 0). Token ids are fixed pseudo-random ids; each repetition starts a
// fresh sequence. Prints one JSON line per test with the median tokens/s over --reps and
// the load time and RSS.
//   build/bench/cpu_decode_bench --model F.gguf --threads 2 --tg 128 --pp 64 --reps 5
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "core/thread_pool.h"
#include "model/model.h"
#include "runner/single_sequence.h"

namespace vosti {
namespace {

struct Args {
  std::string model;
  int threads = 1;
  int tg = 128;
  int pp = 64;
  int reps = 5;
};

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i], v = argv[i + 1];
    if (k == "--model") a.model = v;
    if (k == "--threads") a.threads = std::atoi(v.c_str());
    if (k == "--tg") a.tg = std::atoi(v.c_str());
    if (k == "--pp") a.pp = std::atoi(v.c_str());
    if (k == "--reps") a.reps = std::atoi(v.c_str());
  }
  return a;
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

std::vector<int32_t> tokens(int n, int64_t vocab) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) t[static_cast<size_t>(i)] = static_cast<int32_t>((i * 7919 + 13) % vocab);
  return t;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

long max_rss_mb() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_maxrss / 1024;
}

}  // namespace
}  // namespace vosti

int main(int argc, char** argv) {
  using namespace vosti;
  const Args a = parse(argc, argv);
  if (a.model.empty()) {
    std::fprintf(stderr, "usage: cpu_decode_bench --model F.gguf [--threads N] [--tg N] [--pp N] [--reps N]\n");
    return 2;
  }
  const auto t0 = std::chrono::steady_clock::now();
  auto model = Model::load(a.model);
  if (!model.ok()) {
    std::fprintf(stderr, "%s\n", model.status().to_string().c_str());
    return 1;
  }
  const double load_s = seconds_since(t0);
  const int64_t vocab = (*model)->config().vocab_size;
  ThreadPool pool(a.threads);
  auto kernels = make_cpu_backend(&pool);
  std::vector<double> tg_rates, pp_rates;
  for (int rep = 0; rep < a.reps; ++rep) {
    if (a.pp > 0) {
      const std::vector<int32_t> prompt = tokens(a.pp, vocab);
      SingleSequence seq(**model, *kernels, a.pp);
      const auto t = std::chrono::steady_clock::now();
      seq.append(prompt);
      pp_rates.push_back(a.pp / seconds_since(t));
    }
    if (a.tg > 0) {
      const std::vector<int32_t> ids = tokens(a.tg, vocab);
      SingleSequence seq(**model, *kernels, a.tg);
      const auto t = std::chrono::steady_clock::now();
      for (int i = 0; i < a.tg; ++i) seq.append(std::span<const int32_t>(&ids[static_cast<size_t>(i)], 1));
      tg_rates.push_back(a.tg / seconds_since(t));
    }
  }
  std::printf(
      "{\"engine\": \"vosti\", \"model\": \"%s\", \"threads\": %d, \"tg\": %d, \"tg_tok_s\": %.2f, \"pp\": %d, "
      "\"pp_tok_s\": %.2f, \"reps\": %d, \"load_s\": %.3f, \"weight_mb\": %.1f, \"max_rss_mb\": %ld}\n",
      a.model.c_str(), a.threads, a.tg, median(tg_rates), a.pp, median(pp_rates), a.reps, load_s,
      static_cast<double>((*model)->weight_bytes()) / (1 << 20), max_rss_mb());
  return 0;
}
