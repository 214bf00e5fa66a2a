#include "tools/bench/copy_workload.h"

#include <random>

namespace vosti::bench {

std::string copy_prompt(const CopyDocument& document, const char* instruction) {
  return std::string(instruction) + "\n\n```" + document.fence + "\n" + document.text + "\n```";
}

int64_t num_copy_prompts() {
  int64_t n = 0;
  for (const CopyDocument& d : copy_documents()) n += static_cast<int64_t>(d.instructions.size());
  return n;
}

Result<std::vector<BenchRequest>> copy_workload(const WorkloadConfig& c) {
  if (c.num_prompts < 1) return invalid_argument("--num-prompts must be at least 1");
  struct Pair {
    const CopyDocument* document;
    const char* instruction;
  };
  // Instruction-major (every document's first instruction, then every second one, ...), each
  // round shuffled by the seed (Fisher-Yates on the generator's raw bits, the same on every
  // standard library): any first num_copy_documents requests cover every document.
  std::mt19937_64 rng(c.seed);
  std::vector<Pair> pairs;
  for (size_t k = 0;; ++k) {
    const size_t begin = pairs.size();
    for (const CopyDocument& d : copy_documents())
      if (k < d.instructions.size()) pairs.push_back({&d, d.instructions[k]});
    if (pairs.size() == begin) break;
    for (size_t i = pairs.size() - begin; i > 1; --i) std::swap(pairs[begin + i - 1], pairs[begin + rng() % i]);
  }
  std::vector<BenchRequest> out(static_cast<size_t>(c.num_prompts));
  for (int64_t i = 0; i < c.num_prompts; ++i) {
    const Pair& p = pairs[static_cast<size_t>(i) % pairs.size()];
    BenchRequest& r = out[static_cast<size_t>(i)];
    r.index = i;
    r.kind = PromptKind::kChat;
    r.messages = {ChatMessage{"user", copy_prompt(*p.document, p.instruction)}};
    const LengthRange& len = c.output_len;
    r.max_tokens = len.min + static_cast<int32_t>(rng() % static_cast<uint64_t>(len.max - len.min + 1));
    r.seed = request_seed(c.seed, i);
  }
  return out;
}

}  // namespace vosti::bench
