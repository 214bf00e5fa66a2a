// Fuzzes the server's request parsers (completions, chat, tokenize, detokenize) and
// the JSON writer: no input may crash, throw or hang; an accepted request must
// respect the documented ranges; every string the writer emits must be valid JSON.
// Input: byte 0 picks the parser, the rest is the body.
// fuzz-libs: vosti_server
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include <nlohmann/json.hpp>

#include "server/api_error.h"
#include "server/json_writer.h"
#include "server/openai_request.h"

namespace {

void require(bool ok) {
  if (!ok) std::abort();
}

void check_generation(const vosti::ParsedGeneration& parsed) {
  if (const auto* e = std::get_if<vosti::ApiError>(&parsed)) {
    require(e->http_status == 400 && !e->message.empty());
    require(nlohmann::json::accept(vosti::error_json(*e)));
    return;
  }
  const auto& r = std::get<vosti::GenerationRequest>(parsed);
  const auto& s = r.sampling;
  require(s.temperature >= 0 && s.top_p > 0 && s.top_p <= 1 && s.min_p >= 0 && s.min_p <= 1);
  require(s.top_k >= 0 && s.repetition_penalty > 0 && s.num_top_logprobs >= 0 &&
          s.num_top_logprobs <= vosti::kMaxTopLogprobs);
  require(r.n >= 1 && r.n <= vosti::kMaxN);
  require(!r.max_tokens || (*r.max_tokens >= 0 && *r.max_tokens <= vosti::kMaxTokensLimit));
  require(r.endpoint == vosti::Endpoint::kChatCompletions ? !r.messages.empty() : !r.prompts.empty());
  for (const auto& p : r.prompts) {
    for (int32_t id : p.ids) require(id >= 0);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view body(reinterpret_cast<const char*>(data + 1), size - 1);
  switch (data[0] % 5) {
    case 0:
      check_generation(vosti::parse_generation_request(body, vosti::Endpoint::kCompletions));
      break;
    case 1:
      check_generation(vosti::parse_generation_request(body, vosti::Endpoint::kChatCompletions));
      break;
    case 2:
      (void)vosti::parse_tokenize_request(body);
      break;
    case 3:
      (void)vosti::parse_detokenize_request(body);
      break;
    default: {
      vosti::JsonWriter w;
      w.begin_object().key(body).value(body).end_object();
      require(nlohmann::json::accept(w.str()));
    }
  }
  return 0;
}
