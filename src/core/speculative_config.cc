#include "core/speculative_config.h"

#include <nlohmann/json.hpp>

namespace vosti {
namespace {

Status bad(const std::string& what) {
  return invalid_argument(
      "speculative_config: " + what +
      R"( (expected e.g. {"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_max": 4}))");
}

Result<int32_t> read_int(const nlohmann::json& j, const char* key) {
  const nlohmann::json& v = j.at(key);
  if (!v.is_number_integer()) return bad(std::string("\"") + key + "\" must be an integer, got " + v.dump());
  const int64_t x = v.get<int64_t>();
  if (x < -1000000 || x > 1000000) return bad(std::string("\"") + key + "\" is out of range: " + v.dump());
  return static_cast<int32_t>(x);
}

}  // namespace

Result<SpeculativeConfig> parse_speculative_config(std::string_view text) {
  SpeculativeConfig c;
  if (text.find_first_not_of(" \t\r\n") == std::string_view::npos) return c;
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return bad("not valid JSON: " + std::string(text));
  if (j.is_null()) return c;
  if (!j.is_object()) return bad("must be a JSON object, got " + j.dump());
  if (j.empty()) return c;
  for (const auto& [key, value] : j.items()) {
    if (key != "method" && key != "num_speculative_tokens" && key != "prompt_lookup_min" &&
        key != "prompt_lookup_max" && key != "model" && key != "disable_by_batch_size")
      return bad("unknown field \"" + key + "\" (known: method, num_speculative_tokens, prompt_lookup_min, " +
                 "prompt_lookup_max, model, disable_by_batch_size)");
  }
  const bool has_model = j.contains("model") && !j.at("model").is_null();
  if (has_model) {
    if (!j.at("model").is_string() || j.at("model").get<std::string>().empty())
      return bad("\"model\" must be the draft model's path, got " + j.at("model").dump());
    c.model = j.at("model").get<std::string>();
  }
  if (j.contains("method") && !j.at("method").is_string())
    return bad("\"method\" must be a string, got " + j.at("method").dump());
  c.method = j.contains("method") ? j.at("method").get<std::string>() : has_model ? "draft_model" : "";
  if (c.method.empty()) return bad("\"method\" is missing (or give a draft \"model\")");
  if (c.method != "ngram" && c.method != "draft_model")
    return bad("unknown method \"" + c.method + "\" (supported: ngram, draft_model)");
  if (c.method == "draft_model" && !has_model) return bad("the draft_model method needs \"model\": a path");
  if (c.method == "ngram" && has_model) return bad("the ngram method takes no \"model\"");
  if (!j.contains("num_speculative_tokens")) return bad("\"num_speculative_tokens\" is missing");
  VOSTI_ASSIGN_OR_RETURN(c.num_speculative_tokens, read_int(j, "num_speculative_tokens"));
  if (c.num_speculative_tokens < 1 || c.num_speculative_tokens > kMaxSpeculativeTokens)
    return bad("\"num_speculative_tokens\" must be in [1, " + std::to_string(kMaxSpeculativeTokens) + "], got " +
               std::to_string(c.num_speculative_tokens));
  if (j.contains("disable_by_batch_size") && !j.at("disable_by_batch_size").is_null()) {
    VOSTI_ASSIGN_OR_RETURN(c.disable_by_batch_size, read_int(j, "disable_by_batch_size"));
    if (c.disable_by_batch_size < 2)
      return bad("\"disable_by_batch_size\" must be >= 2, got " + std::to_string(c.disable_by_batch_size));
  }
  const bool has_min = j.contains("prompt_lookup_min") && !j.at("prompt_lookup_min").is_null();
  const bool has_max = j.contains("prompt_lookup_max") && !j.at("prompt_lookup_max").is_null();
  if (has_min) {
    VOSTI_ASSIGN_OR_RETURN(c.prompt_lookup_min, read_int(j, "prompt_lookup_min"));
  }
  if (has_max) {
    VOSTI_ASSIGN_OR_RETURN(c.prompt_lookup_max, read_int(j, "prompt_lookup_max"));
  }
  if (c.method == "draft_model") {
    if (has_min || has_max) return bad("prompt_lookup_min/max belong to the ngram method, not draft_model");
    return c;
  }
  if (!has_min && !has_max) c.prompt_lookup_min = c.prompt_lookup_max = 5;  // vLLM's default
  if (!has_min) c.prompt_lookup_min = c.prompt_lookup_max;
  if (!has_max) c.prompt_lookup_max = c.prompt_lookup_min;
  if (c.prompt_lookup_min < 1)
    return bad("\"prompt_lookup_min\" must be >= 1, got " + std::to_string(c.prompt_lookup_min));
  if (c.prompt_lookup_max < c.prompt_lookup_min)
    return bad("\"prompt_lookup_max\" (" + std::to_string(c.prompt_lookup_max) +
               ") must be >= \"prompt_lookup_min\" (" + std::to_string(c.prompt_lookup_min) + ")");
  return c;
}

}  // namespace vosti
