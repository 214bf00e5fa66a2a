// Tokenizer encode throughput (MB/s) on a corpus of documents, single-threaded and
// with one thread per core over the documents. Prints one JSON object with the
// throughputs and an FNV-1a hash of all ids, so bench/tokenizer_bench.py can compare
// against HF tokenizers on the same corpus and check the ids are identical.
//   tokenizer_bench MODEL CORPUS.jsonl [THREADS] [REPEATS]
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace {

using Clock = std::chrono::steady_clock;

uint64_t fnv1a64(uint64_t h, const std::vector<int32_t>& ids) {
  for (int32_t id : ids) {
    const auto u = static_cast<uint32_t>(id);
    for (int k = 0; k < 4; ++k) {
      h ^= (u >> (8 * k)) & 0xFF;
      h *= 0x100000001B3ULL;
    }
  }
  return h;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s MODEL CORPUS.jsonl [THREADS] [REPEATS]\n", argv[0]);
    return 2;
  }
  const unsigned threads =
      argc > 3 ? static_cast<unsigned>(std::stoul(argv[3])) : std::max(1u, std::thread::hardware_concurrency());
  const int repeats = argc > 4 ? std::stoi(argv[4]) : 3;
  auto tok = vosti::Tokenizer::load_for_model(argv[1]);
  if (!tok.ok()) {
    std::fprintf(stderr, "tokenizer_bench: %s\n", tok.status().to_string().c_str());
    return 1;
  }
  std::vector<std::string> docs;
  size_t total_bytes = 0;
  std::ifstream in(argv[2]);
  for (std::string line; std::getline(in, line);) {
    docs.push_back(nlohmann::json::parse(line).get<std::string>());
    total_bytes += docs.back().size();
  }
  if (docs.empty()) {
    std::fprintf(stderr, "tokenizer_bench: no documents in %s\n", argv[2]);
    return 1;
  }
  const vosti::Tokenizer& t = **tok;

  // Single thread: every document in order, best of `repeats` (the first run warms the word cache).
  double best_single = 1e30;
  uint64_t hash = 0;
  size_t num_ids = 0;
  for (int r = 0; r < repeats; ++r) {
    uint64_t h = 0xCBF29CE484222325ULL;
    size_t n = 0;
    const auto t0 = Clock::now();
    for (const auto& d : docs) {
      auto ids = t.encode(d, false);
      h = fnv1a64(h, *ids);
      n += ids->size();
    }
    best_single = std::min(best_single, std::chrono::duration<double>(Clock::now() - t0).count());
    hash = h;
    num_ids = n;
  }

  // Threads: documents handed out from an atomic counter.
  double best_multi = 1e30;
  for (int r = 0; r < repeats; ++r) {
    std::atomic<size_t> next{0};
    const auto t0 = Clock::now();
    std::vector<std::thread> pool;
    for (unsigned k = 0; k < threads; ++k) {
      pool.emplace_back([&] {
        for (size_t i; (i = next.fetch_add(1)) < docs.size();) (void)t.encode(docs[i], false);
      });
    }
    for (auto& th : pool) th.join();
    best_multi = std::min(best_multi, std::chrono::duration<double>(Clock::now() - t0).count());
  }
  const double mb = static_cast<double>(total_bytes) / 1e6;
  char hex[17];
  std::snprintf(hex, sizeof(hex), "%016llx", static_cast<unsigned long long>(hash));
  nlohmann::json out = {{"docs", docs.size()}, {"bytes", total_bytes},    {"ids", num_ids},
                        {"fnv64", hex},        {"single_s", best_single}, {"single_mb_s", mb / best_single},
                        {"threads", threads},  {"multi_s", best_multi},   {"multi_mb_s", mb / best_multi}};
  std::printf("%s\n", out.dump().c_str());
  return 0;
}
