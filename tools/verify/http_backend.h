// HttpBackend: the paper protocol against any OpenAI-compatible server (Vosti, vLLM, SGLang,
// llama-server) through POST /v1/completions with token-id prompts.
//   Evidence: Vosti's logits digests (XXH3-128 of every full f32 row, `return_logits_digests`);
//     other servers' token ids and top-20 logprobs, which the report calls weaker.
//   A call's prompts go in one batched completion request (Vosti admits them in one step).
//   Chunking: a server's step token budget B is fixed at launch (Vosti's /metrics says it, or
//     --server-token-budget); a chunk of b < B tokens is induced by a filler prompt of B - b
//     tokens put first in the same request, so the prompt's first chunk is b tokens. Budgets
//     b >= B, or any when B is unknown, cannot be induced and are reported as not tested. (The
//     filler is several prompts where B - b exceeds the server's context.)
//   Cold: the server's reset route (POST /reset_prefix_cache: Vosti, vLLM in dev mode; SGLang's
//     /flush_cache) before every call of an arm without prefix caching, and before the cold
//     query of prefix reuse. Without a route prefix reuse is not tested.
//   Fresh engines do not exist remotely: the batch relation's fresh spots run on the same server.
// Thread safety: one caller at a time.
#pragma once

#include <memory>
#include <optional>
#include <random>

#include "engine/token_domain.h"
#include "tools/bench/http_client.h"
#include "tools/verify/protocol_backend.h"

namespace vosti {

struct HttpBackendOptions {
  std::string base_url;  // http://HOST:PORT
  std::string api_key;
  std::string model;                // the served model's name; empty: the first /v1/models lists
  std::string tokenizer;            // a local copy of the model (directory or GGUF) for its vocabulary,
                                    // when /v1/models does not list it (servers other than Vosti)
  int32_t server_token_budget = 0;  // the server's step token budget when its /metrics does not say
  double timeout_s = 3600;          // the longest silence within one call
};

class HttpBackend final : public ProtocolBackend {
 public:
  // Asks /v1/models (model, context, vocabulary), /metrics (budget, prefix caching) and probes the
  // reset route. Errors: kInvalidArgument for a bad URL or a missing vocabulary (naming the flag),
  // kFailedPrecondition for a server that does not answer.
  static Result<std::unique_ptr<HttpBackend>> connect(const HttpBackendOptions& options);

  const TokenDomain& domain() const { return domain_; }
  int32_t window() const { return window_; }
  int32_t context() const { return context_; }  // the server's max_model_len, 0 if unknown
  const std::string& model() const { return model_; }

  Evidence evidence() const override { return vosti_ ? Evidence::kDigests : Evidence::kTopLogprobs; }
  std::string description() const override;
  Status begin_arm(const ArmSettings& arm) override;
  Result<CallResult> run_call(std::span<const std::vector<int32_t>> prompts, int32_t max_tokens,
                              int32_t record_positions) override;
  Status reset_prefix_cache() override;
  bool fresh_engines() const override { return false; }
  std::string chunking_unavailable(int32_t budget) const override;
  std::string prefix_reuse_unavailable() const override;
  std::vector<std::string> notes() const override;

 private:
  HttpBackend(HttpBackendOptions options, bench::BaseUrl url) : options_(std::move(options)), url_(std::move(url)) {}
  std::vector<std::pair<std::string, std::string>> headers() const;
  Status read_models(std::string* owned_by);
  void read_metrics();
  void probe_reset_route();
  std::vector<int32_t> filler(int32_t length);
  Result<CallResult> parse_reply(const std::string& body, size_t num_prompts, size_t num_fillers,
                                 int32_t record_positions) const;

  HttpBackendOptions options_;
  bench::BaseUrl url_;
  std::string model_;
  std::string server_kind_;
  bool vosti_ = false;
  TokenDomain domain_;
  int32_t window_ = 0;
  int32_t context_ = 0;
  int32_t budget_ = 0;                  // the server's step token budget, 0 unknown
  std::optional<bool> prefix_caching_;  // as its /metrics says
  std::string reset_path_;              // "" when the server has none
  ArmSettings arm_;
  std::mt19937_64 filler_rng_{0xF111E7};
};

}  // namespace vosti
