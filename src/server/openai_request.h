// OpenAI request parsing: a JSON body of /v1/completions or /v1/chat/completions ->
// a validated GenerationRequest, or an ApiError naming the field and the fix.
//
// What is checked here needs no model: JSON syntax and UTF-8, field types, unknown
// fields (rejected, as OpenAI does, so a typo never silently changes sampling), and
// ranges (temperature >= 0, top_p in (0,1], max_tokens >= 0, n in [1,kMaxN], ...).
// What needs the model (prompt length vs context, token ids vs vocab) is checked by
// OpenAiService. Parsing never throws and never crashes on any input (fuzzed).
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "sample/sampling_params.h"
#include "server/api_error.h"
#include "server/tool_request.h"
#include "structured/structured_outputs.h"

namespace vosti {

enum class Endpoint : uint8_t { kCompletions, kChatCompletions };

inline constexpr int32_t kMaxN = 16;        // choices per prompt
inline constexpr int32_t kMaxPrompts = 64;  // prompts in one batch completion
inline constexpr int32_t kMaxStopStrings = 16;
inline constexpr int64_t kMaxTokensLimit = 1 << 20;  // beyond any context length

// One prompt of a completion request: text, or token ids.
struct PromptInput {
  bool is_text = true;
  std::string text;
  std::vector<int32_t> ids;
};

struct ChatTurn {
  std::string role;
  std::string content;       // null content reads as ""
  std::string name;          // optional
  std::string tool_call_id;  // role "tool": the call it answers (required)
  // role "assistant": [{"id", "type": "function", "function": {"name", "arguments"}}], the arguments
  // as JSON objects (transformers' templates take them so; OpenAI sends them as JSON text).
  nlohmann::ordered_json tool_calls = nullptr;
};

struct GenerationRequest {
  Endpoint endpoint = Endpoint::kCompletions;
  std::string model;                 // empty: the served model
  std::vector<PromptInput> prompts;  // completions: >= 1
  std::vector<ChatTurn> messages;    // chat: >= 1
  bool add_generation_prompt = true;
  std::optional<int64_t> max_tokens;  // absent: 16 (completions) / rest of the context (chat)
  SamplingParams sampling;            // seed: the first choice's seed if given
  int32_t n = 1;
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
  std::vector<std::string> stop;
  std::vector<int32_t> stop_token_ids;
  bool ignore_eos = false;
  bool echo = false;                   // completions only
  bool logprobs = false;               // completions: `logprobs` >= 0; chat: `logprobs: true`
  bool return_token_ids = false;       // vLLM-style prompt_token_ids / token_ids
  bool return_logits_digests = false;  // extension: per-position logits digests
  bool return_routed_experts = false;  // vLLM's: the experts each computed position routed to (MoE)
  bool return_sampling_mask = false;   // Vosti's: each output position's sampling support
  std::string pin_deployment_id;       // extension "vosti.deployment_id": empty, or the deployment required
  // response_format json_object / json_schema, vLLM's structured_outputs or guided_* (one of them).
  std::optional<StructuredOutputs> structured;
  // chat: tools, tool_choice, parallel_tool_calls (server/tool_request.h); none without tools.
  std::optional<ToolRequest> tools;
};

using ParsedGeneration = std::variant<GenerationRequest, ApiError>;

// Parses and validates a request body for `endpoint`.
ParsedGeneration parse_generation_request(std::string_view body, Endpoint endpoint);

// POST /tokenize: {"model"?, "prompt": str | "messages": [...], "add_special_tokens"?, "add_generation_prompt"?}
struct TokenizeRequest {
  std::string model;
  bool is_chat = false;
  std::string prompt;
  std::vector<ChatTurn> messages;
  bool add_special_tokens = true;
  bool add_generation_prompt = true;
};
using ParsedTokenize = std::variant<TokenizeRequest, ApiError>;
ParsedTokenize parse_tokenize_request(std::string_view body);

// POST /detokenize: {"model"?, "tokens": [int]}
struct DetokenizeRequest {
  std::string model;
  std::vector<int32_t> tokens;
};
using ParsedDetokenize = std::variant<DetokenizeRequest, ApiError>;
ParsedDetokenize parse_detokenize_request(std::string_view body);

}  // namespace vosti
