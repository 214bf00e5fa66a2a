// SpeculativeConfig: speculative decoding's configuration, vLLM's `--speculative-config` JSON
// (EngineConfig::speculative_config), parsed once. The engine makes its drafter from it
// (engine/speculative.h); a runner reads num_speculative_tokens to size the rows a step samples.
// Thread safety: a value type; parse_speculative_config is pure.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "core/status.h"

namespace vosti {

struct SpeculativeConfig {
  std::string method;                  // "" (off), "ngram" (prompt lookup) or "draft_model"
  std::string model;                   // draft_model: the draft model's file or directory
  int32_t num_speculative_tokens = 0;  // k: draft tokens per step at most
  int32_t prompt_lookup_min = 0;       // ngram: shortest suffix matched (>= 1)
  int32_t prompt_lookup_max = 0;       // ngram: longest suffix matched (>= prompt_lookup_min)
  // vLLM's disable_by_batch_size: no request gets drafts while this many or more requests are
  // running or waiting (0: never off). A rule of the deployment that changes no bit: speculation
  // is lossless, so it only trades verify rows for steps as batches fill.
  int32_t disable_by_batch_size = 0;

  bool enabled() const { return !method.empty(); }
};

inline constexpr int32_t kMaxSpeculativeTokens = 64;

// Parses vLLM's speculative config, e.g. {"method": "ngram", "num_speculative_tokens": 4,
// "prompt_lookup_max": 4} or {"model": PATH, "num_speculative_tokens": 4} (the method
// "draft_model", as vLLM infers it). Empty text (or "{}", "null"): speculation off. As vLLM, an
// ngram config that gives one of prompt_lookup_min/max gets the other equal to it, and neither 5.
// Errors: kInvalidArgument naming the field (bad JSON, an unknown field, a wrong type, an unknown
// method, k outside [1, 64], lookup lengths < 1 or min > max, a draft model without "model",
// disable_by_batch_size < 2).
Result<SpeculativeConfig> parse_speculative_config(std::string_view json);

}  // namespace vosti
