// The copy workload (`--workload copy`): chat prompts whose answers copy long spans of the prompt,
// the case prompt-lookup (n-gram) speculation is for: code editing ("rename the variable x to y in
// this function, reply with the whole function"), extraction ("copy the lines that mention X"),
// reformatting (JSON indentation, CSV to JSON lines). The texts are a small built-in table of
// original documents (copy_texts.cc: code in several languages, prose, logs, JSON, CSV), each with
// a few instructions written for it; a request is one (document, instruction) pair as a single
// user turn, rendered by the target through the model's chat template. The pairs are sent in an
// order shuffled by the workload seed; past the number of pairs they repeat (and then hit the
// prefix cache). Greedy decoding makes the answers, and so the acceptance rate, reproducible.
// Thread safety: the table is constant; the functions are pure.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "core/status.h"
#include "tools/bench/workload.h"

namespace vosti::bench {

// One built-in document and the instructions whose answers copy it.
struct CopyDocument {
  const char* name;                       // e.g. "python-moving-average"
  const char* fence;                      // the code fence's language ("python"), "text" for prose and logs
  const char* text;                       // the document, a few hundred bytes
  std::vector<const char*> instructions;  // each a task whose answer copies most of `text`
};

// The table (copy_texts.cc): every document has at least one instruction.
std::span<const CopyDocument> copy_documents();

// The user turn of one (document, instruction) pair: the instruction, then the document fenced.
std::string copy_prompt(const CopyDocument& document, const char* instruction);

// The number of distinct (document, instruction) pairs.
int64_t num_copy_prompts();

// config.num_prompts requests (kChat, one user turn each), the pairs in a seeded order, output
// lengths drawn from config.output_len. Errors: kInvalidArgument for num_prompts < 1.
Result<std::vector<BenchRequest>> copy_workload(const WorkloadConfig& config);

}  // namespace vosti::bench
