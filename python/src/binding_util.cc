#include "python/src/binding_util.h"

#include <nanobind/stl/string.h>

#include <nlohmann/json.hpp>

#include "tokenizer/chat_template.h"
#include "tokenizer/chat_tools.h"

namespace nb = nanobind;

namespace vosti::python {

void throw_status(const Status& status, bool loading) {
  PyObject* type = PyExc_RuntimeError;
  switch (status.code()) {
    case StatusCode::kInvalidArgument:
    case StatusCode::kOutOfRange:
    case StatusCode::kDataLoss:
      type = PyExc_ValueError;
      break;
    case StatusCode::kNotFound:
      type = loading ? PyExc_FileNotFoundError : PyExc_ValueError;
      break;
    case StatusCode::kUnimplemented:
      type = PyExc_NotImplementedError;
      break;
    case StatusCode::kResourceExhausted:
      type = PyExc_MemoryError;
      break;
    default:
      break;
  }
  PyErr_SetString(type, status.message().c_str());
  throw nb::python_error();
}

const Tokenizer& tokenizer_of(const OfflineEngine& engine) {
  if (!engine.tokenizer())
    throw_status(
        failed_precondition("this LLM was made with skip_tokenizer_init=True: it takes and returns token ids only"));
  return *engine.tokenizer();
}

std::vector<float> chosen_logprobs(const std::vector<ScoredToken>& scored) {
  std::vector<float> out;
  out.reserve(scored.size());
  for (const ScoredToken& s : scored) out.push_back(s.logprob);
  return out;
}

std::vector<std::vector<std::pair<int32_t, float>>> top_lists(const std::vector<ScoredToken>& scored) {
  std::vector<std::vector<std::pair<int32_t, float>>> out(scored.size());
  for (size_t i = 0; i < scored.size(); ++i)
    for (const TokenLogprob& t : scored[i].top) out[i].emplace_back(t.token, t.logprob);
  return out;
}

std::tuple<int64_t, std::string, std::string> weights_tuple(const WeightsInfo& w) {
  return {w.version, w.weights_digest, w.deployment_digest};
}

nb::dict runner_info_dict(const RunnerInfo& info) {
  nb::dict d;
  d["device"] = info.device;
  d["kv_cache_dtype"] = info.kv_cache_dtype;
  d["num_blocks"] = info.num_blocks;
  d["block_size"] = info.block_size;
  d["max_model_len"] = info.max_model_len;
  d["kv_cache_bytes"] = info.kv_cache_bytes;
  d["weight_bytes"] = info.weight_bytes;
  return d;
}

nb::dict model_config_dict(const ModelConfig& c) {
  nb::dict d;
  d["architecture"] = std::string(architecture_name(c.arch));
  d["name"] = c.name;
  d["vocab_size"] = c.vocab_size;
  d["hidden_size"] = c.hidden_size;
  d["intermediate_size"] = c.intermediate_size;
  d["num_layers"] = c.num_layers;
  d["num_heads"] = c.num_heads;
  d["num_kv_heads"] = c.num_kv_heads;
  d["head_dim"] = c.head_dim;
  d["max_position_embeddings"] = c.max_position_embeddings;
  d["tie_word_embeddings"] = c.tie_word_embeddings;
  return d;
}

nb::dict stats_dict(const EngineStats& s) {
  nb::dict d;
  d["num_running"] = s.num_running;
  d["num_waiting"] = s.num_waiting;
  d["num_blocks_total"] = s.num_blocks_total;
  d["num_blocks_used"] = s.num_blocks_used;
  d["num_window_blocks_total"] = s.num_window_blocks_total;
  d["num_window_blocks_used"] = s.num_window_blocks_used;
  d["num_preemptions"] = s.num_preemptions;
  d["num_prefix_queries"] = s.num_prefix_queries;
  d["num_prefix_hits"] = s.num_prefix_hits;
  d["num_steps"] = s.num_steps;
  d["num_generated_tokens"] = s.num_generated_tokens;
  d["num_drafts"] = s.num_drafts;
  d["num_draft_tokens"] = s.num_draft_tokens;
  d["num_accepted_tokens"] = s.num_accepted_tokens;
  d["seconds_in_steps"] = s.seconds_in_steps;
  return d;
}

std::string render_chat_text(const OfflineEngine& engine, const std::string& messages_json, bool add_generation_prompt,
                             const std::optional<std::string>& template_source, const std::string& extra_context_json,
                             bool tool_fallback) {
  const Tokenizer& tok = tokenizer_of(engine);
  const std::optional<std::string>& source = template_source ? template_source : tok.chat_template();
  if (!source)
    throw_status(invalid_argument("the model has no chat template: pass chat_template=..., or use generate()"));
  const nlohmann::ordered_json messages = nlohmann::ordered_json::parse(messages_json, nullptr, false);
  const nlohmann::ordered_json extra = nlohmann::ordered_json::parse(extra_context_json, nullptr, false);
  if (messages.is_discarded() || !messages.is_array())
    throw_status(invalid_argument("messages must be a list of dicts"));
  if (extra.is_discarded() || !extra.is_object()) throw_status(invalid_argument("chat_template_kwargs must be a dict"));
  ChatOptions options;
  options.add_generation_prompt = add_generation_prompt;
  if (tok.bos_id()) options.bos_token = tok.bos_token();
  if (tok.eos_id()) options.eos_token = tok.eos_token();
  options.extra_context = extra;
  // With tool_fallback (LLM.chat), the tools go where the server puts them: the template's `tools`,
  // or its fallback system turn. Without (apply_chat_template, as transformers), `tools` is a
  // template variable like any other.
  nlohmann::ordered_json tools = nlohmann::ordered_json::array();
  if (const auto t = extra.find("tools"); tool_fallback && t != extra.end()) {
    if (!t->is_null() && !t->is_array()) throw_status(invalid_argument("tools must be a list of dicts"));
    if (t->is_array()) tools = *t;
    options.extra_context.erase("tools");
  }
  ToolPlacement placed = tool_fallback ? place_tools(*source, messages, tools) : ToolPlacement{messages};
  if (tool_fallback) options.tools = std::move(placed.tools);
  Result<ChatTemplate> parsed = ChatTemplate::parse(*source);
  if (!parsed.ok()) throw_status(parsed.status());
  Result<std::string> text = parsed->render(placed.messages, options);
  if (!text.ok()) throw_status(invalid_argument("cannot render the chat template: " + text.status().message()));
  return std::move(text).value();
}

}  // namespace vosti::python
