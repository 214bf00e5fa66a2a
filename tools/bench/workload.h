// Benchmark workloads: the requests `vosti bench` sends, the same for every target.
//   random         prompts of random token ids (special tokens excluded), input and output
//                  lengths fixed or drawn uniformly from a range;
//   shared-prefix  num_groups groups of prompts_per_group prompts; the prompts of a group share
//                  a random system prompt of system_prompt_len tokens, each adds a random
//                  question; requests of all groups interleaved (exercises the prefix cache);
//   file           a JSONL file (one object a line) or a JSON array: {"prompt": "text" | [ids]},
//                  {"messages": [{"role", "content"}, ...]}, or ShareGPT's {"conversations":
//                  [{"from": "system"|"human"|"gpt", "value"}, ...]} (the turns before the first
//                  "gpt" reply are the prompt; that reply's token count its output length).
//                  An entry's "max_tokens" (or "output_len") sets its output length.
//   copy           built-in chat prompts whose answers copy long spans of the prompt (code
//                  editing, extraction, reformatting: copy_workload.h), for n-gram speculation.
// Everything random comes from one generator seeded by `seed`: two runs send the same prompts.
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "core/status.h"
#include "tokenizer/chat_template.h"

namespace vosti {
class Tokenizer;
}

namespace vosti::bench {

// A length, fixed (min == max) or uniform in [min, max]. Parsed from "128" or "64:256".
struct LengthRange {
  int32_t min = 0;
  int32_t max = 0;
};
// Errors: kInvalidArgument naming `what` for text that is not N or MIN:MAX with 1 <= MIN <= MAX.
Result<LengthRange> parse_length_range(const std::string& text, const std::string& what);

enum class PromptKind : uint8_t { kTokenIds, kText, kChat };

struct BenchRequest {
  int64_t index = 0;
  PromptKind kind = PromptKind::kTokenIds;
  std::vector<int32_t> prompt_ids;    // kTokenIds
  std::string prompt_text;            // kText
  std::vector<ChatMessage> messages;  // kChat
  int32_t max_tokens = 0;
  uint64_t seed = 0;  // sampling seed (1 + workload seed * 1,000,003 + index: never 0)
};

struct WorkloadConfig {
  std::string kind = "random";  // random | shared-prefix | file | copy
  int64_t num_prompts = 64;     // random, copy; file: at most this many (0: all)
  LengthRange input_len{128, 128};
  LengthRange output_len{128, 128};
  bool output_len_given = false;  // file: --output-len overrides the entries' lengths
  int64_t num_groups = 8;         // shared-prefix
  int64_t prompts_per_group = 8;
  int32_t system_prompt_len = 1024;
  LengthRange question_len{128, 128};
  std::string file;
  uint64_t seed = 0;
};

// The sampling seed of request `index`: 1 + workload_seed * 1,000,003 + index (never 0).
uint64_t request_seed(uint64_t workload_seed, int64_t index);

// n random ids in [0, vocab) that are not special tokens (BOS, EOS, chat markers...), drawn
// from `rng` the same way on every standard library.
std::vector<int32_t> random_token_ids(std::mt19937_64& rng, int32_t n, const Tokenizer& tok);

// The requests of `config`. The tokenizer gives the vocabulary for random ids and token counts
// of ShareGPT replies; it may be null only for a file workload whose entries all give their
// output length. Errors: kInvalidArgument / kNotFound naming the file, the line and the fix.
Result<std::vector<BenchRequest>> make_workload(const WorkloadConfig& config, const Tokenizer* tokenizer);

}  // namespace vosti::bench
