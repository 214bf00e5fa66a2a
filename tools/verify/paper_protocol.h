// The determinism protocol of the Vosti paper ("Vosti: Specifying, Implementing, and Verifying
// Deterministic LLM Inference", its artifact's expanded report suite, MIT): which requests run
// in which arms, and which full logit rows are compared, as data (PaperProtocolSpec) and as a
// concrete plan for one model (PaperPlan). paper_runner.h runs a plan against an engine in this
// process or a server over HTTP.
//
// The four relations and their comparisons (the artifact's counts, 784 on a model without a
// sliding window shorter than 1,024 positions):
//   batch composition  296  32 prompts (17..8,193 tokens) alone, then in 84 compositions (2, 4
//                           and 8 at a time, in forward, reversed and shuffled order): 288 rows;
//                           4 prompts again in a fresh engine, against alone and in their batch
//                           of 8: 8 rows. The row: output position 0 (the prefill's last row).
//   chunking            90  18 prompts (63-65, 127-129, 255-257, 511-513, 1,023-1,025 tokens
//                           around the budgets, 2,048, 8,192, 32,768) prefilled whole, then under
//                           token budgets 64, 128, 256, 512, 1,024 (plus a sliding window's
//                           three edges where a model has one).
//   prefill/decode     384  3 prompts (257, 8,192, 32,768) generate 128 tokens greedily; the row
//                           of decode step i against the last row of a prefill of prompt + y[:i].
//   prefix reuse        14  donors sharing 15-17, 127-129, 1,023-1,025 (or the window's edges)
//                           and 8,192 tokens with a query 128 tokens longer; the whole query as
//                           its own donor (129, 1,025); 1,024 shared tokens with different
//                           suffixes; a donor's generated tokens reused by a follow-up. Each
//                           query's row warm (after its donor) against cold (after the cache
//                           was reset, every block evicted).
// Prompts are the artifact's: token ids drawn with Python's random.Random(seed + offset)
// (python_random.h) from the vocabulary less its special ids, BOS first; seed 0x5EED2026.
// Lengths past what the run's context allows are cut to fit (a prompt cut is a prefix of the
// paper's), and the plan lists every cut: an adapted run, as the artifact asks to label it.
// Thread safety: values and pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"
#include "engine/token_domain.h"

namespace vosti {

enum class Relation : uint8_t { kBatch, kChunk, kPrefillDecode, kPrefixReuse };
inline constexpr Relation kRelations[] = {Relation::kBatch, Relation::kChunk, Relation::kPrefillDecode,
                                          Relation::kPrefixReuse};
const char* relation_name(Relation r);  // "batch composition", "chunking", "prefill/decode", "prefix reuse"
const char* relation_key(Relation r);   // "batch", "chunk", "pd", "cache" (the artifact's keys)

// The protocol's parameters: the artifact's report_plan.py and report_suite.py, as a table.
struct PaperProtocolSpec {
  uint64_t seed = 0x5EED2026;
  std::vector<int32_t> batch_lengths;       // [32]
  std::vector<int32_t> group_sizes;         // 2, 4, 8: consecutive slices of three orders of the 32
  uint64_t shuffle_offset = 9000;           // the shuffled order: random.Random(seed + 9000).shuffle
  std::vector<int32_t> fresh_spots;         // prompts run again in a fresh engine
  std::vector<int32_t> chunk_budgets;       // 64 .. 1,024
  std::vector<int32_t> chunk_long_lengths;  // 2,048, 8,192, 32,768 (plus each budget's three edges)
  std::vector<int32_t> pd_lengths;          // 257, 8,192, 32,768
  int32_t output_tokens = 128;              // generated in prefill/decode and by the generated donor
  std::vector<int32_t> partial_donors;      // 15..17, 127..129, 8,192 (plus window or 1,023..1,025 edges)
  int32_t default_window = 1024;            // edges used when the model has no sliding window
  std::vector<int32_t> full_lengths;        // 129, 1,025: the query is its own donor
  int32_t reuse_suffix = 128;               // a partial case's query: donor + 128 tokens
  int32_t divergent_shared = 1024;          // shared tokens, then different 128-token suffixes
  int32_t generated_donor = 1024;           // its first 127 generated tokens + 128 new ones follow
  int32_t arm_token_budget = 4096;          // the step token budget of every arm but chunking's
  int32_t call_output_tokens = 2;           // tokens each compared request generates
};
const PaperProtocolSpec& paper_protocol_spec();

// One prompt length the plan cut to fit the run's context.
struct LengthCut {
  std::string what;  // "batch prompt 31", "chunk prompt", ...
  int32_t paper = 0;
  int32_t used = 0;
};

struct PrefixCase {
  std::string label;              // "partial-127", "full-129", "divergent-suffix"
  std::vector<int32_t> donor;     // run first
  std::vector<int32_t> query;     // its row compared warm against cold
  int32_t prefix_limit = 0;       // the query's cached tokens may not exceed this
  bool require_positive = false;  // the warm query must hit the cache
};

struct PaperPlan {
  uint64_t seed = 0;
  int32_t context = 0;  // the longest sequence (prompt + output) any request may reach
  int32_t window = 0;   // the model's sliding window (0: none)
  std::vector<LengthCut> cuts;
  std::vector<std::vector<int32_t>> batch_prompts;  // [32]
  std::vector<std::vector<int32_t>> batch_groups;   // [84] indices into batch_prompts
  std::vector<int32_t> fresh_spots;
  std::vector<std::vector<int32_t>> chunk_prompts;  // ascending length
  std::vector<int32_t> chunk_budgets;
  int32_t full_budget = 0;  // the reference chunk arm: every chunk prompt whole
  std::vector<std::vector<int32_t>> pd_prompts;
  int32_t output_tokens = 0;
  std::vector<PrefixCase> prefix_cases;
  std::vector<int32_t> generated_donor;
  std::vector<int32_t> generated_suffix;
  int32_t arm_token_budget = 0;
  int32_t call_output_tokens = 0;

  // The comparisons a complete run of `r` makes (296, 90, 384 and 14 on the paper's models).
  int64_t expected(Relation r) const;
  // Prompt tokens the whole protocol prefills (a rough cost, printed before a run).
  int64_t num_prompt_tokens() const;
  // The longest sequence (prompt and output) any of its requests reaches: the engine's context.
  int32_t longest_sequence() const;
};

// The plan for a model whose ids are `domain`, with a sliding window of `window` positions (0:
// none), whose requests may reach `context` tokens. Errors: kInvalidArgument for a context under
// 512 tokens or a vocabulary with no ordinary token.
Result<PaperPlan> make_paper_plan(const PaperProtocolSpec& spec, const TokenDomain& domain, int32_t window,
                                  int32_t context);

// deterministic_prompt of the artifact: BOS (when the model has one), then ids drawn by
// random.Random(seed).randrange(vocab_size), skipping special ids, until `length` tokens.
std::vector<int32_t> paper_prompt(const TokenDomain& domain, int32_t length, uint64_t seed);

}  // namespace vosti
