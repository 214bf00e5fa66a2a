#include "tools/verify/http_backend.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "model/model_file.h"
#include "tokenizer/tokenizer.h"
#include "tools/bench/http_target.h"
#include "tools/bench/openai_stream.h"

namespace vosti {
namespace {

using nlohmann::json;

std::vector<int32_t> int_list(const json& j) {
  std::vector<int32_t> out;
  if (j.is_array())
    for (const json& v : j)
      if (v.is_number_integer()) out.push_back(v.get<int32_t>());
  return out;
}

// A token text "token_id:123" (vLLM's return_tokens_as_token_ids) as its id, else -1.
int32_t token_id_of(const json& token) {
  if (!token.is_string()) return -1;
  const std::string s = token.get<std::string>();
  if (s.rfind("token_id:", 0) != 0) return -1;
  return static_cast<int32_t>(std::strtol(s.c_str() + 9, nullptr, 10));
}

// One position of completions logprobs as one text: the token, its logprob and the sorted top-20.
std::string logprob_text(const json& lp, size_t k) {
  std::string out;
  const json& tokens = lp.value("tokens", json::array());
  const json& values = lp.value("token_logprobs", json::array());
  const json& tops = lp.value("top_logprobs", json::array());
  out += (k < tokens.size() ? tokens[k].dump() : "?") + "=" + (k < values.size() ? values[k].dump() : "?") + " top:";
  if (k < tops.size() && tops[k].is_object()) {
    std::vector<std::string> items;
    for (auto it = tops[k].begin(); it != tops[k].end(); ++it)
      items.push_back(json(it.key()).dump() + "=" + it->dump());
    std::sort(items.begin(), items.end());
    for (const std::string& s : items) out += s + ";";
  }
  return out;
}

}  // namespace

Result<std::unique_ptr<HttpBackend>> HttpBackend::connect(const HttpBackendOptions& options) {
  VOSTI_ASSIGN_OR_RETURN(bench::BaseUrl url, bench::parse_base_url(options.base_url));
  std::unique_ptr<HttpBackend> b(new HttpBackend(options, url));
  std::string owned_by;
  VOSTI_RETURN_IF_ERROR(b->read_models(&owned_by));
  b->server_kind_ = owned_by.empty() ? "unknown server" : owned_by;
  b->vosti_ = owned_by == "vosti";
  b->read_metrics();
  if (options.server_token_budget > 0) b->budget_ = options.server_token_budget;
  b->probe_reset_route();
  return b;
}

std::vector<std::pair<std::string, std::string>> HttpBackend::headers() const {
  if (options_.api_key.empty()) return {};
  return {{"Authorization", "Bearer " + options_.api_key}};
}

// The model's name, context and vocabulary: from /v1/models (Vosti lists them), else --tokenizer.
Status HttpBackend::read_models(std::string* owned_by) {
  VOSTI_ASSIGN_OR_RETURN(bench::HttpReply reply, bench::http_get(url_, "/v1/models", headers(), 30));
  if (reply.status != 200)
    return failed_precondition("GET " + url_.to_string() +
                               "/v1/models: " + bench::error_message(reply.status, reply.body) +
                               (reply.status == 401 ? " (give --api-key)" : ""));
  const json j = json::parse(reply.body, nullptr, false);
  json entry = json::object();
  if (!j.is_discarded() && j.contains("data") && j["data"].is_array())
    for (const json& m : j["data"])
      if (m.is_object() && (options_.model.empty() || m.value("id", "") == options_.model)) {
        entry = m;
        break;
      }
  model_ = options_.model.empty() ? entry.value("id", "") : options_.model;
  if (model_.empty()) return failed_precondition(url_.to_string() + "/v1/models lists no model; give --model NAME");
  *owned_by = entry.value("owned_by", "");
  if (entry.contains("max_model_len") && entry["max_model_len"].is_number_integer())
    context_ = entry["max_model_len"].get<int32_t>();
  if (entry.contains("vocab_size") && entry["vocab_size"].is_number_integer()) {
    domain_.vocab_size = entry["vocab_size"].get<int64_t>();
    domain_.bos_token_id =
        entry.value("bos_token_id", json()).is_number_integer() ? entry["bos_token_id"].get<int32_t>() : -1;
    domain_.eos_token_ids = int_list(entry.value("eos_token_ids", json::array()));
    domain_.special_token_ids = int_list(entry.value("special_token_ids", json::array()));
    window_ = entry.value("sliding_window", 0);
    return Status();
  }
  if (options_.tokenizer.empty())
    return invalid_argument(
        "the server's /v1/models does not list its vocabulary: give --tokenizer PATH (the "
        "served model's directory or GGUF) so that the protocol can draw its prompts");
  VOSTI_ASSIGN_OR_RETURN(std::shared_ptr<const ModelFile> file, ModelFile::open(options_.tokenizer));
  auto tokenizer = Tokenizer::load_for_model(options_.tokenizer);
  domain_ = token_domain(file->config(), tokenizer.ok() ? tokenizer->get() : nullptr);
  window_ = static_cast<int32_t>(file->config().sliding_window);
  if (context_ == 0) context_ = static_cast<int32_t>(file->config().max_position_embeddings);
  return Status();
}

void HttpBackend::read_metrics() {
  auto reply = bench::http_get(url_, "/metrics", headers(), 30);
  if (!reply.ok() || reply->status != 200) return;
  const auto m = bench::parse_prometheus(reply->body);
  if (auto it = m.find("vosti_max_num_batched_tokens"); it != m.end()) budget_ = static_cast<int32_t>(it->second);
  if (auto it = m.find("vosti_prefix_caching_enabled"); it != m.end()) prefix_caching_ = it->second != 0;
}

void HttpBackend::probe_reset_route() {
  for (const char* path : {"/reset_prefix_cache", "/flush_cache"}) {
    auto reply = bench::http_post(url_, path, "{}", headers(), 60);
    if (reply.ok() && reply->status >= 200 && reply->status < 300) {
      reset_path_ = path;
      return;
    }
  }
}

std::string HttpBackend::description() const {
  return url_.to_string() + " (" + server_kind_ + "), model " + model_ + ", step token budget " +
         (budget_ > 0 ? std::to_string(budget_) : std::string("unknown"));
}

std::vector<std::string> HttpBackend::notes() const {
  std::vector<std::string> n = {
      "remote: no fresh engine; the batch relation's 8 fresh-spot rows are the prompts run again on the same server"};
  if (budget_ > 0)
    n.push_back("remote: a chunk of b tokens is induced by " + std::to_string(budget_) +
                " - b filler tokens ahead of the prompt in the same request (first chunk b, then up to " +
                std::to_string(budget_) + ")");
  n.push_back(reset_path_.empty()
                  ? "remote: no reset route: cold calls are unverified unless cached tokens are reported"
                  : "remote: cold = after POST " + reset_path_);
  return n;
}

Status HttpBackend::begin_arm(const ArmSettings& arm) {
  if (arm.prefix_caching && !prefix_reuse_unavailable().empty())
    return failed_precondition("arm " + arm.name + ": " + prefix_reuse_unavailable());
  arm_ = arm;
  return Status();
}

std::string HttpBackend::chunking_unavailable(int32_t budget) const {
  if (budget_ <= 0)
    return "the server's step token budget is unknown (give --server-token-budget, its --max-num-batched-tokens)";
  if (budget >= budget_)
    return "the server's step token budget is " + std::to_string(budget_) + ": a chunk of " + std::to_string(budget) +
           " cannot be induced (start it with a larger budget)";
  return "";
}

std::string HttpBackend::prefix_reuse_unavailable() const {
  if (prefix_caching_ && !*prefix_caching_) return "the server's prefix cache is off";
  if (reset_path_.empty())
    return "the server has no prefix-cache reset route (POST /reset_prefix_cache, or SGLang's /flush_cache), so a "
           "cold run cannot be made cold";
  return "";
}

Status HttpBackend::reset_prefix_cache() {
  if (reset_path_.empty()) return unimplemented(prefix_reuse_unavailable());
  VOSTI_ASSIGN_OR_RETURN(bench::HttpReply reply, bench::http_post(url_, reset_path_, "{}", headers(), 600));
  if (reply.status < 200 || reply.status >= 300)
    return internal_error("POST " + reset_path_ + ": " + bench::error_message(reply.status, reply.body));
  return Status();
}

std::vector<int32_t> HttpBackend::filler(int32_t length) {
  std::vector<int32_t> out;
  const auto& special = domain_.special_token_ids;
  while (static_cast<int32_t>(out.size()) < length) {
    const auto t = static_cast<int32_t>(filler_rng_() % static_cast<uint64_t>(domain_.vocab_size));
    if (!std::binary_search(special.begin(), special.end(), t)) out.push_back(t);
  }
  return out;
}

Result<CallResult> HttpBackend::run_call(std::span<const std::vector<int32_t>> prompts, int32_t max_tokens,
                                         int32_t record_positions) {
  if (!arm_.prefix_caching && !reset_path_.empty()) VOSTI_RETURN_IF_ERROR(reset_prefix_cache());
  // A filler only where it chunks something: some prompt is longer than the arm's budget. It is cut
  // into prompts the server's context holds; admitted first, together they take B - b tokens.
  size_t longest = 0;
  for (const auto& p : prompts) longest = std::max(longest, p.size());
  json batch = json::array();
  if (budget_ > 0 && arm_.token_budget < budget_ && longest > static_cast<size_t>(arm_.token_budget)) {
    const int32_t piece = context_ > 0 ? context_ - max_tokens : budget_;
    for (int32_t left = budget_ - arm_.token_budget; left > 0; left -= piece)
      batch.push_back(filler(std::min(left, piece)));
  }
  const size_t num_fillers = batch.size();
  for (const auto& p : prompts) batch.push_back(p);
  json body = {{"model", model_}, {"prompt", batch},    {"max_tokens", max_tokens}, {"temperature", 0},
               {"seed", 0},       {"ignore_eos", true}, {"return_token_ids", true}};
  if (vosti_) {
    body["return_logits_digests"] = true;
  } else {
    body["logprobs"] = 20;
    body["return_tokens_as_token_ids"] = true;
  }
  VOSTI_ASSIGN_OR_RETURN(bench::HttpReply reply,
                         bench::http_post(url_, "/v1/completions", body.dump(), headers(), options_.timeout_s));
  if (reply.status != 200)
    return internal_error("POST /v1/completions: " + bench::error_message(reply.status, reply.body));
  return parse_reply(reply.body, prompts.size(), num_fillers, record_positions);
}

Result<CallResult> HttpBackend::parse_reply(const std::string& body, size_t num_prompts, size_t num_fillers,
                                            int32_t record_positions) const {
  const json j = json::parse(body, nullptr, false);
  if (j.is_discarded() || !j.contains("choices") || !j["choices"].is_array())
    return internal_error("the server's completion is not JSON with choices: " + body.substr(0, 200));
  CallResult out;
  out.prompts.resize(num_prompts);
  const size_t first = num_fillers;
  for (const json& choice : j["choices"]) {
    const size_t index = choice.value("index", size_t{0});
    if (index < first || index - first >= num_prompts) continue;
    PromptResult& r = out.prompts[index - first];
    r.tokens = int_list(choice.value("token_ids", json::array()));
    const json& lp = choice.value("logprobs", json());
    if (r.tokens.empty() && lp.is_object() && lp.contains("tokens"))
      for (const json& t : lp["tokens"])
        if (int32_t id = token_id_of(t); id >= 0) r.tokens.push_back(id);
    for (int32_t k = 0; k < record_positions; ++k) {
      if (vosti_) {
        const json& d = choice.value("logits_digests", json::array());
        if (static_cast<size_t>(k) < d.size() && d[k].is_string()) r.row_texts.push_back(d[k].get<std::string>());
      } else if (lp.is_object()) {
        r.row_texts.push_back(logprob_text(lp, static_cast<size_t>(k)));
      }
    }
  }
  const json& usage = j.value("usage", json::object());
  if (usage.contains("prompt_tokens_details") && usage["prompt_tokens_details"].is_object() &&
      usage["prompt_tokens_details"].value("cached_tokens", json()).is_number_integer())
    out.num_cached_tokens = usage["prompt_tokens_details"]["cached_tokens"].get<int64_t>();
  if (num_prompts == 1) out.prompts[0].num_cached_tokens = out.num_cached_tokens;
  return out;
}

}  // namespace vosti
