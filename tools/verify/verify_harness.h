// The determinism harness behind `vosti verify` and the determinism CTest suite.
//
// It runs one request set first as the reference F_D (docs/SPEC.md: each request
// alone, prefix cache off, one token per step) and then under each variation of
// DESIGN.md section 1 (batch composition, token budgets, chunking, prefix cache
// off/cold/warm, a cache so small that eviction and preemption happen, shuffled
// physical blocks, arrival orders, staggered arrivals, aborted neighbours, thread
// counts, the structured-output grammar pool engaged, speculative decoding with n-gram
// drafts of k = 1, 3, 8 tokens), and compares every logit of every output position bit
// for bit (memcmp of the full f32 rows), plus the tokens and logprobs.
// Thread safety: none; one harness run at a time.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "engine/engine.h"

namespace vosti {

class DeviceModel;
class Tokenizer;
struct ModelConfig;

struct HarnessRequest {
  RequestSpec spec;  // compared request (max_tokens > 0)
};

struct Variation {
  std::string name;
  EngineConfig config;  // the deployment-invariant fields must equal the reference's
  enum class Order : uint8_t { kForward, kReverse, kShuffled } order = Order::kForward;
  int32_t stagger_steps = 0;           // > 0: request i arrives at step i * stagger_steps
  int32_t num_aborted_neighbours = 0;  // extra requests aborted mid-way (not compared)
  bool warm_prefix_cache = false;      // run the set twice in one engine; compare the second run
};

struct VariationResult {
  std::string name;
  bool identical = false;
  std::string first_difference;  // "request 3, position 7: logits differ" when not identical
  int64_t num_positions = 0;     // output positions compared
  int64_t num_preemptions = 0;   // in this run, for the record
  int64_t num_prefix_hit_tokens = 0;
  int64_t num_draft_tokens = 0;     // speculative decoding: draft tokens verified
  int64_t num_accepted_tokens = 0;  // of which accepted
  double seconds = 0;
};

// The request set for a model: mixed prompt lengths, shared prefixes, greedy and
// seeded sampling. `full` makes it larger and longer.
std::vector<HarnessRequest> make_harness_requests(const ModelConfig& model, bool full, uint64_t seed);
// Appends structured-output requests (a JSON schema, a regex, a choice list; greedy and sampled)
// on the set's first prompts: run with a tokenizer, on the cpu device.
void add_structured_requests(std::vector<HarnessRequest>& requests);

// The variation matrix (CI-sized unless full) for a reference config; on the cuda device it
// adds CUDA graphs off (the reference replays graphs) and a bf16 vs f32 pool is a different
// deployment, never a variation. Speculative decoding (n-gram, k = 1, 3, 8) is a variation on
// every device, alone and (n-gram k = 3, 8; names "window_kv,ngram,...") with window-local KV.
// The speculation variation of a speculative config (vLLM's JSON): what `vosti verify
// --speculative-config` adds to the matrix.
Variation speculative_variation(const EngineConfig& reference, const std::string& speculative_config);
std::vector<Variation> make_variations(const EngineConfig& reference, bool full);

struct HarnessReport {
  std::string model_name;
  double reference_seconds = 0;
  std::vector<VariationResult> results;
  bool all_identical() const;
};

// Runs the reference and every variation. `on_result` (may be null) is called after each. Every
// engine gets `tokenizer` (may be null; structured-output requests need one) and `hooks` (tests'
// planted violations; empty in `vosti verify`).
Result<HarnessReport> run_determinism_harness(std::shared_ptr<const DeviceModel> model,
                                              const std::vector<HarnessRequest>& requests,
                                              const EngineConfig& reference_config,
                                              const std::vector<Variation>& variations,
                                              const std::function<void(const VariationResult&)>& on_result = {},
                                              std::shared_ptr<const Tokenizer> tokenizer = nullptr,
                                              const EngineHooks& hooks = {});

// The table `vosti verify` prints: variation x model -> identical / first difference.
std::string format_report_table(const std::vector<HarnessReport>& reports);

}  // namespace vosti
