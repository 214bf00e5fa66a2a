// The host's token-mask time for structured outputs at a batch: `--batch` requests under one JSON
// schema (issue 45's rollout schema: an object with a bounded array, an enum, a number range and a
// pattern), each advanced by a pseudo-random allowed token a step (what a random-weight model
// picks is anything the grammar allows), timing GrammarState::fill_next_mask for the whole batch
// per step; the accept() time beside it. The engine computes these masks on its step thread before
// a step is launched. A benchmark: numbers go to docs/BENCHMARKS.md with the command, machine and
// commit, never into a test.
//   build/bench/grammar_mask_bench --model PATH [--batch 256] [--steps 64] [--vocab N]
// --model: a GGUF file or a directory with tokenizer.json (its tokenizer's pieces; the default
// model's has 49,152); --vocab: the mask's vocabulary (default: the tokenizer's).
#include <chrono>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "structured/grammar.h"
#include "tokenizer/tokenizer.h"

using namespace vosti;

namespace {

double now_s() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

constexpr const char* kSchema =
    R"({"type":"object","properties":{"id":{"type":"integer","minimum":0,"maximum":100000},)"
    R"("name":{"type":"string","pattern":"^[A-Z][a-z]{1,12}$"},"role":{"enum":["admin","user","guest"]},)"
    R"("tags":{"type":"array","items":{"type":"string","maxLength":8},"maxItems":4},)"
    R"("score":{"type":"number"},"active":{"type":"boolean"}},)"
    R"("required":["id","name","role","tags","score","active"]})";

}  // namespace

int main(int argc, char** argv) {
  std::string model;
  int batch = 256, steps = 64;
  int64_t vocab = 0;
  for (int i = 1; i < argc; ++i) {
    const std::string k = argv[i];
    const auto next = [&]() -> std::string { return i + 1 < argc ? argv[++i] : ""; };
    if (k == "--model")
      model = next();
    else if (k == "--batch")
      batch = std::stoi(next());
    else if (k == "--steps")
      steps = std::stoi(next());
    else if (k == "--vocab")
      vocab = std::stoll(next());
    else {
      std::fprintf(stderr, "unknown option %s (see the header of bench/grammar_mask_bench.cc)\n", k.c_str());
      return 2;
    }
  }
  auto tokenizer = Tokenizer::load_for_model(model);
  if (!tokenizer.ok()) {
    std::fprintf(stderr, "%s\n", tokenizer.status().to_string().c_str());
    return 1;
  }
  if (vocab == 0) vocab = (*tokenizer)->vocab_size();
  std::vector<int32_t> stops = (*tokenizer)->stop_ids();
  auto cache = GrammarCache::create(**tokenizer, vocab, stops);
  if (!cache.ok()) {
    std::fprintf(stderr, "%s\n", cache.status().to_string().c_str());
    return 1;
  }
  StructuredOutputs spec{StructuredKind::kJsonSchema, kSchema, {}};
  const double t_compile = now_s();
  auto grammar = (*cache)->compile(spec);
  if (!grammar.ok()) {
    std::fprintf(stderr, "%s\n", grammar.status().to_string().c_str());
    return 1;
  }
  const double compile_s = now_s() - t_compile;
  std::vector<std::unique_ptr<GrammarState>> states;
  for (int b = 0; b < batch; ++b) states.push_back(std::make_unique<GrammarState>(*grammar));
  const int32_t words = states[0]->mask_words();
  std::vector<uint32_t> masks(static_cast<size_t>(batch) * static_cast<size_t>(words));
  std::mt19937_64 rng(7);
  double mask_s = 0, accept_s = 0, worst_step = 0;
  int64_t masks_filled = 0, restarts = 0;
  std::vector<int32_t> allowed;
  for (int step = 0; step < steps; ++step) {
    const double t0 = now_s();
    for (int b = 0; b < batch; ++b)
      states[static_cast<size_t>(b)]->fill_next_mask(
          std::span<uint32_t>(masks.data() + static_cast<size_t>(b) * words, static_cast<size_t>(words)));
    const double t1 = now_s();
    mask_s += t1 - t0;
    worst_step = std::max(worst_step, t1 - t0);
    masks_filled += batch;
    for (int b = 0; b < batch; ++b) {
      GrammarState& s = *states[static_cast<size_t>(b)];
      const uint32_t* m = masks.data() + static_cast<size_t>(b) * words;
      allowed.clear();
      for (int64_t t = 0; t < vocab; ++t)
        if ((m[t >> 5] >> (t & 31)) & 1u) allowed.push_back(static_cast<int32_t>(t));
      if (allowed.empty() || s.terminated()) {  // done: start again, as a new request would
        states[static_cast<size_t>(b)] = std::make_unique<GrammarState>(*grammar);
        ++restarts;
        continue;
      }
      const int32_t token = allowed[rng() % allowed.size()];
      const double ta = now_s();
      s.accept(token);
      accept_s += now_s() - ta;
    }
  }
  std::printf(
      "{\"bench\":\"grammar_mask\",\"model\":\"%s\",\"vocab\":%lld,\"batch\":%d,\"steps\":%d,\"compile_s\":%.3f,"
      "\"mask_ms_per_step\":%.3f,\"worst_step_ms\":%.3f,\"mask_us_per_token\":%.2f,\"accept_us_per_token\":%.2f,"
      "\"restarts\":%lld}\n",
      model.c_str(), static_cast<long long>(vocab), batch, steps, compile_s, 1e3 * mask_s / steps, 1e3 * worst_step,
      1e6 * mask_s / static_cast<double>(masks_filled), 1e6 * accept_s / static_cast<double>(masks_filled),
      static_cast<long long>(restarts));
  return 0;
}
