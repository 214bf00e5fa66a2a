// OpenAI response serialisation: completion / chat completion bodies, SSE chunks,
// logprobs in both OpenAI shapes, usage, and Vosti's determinism extensions.
//
// Determinism made visible (docs/ARCHITECTURE.md, "## Server"):
//   - every choice carries "seed": the seed its sampler used (replay with it);
//   - logprobs print in the float's shortest round-trip form (equal text <=> equal bits);
//   - "return_token_ids": "prompt_token_ids" and "token_ids" per choice (vLLM's names);
//   - "return_logits_digests": "logits_digests", one 32-hex-digit string per output
//     position: the 128-bit XXH3 digest of that position's full f32 logits; with echo, the
//     prompt's positions first, aligned as echo's logprobs are (null for the first prompt token,
//     then the digest of the row that scored each prompt token);
//   - "return_sampling_mask" (Vosti's): "sampling_masks" in every choice and delta, one entry per
//     output token: null where no filter dropped a token (greedy too), else the kept ids ascending.
//   - "return_routed_experts" (vLLM's; MoE models): "routed_experts" in a choice's finished
//     body or last chunk, [position][MoE layer][k] expert ids of every computed position;
//   - every body (and stream chunk) names the deployment it ran on: "vosti": {"deployment_id",
//     "weights_id", "weights_version"}.
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/request.h"
#include "offline/weights_identity.h"
#include "server/openai_request.h"
#include "server/tool_call_stream.h"

namespace vosti {

// What every body of one response shares.
struct ResponseContext {
  Endpoint endpoint = Endpoint::kCompletions;
  std::string id;       // "cmpl-..." or "chatcmpl-..."
  int64_t created = 0;  // unix seconds
  std::string model;
  bool logprobs = false;
  bool return_token_ids = false;
  bool logits_digests = false;
  bool routed_experts = false;
  bool sampling_masks = false;
  // The deployment the response runs on (set at admission): every body names it in "vosti".
  std::shared_ptr<const DeploymentInfo> deployment;
  // Token id -> its raw text (bytes; may be part of a UTF-8 character).
  std::function<std::string(int32_t)> piece;
  // Chat with tools: the parser of each choice's tool calls (null: the output is not parsed).
  std::shared_ptr<const ToolCallParser> tool_parser;
};

// One choice's output: all of it (non-streaming) or one delta (streaming).
struct ChoiceOutput {
  int32_t index = 0;
  uint64_t seed = 0;
  std::string text;                                        // completions with echo: prompt text first
  std::vector<int32_t> token_ids;                          // output tokens
  std::vector<PositionLogprobs> logprobs;                  // [token_ids] when logprobs were asked
  std::vector<LogitsDigest> digests;                       // [token_ids] when digests were asked
  std::vector<SamplingSupport> sampling_masks;             // [token_ids] when masks were asked
  std::vector<PositionLogprobs> prompt_logprobs;           // echo + logprobs: [prompt], [0] unscored
  std::vector<LogitsDigest> prompt_digests;                // echo + digests: [prompt], [0] has no row
  const std::vector<int32_t>* prompt_token_ids = nullptr;  // when return_token_ids (first chunk / full)
  std::optional<FinishReason> finish_reason;               // set on the last delta
  RoutedExperts routed_experts;                            // routed_experts: on the last delta
  int64_t text_offset = 0;                                 // completions logprobs: offset of `text` in the choice
  // Chat with tools: the calls parsed from the output (a delta's fragments when streaming); `text`
  // is then the content that is no call. A finished choice with calls ends with "tool_calls".
  std::vector<ToolCallOut> tool_calls;
  bool called_tools = false;
};

struct Usage {
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;
  int64_t cached_tokens = 0;
};

// The non-streaming body with all choices and usage.
std::string full_response_body(const ResponseContext& ctx, const std::vector<ChoiceOutput>& choices,
                               const Usage& usage);
// One streaming chunk's JSON for one choice's delta; `first` adds the chat role.
std::string chunk_body(const ResponseContext& ctx, const ChoiceOutput& delta, bool first);
// The final usage-only chunk (stream_options.include_usage).
std::string usage_chunk_body(const ResponseContext& ctx, const Usage& usage);
// "data: <json>\n\n".
std::string sse_event(std::string_view json);

}  // namespace vosti
