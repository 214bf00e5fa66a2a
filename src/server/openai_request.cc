#include "server/openai_request.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include <nlohmann/json.hpp>

#include "server/json_writer.h"
#include "server/structured_request.h"
#include "tokenizer/utf8.h"

namespace vosti {
namespace {

using nlohmann::json;

constexpr const char* kCompletionFields[] = {"model",
                                             "vosti",
                                             "prompt",
                                             "max_tokens",
                                             "temperature",
                                             "top_p",
                                             "top_k",
                                             "min_p",
                                             "presence_penalty",
                                             "frequency_penalty",
                                             "repetition_penalty",
                                             "stop",
                                             "stop_token_ids",
                                             "seed",
                                             "n",
                                             "best_of",
                                             "stream",
                                             "stream_options",
                                             "logprobs",
                                             "echo",
                                             "logit_bias",
                                             "user",
                                             "suffix",
                                             "ignore_eos",
                                             "return_token_ids",
                                             "return_logits_digests",
                                             "return_routed_experts",
                                             "return_sampling_mask",
                                             "response_format",
                                             "structured_outputs",
                                             "guided_json",
                                             "guided_regex",
                                             "guided_choice",
                                             "guided_grammar"};
constexpr const char* kChatFields[] = {"model",
                                       "vosti",
                                       "messages",
                                       "max_tokens",
                                       "max_completion_tokens",
                                       "temperature",
                                       "top_p",
                                       "top_k",
                                       "min_p",
                                       "presence_penalty",
                                       "frequency_penalty",
                                       "repetition_penalty",
                                       "stop",
                                       "stop_token_ids",
                                       "seed",
                                       "n",
                                       "stream",
                                       "stream_options",
                                       "logprobs",
                                       "top_logprobs",
                                       "logit_bias",
                                       "user",
                                       "ignore_eos",
                                       "return_token_ids",
                                       "return_logits_digests",
                                       "return_routed_experts",
                                       "return_sampling_mask",
                                       "add_generation_prompt",
                                       "response_format",
                                       "structured_outputs",
                                       "guided_json",
                                       "guided_regex",
                                       "guided_choice",
                                       "guided_grammar",
                                       "tools",
                                       "tool_choice",
                                       "parallel_tool_calls",
                                       "store",
                                       "metadata"};

template <size_t N>
bool is_known(const std::string& name, const char* const (&fields)[N]) {
  for (const char* f : fields) {
    if (name == f) return true;
  }
  return false;
}

// Typed access to the fields of one JSON object; the first error sticks.
class FieldReader {
 public:
  explicit FieldReader(const json& obj) : obj_(obj) {}

  const std::optional<ApiError>& error() const { return error_; }
  bool failed() const { return error_.has_value(); }
  void fail(std::string message, std::string param) {
    if (!error_) error_ = bad_request(std::move(message), std::move(param));
  }
  // Present and not null.
  const json* find(const char* name) const {
    auto it = obj_.find(name);
    return it == obj_.end() || it->is_null() ? nullptr : &*it;
  }

  void read_bool(const char* name, bool& out) {
    const json* v = find(name);
    if (!v) return;
    if (!v->is_boolean()) return fail(std::string("'") + name + "' must be a boolean", name);
    out = v->get<bool>();
  }
  void read_string(const char* name, std::string& out) {
    const json* v = find(name);
    if (!v) return;
    if (!v->is_string()) return fail(std::string("'") + name + "' must be a string", name);
    out = v->get<std::string>();
  }
  // An integer in [lo, hi]; absent leaves `out` unchanged.
  bool read_int(const char* name, int64_t lo, int64_t hi, std::optional<int64_t>& out) {
    const json* v = find(name);
    if (!v) return false;
    if (!v->is_number_integer()) {
      fail(std::string("'") + name + "' must be an integer", name);
      return false;
    }
    if (v->is_number_unsigned() && v->get<uint64_t>() > static_cast<uint64_t>(hi)) {
      fail(range_message(name, lo, hi), name);
      return false;
    }
    const int64_t x = v->get<int64_t>();
    if (x < lo || x > hi) {
      fail(range_message(name, lo, hi), name);
      return false;
    }
    out = x;
    return true;
  }
  // A finite number in [lo, hi] (or (lo, hi] when lo_open).
  void read_float(const char* name, double lo, double hi, bool lo_open, float& out) {
    const json* v = find(name);
    if (!v) return;
    if (!v->is_number()) return fail(std::string("'") + name + "' must be a number", name);
    const double x = v->get<double>();
    const bool below = lo_open ? !(x > lo) : !(x >= lo);
    if (!std::isfinite(x) || below || x > hi) {
      return fail(std::string("'") + name + "' must be in " + (lo_open ? "(" : "[") + format_number(lo) + ", " +
                      format_number(hi) + "], got " + v->dump(),
                  name);
    }
    out = static_cast<float>(x);
  }

 private:
  static std::string format_number(double x) {
    if (x == std::floor(x) && std::fabs(x) < 1e15) return std::to_string(static_cast<int64_t>(x));
    return float_to_shortest(static_cast<float>(x));
  }
  static std::string range_message(const char* name, int64_t lo, int64_t hi) {
    return std::string("'") + name + "' must be an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]";
  }

  const json& obj_;
  std::optional<ApiError> error_;
};

bool is_token_id(const json& v) {
  return v.is_number_integer() && !(v.is_number_unsigned() && v.get<uint64_t>() > INT32_MAX) && v.get<int64_t>() >= 0 &&
         v.get<int64_t>() <= INT32_MAX;
}

// A JSON array of token ids -> ids; false if any element is not a token id.
bool read_token_ids(const json& arr, std::vector<int32_t>& ids) {
  ids.clear();
  for (const json& t : arr) {
    if (!is_token_id(t)) return false;
    ids.push_back(static_cast<int32_t>(t.get<int64_t>()));
  }
  return true;
}

void parse_prompt(FieldReader& r, GenerationRequest& req) {
  const json* p = r.find("prompt");
  if (!p) return r.fail("'prompt' is required", "prompt");
  const char* kShape =
      "'prompt' must be a string, an array of strings, an array of token ids, or an array of arrays "
      "of token ids (token ids are integers >= 0)";
  if (p->is_string()) {
    req.prompts.push_back({true, p->get<std::string>(), {}});
    return;
  }
  if (!p->is_array() || p->empty()) return r.fail(p->is_array() ? "'prompt' must not be empty" : kShape, "prompt");
  const json& first = p->front();
  if (first.is_number()) {
    PromptInput in{false, "", {}};
    if (!read_token_ids(*p, in.ids)) return r.fail(kShape, "prompt");
    req.prompts.push_back(std::move(in));
    return;
  }
  if (p->size() > static_cast<size_t>(kMaxPrompts)) {
    return r.fail("'prompt' holds " + std::to_string(p->size()) + " prompts; at most " + std::to_string(kMaxPrompts) +
                      " per request",
                  "prompt");
  }
  for (const json& e : *p) {
    if (e.is_string() && first.is_string()) {
      req.prompts.push_back({true, e.get<std::string>(), {}});
    } else if (e.is_array() && first.is_array()) {
      PromptInput in{false, "", {}};
      if (e.empty()) return r.fail("'prompt' holds an empty token id list", "prompt");
      if (!read_token_ids(e, in.ids)) return r.fail(kShape, "prompt");
      req.prompts.push_back(std::move(in));
    } else {
      return r.fail(kShape, "prompt");
    }
  }
}

// "content": a string, null, or an array of {"type":"text","text":...} parts.
bool read_content(const json& c, std::string& out) {
  if (c.is_null()) return true;
  if (c.is_string()) {
    out = c.get<std::string>();
    return true;
  }
  if (!c.is_array()) return false;
  for (const json& part : c) {
    if (!part.is_object()) return false;
    auto type = part.find("type");
    auto text = part.find("text");
    if (type == part.end() || *type != "text" || text == part.end() || !text->is_string()) return false;
    out += text->get<std::string>();
  }
  return true;
}

// An assistant turn's "tool_calls": [{"id", "type": "function", "function": {"name", "arguments"}}],
// the arguments JSON text read into an object (in the order sent) for the template.
bool read_tool_calls(FieldReader& r, const json& calls, const std::string& param, nlohmann::ordered_json& out) {
  const std::string shape = param +
                            " must be an array of {\"id\", \"type\": \"function\", \"function\": "
                            "{\"name\", \"arguments\"}}";
  if (!calls.is_array()) {
    r.fail(shape, param);
    return false;
  }
  out = nlohmann::ordered_json::array();
  for (size_t j = 0; j < calls.size(); ++j) {
    const json& c = calls[j];
    const std::string cp = param + "[" + std::to_string(j) + "]";
    if (!c.is_object() || !c.contains("function") || !c["function"].is_object()) {
      r.fail(shape, cp);
      return false;
    }
    if (c.contains("type") && c["type"] != "function") {
      r.fail(cp + ".type must be \"function\"", cp + ".type");
      return false;
    }
    const json& fn = c["function"];
    if (!fn.contains("name") || !fn["name"].is_string() || fn["name"].get<std::string>().empty()) {
      r.fail(cp + ".function.name must be a non-empty string", cp + ".function.name");
      return false;
    }
    nlohmann::ordered_json args = nlohmann::ordered_json::object();
    if (fn.contains("arguments") && !fn["arguments"].is_null()) {
      const json& a = fn["arguments"];
      if (a.is_string()) {
        const std::string& text = a.get_ref<const std::string&>();
        args = nlohmann::ordered_json::parse(text, nullptr, /*allow_exceptions=*/false);
        if (!args.is_object()) {
          r.fail(cp + ".function.arguments must be a JSON object's text, got " + a.dump(), cp + ".function.arguments");
          return false;
        }
      } else if (a.is_object()) {
        args = nlohmann::ordered_json(a);
      } else {
        r.fail(cp + ".function.arguments must be a string holding a JSON object", cp + ".function.arguments");
        return false;
      }
    }
    nlohmann::ordered_json call = nlohmann::ordered_json::object();
    if (c.contains("id")) {
      if (!c["id"].is_string()) {
        r.fail(cp + ".id must be a string", cp + ".id");
        return false;
      }
      call["id"] = c["id"];
    }
    call["type"] = "function";
    call["function"] = {{"name", fn["name"]}, {"arguments", std::move(args)}};
    out.push_back(std::move(call));
  }
  return true;
}

void parse_messages(FieldReader& r, std::vector<ChatTurn>& out) {
  const json* m = r.find("messages");
  if (!m) return r.fail("'messages' is required", "messages");
  if (!m->is_array() || m->empty()) return r.fail("'messages' must be a non-empty array of messages", "messages");
  for (size_t i = 0; i < m->size(); ++i) {
    const json& msg = (*m)[i];
    const std::string param = "messages[" + std::to_string(i) + "]";
    if (!msg.is_object()) return r.fail(param + " must be an object with 'role' and 'content'", param);
    for (const auto& [k, v] : msg.items()) {
      if (k != "role" && k != "content" && k != "name" && k != "tool_calls" && k != "tool_call_id") {
        return r.fail(
            param + " has an unsupported field '" + k + "' (supported: role, content, name, tool_calls, tool_call_id)",
            param);
      }
    }
    auto role = msg.find("role");
    static const char* kRoles[] = {"system", "user", "assistant", "developer", "tool"};
    if (role == msg.end() || !role->is_string() || !is_known(role->get<std::string>(), kRoles)) {
      return r.fail(param + ".role must be one of system, developer, user, assistant, tool", param + ".role");
    }
    ChatTurn turn;
    turn.role = role->get<std::string>();
    auto content = msg.find("content");
    const bool calls = msg.contains("tool_calls") && !msg["tool_calls"].is_null();
    // An assistant turn that calls tools may leave its content out.
    if ((content == msg.end() && !(calls && turn.role == "assistant")) ||
        (content != msg.end() && !read_content(*content, turn.content))) {
      return r.fail(param + ".content must be a string or an array of text parts", param + ".content");
    }
    if (auto name = msg.find("name"); name != msg.end() && !name->is_null()) {
      if (!name->is_string()) return r.fail(param + ".name must be a string", param + ".name");
      turn.name = name->get<std::string>();
    }
    if (calls) {
      if (turn.role != "assistant")
        return r.fail(param + ".tool_calls is only allowed in an assistant message", param + ".tool_calls");
      if (!read_tool_calls(r, msg["tool_calls"], param + ".tool_calls", turn.tool_calls)) return;
    }
    auto call_id = msg.find("tool_call_id");
    const bool has_call_id = call_id != msg.end() && !call_id->is_null();
    if (turn.role == "tool") {
      if (!has_call_id || !call_id->is_string() || call_id->get<std::string>().empty())
        return r.fail(param + " (role \"tool\") needs 'tool_call_id': the id of the tool call it answers",
                      param + ".tool_call_id");
      turn.tool_call_id = call_id->get<std::string>();
    } else if (has_call_id) {
      return r.fail(param + ".tool_call_id is only allowed in a tool message", param + ".tool_call_id");
    }
    out.push_back(std::move(turn));
  }
}

void parse_stop(FieldReader& r, GenerationRequest& req) {
  if (const json* s = r.find("stop")) {
    if (s->is_string()) {
      if (!s->get<std::string>().empty()) req.stop.push_back(s->get<std::string>());
    } else if (s->is_array() && s->size() <= static_cast<size_t>(kMaxStopStrings)) {
      for (const json& e : *s) {
        if (!e.is_string() || e.get<std::string>().empty())
          return r.fail("'stop' entries must be non-empty strings", "stop");
        req.stop.push_back(e.get<std::string>());
      }
    } else {
      return r.fail("'stop' must be a string or an array of at most " + std::to_string(kMaxStopStrings) + " strings",
                    "stop");
    }
  }
  if (const json* s = r.find("stop_token_ids")) {
    if (!s->is_array() || !read_token_ids(*s, req.stop_token_ids)) {
      return r.fail("'stop_token_ids' must be an array of token ids", "stop_token_ids");
    }
  }
}

void parse_logit_bias(FieldReader& r, SamplingParams& sp) {
  const json* b = r.find("logit_bias");
  if (!b) return;
  if (!b->is_object()) return r.fail("'logit_bias' must be an object mapping token ids to biases", "logit_bias");
  for (const auto& [k, v] : b->items()) {
    int64_t id = -1;
    if (!k.empty() && k.size() <= 10 && k.find_first_not_of("0123456789") == std::string::npos) id = std::stoll(k);
    if (id < 0 || id > INT32_MAX) return r.fail("'logit_bias' key '" + k + "' is not a token id", "logit_bias");
    if (!v.is_number() || !std::isfinite(v.get<double>()) || v.get<double>() < -100 || v.get<double>() > 100) {
      return r.fail("'logit_bias' values must be numbers in [-100, 100]", "logit_bias");
    }
    sp.logit_bias.emplace_back(static_cast<int32_t>(id), static_cast<float>(v.get<double>()));
  }
}

void parse_sampling(FieldReader& r, GenerationRequest& req) {
  SamplingParams& sp = req.sampling;
  r.read_float("temperature", 0.0, 1e6, false, sp.temperature);
  r.read_float("top_p", 0.0, 1.0, true, sp.top_p);
  r.read_float("min_p", 0.0, 1.0, false, sp.min_p);
  r.read_float("presence_penalty", -2.0, 2.0, false, sp.presence_penalty);
  r.read_float("frequency_penalty", -2.0, 2.0, false, sp.frequency_penalty);
  r.read_float("repetition_penalty", 0.0, 1e6, true, sp.repetition_penalty);
  std::optional<int64_t> v;
  if (r.read_int("top_k", -1, INT32_MAX, v)) sp.top_k = *v <= 0 ? 0 : static_cast<int32_t>(*v);
  if (const json* s = r.find("seed")) {
    if (!s->is_number_integer() || (!s->is_number_unsigned() && s->get<int64_t>() < 0)) {
      return r.fail("'seed' must be an integer in [0, 2^64)", "seed");
    }
    sp.seed = s->get<uint64_t>();
  }
  v.reset();
  if (r.read_int("n", 1, kMaxN, v)) req.n = static_cast<int32_t>(*v);
  v.reset();
  if (r.read_int("best_of", 1, kMaxN, v) && *v != req.n) {
    r.fail("'best_of' is not supported unless it equals 'n'", "best_of");
  }
  parse_logit_bias(r, sp);
  parse_stop(r, req);
}

void parse_stream_options(FieldReader& r, GenerationRequest& req) {
  r.read_bool("stream", req.stream);
  const json* so = r.find("stream_options");
  if (!so) return;
  if (!req.stream) return r.fail("'stream_options' is only allowed when 'stream' is true", "stream_options");
  if (!so->is_object()) return r.fail("'stream_options' must be an object", "stream_options");
  for (const auto& [k, val] : so->items()) {
    if (k != "include_usage") return r.fail("'stream_options." + k + "' is not supported", "stream_options");
    if (!val.is_boolean()) return r.fail("'stream_options.include_usage' must be a boolean", "stream_options");
    req.include_usage = val.get<bool>();
  }
}

void parse_completion_fields(FieldReader& r, GenerationRequest& req) {
  parse_prompt(r, req);
  std::optional<int64_t> v;
  r.read_int("max_tokens", 0, kMaxTokensLimit, req.max_tokens);
  if (r.read_int("logprobs", 0, kMaxTopLogprobs, v)) {
    req.logprobs = true;
    req.sampling.num_top_logprobs = static_cast<int32_t>(*v);
  }
  r.read_bool("echo", req.echo);
  if (const json* s = r.find("suffix"); s && !(s->is_string() && s->get<std::string>().empty())) {
    r.fail("'suffix' is not supported", "suffix");
  }
}

void parse_chat_fields(FieldReader& r, GenerationRequest& req) {
  parse_messages(r, req.messages);
  r.read_int("max_tokens", 1, kMaxTokensLimit, req.max_tokens);
  r.read_int("max_completion_tokens", 1, kMaxTokensLimit, req.max_tokens);
  r.read_bool("logprobs", req.logprobs);
  std::optional<int64_t> v;
  if (r.read_int("top_logprobs", 0, kMaxTopLogprobs, v)) {
    if (!req.logprobs) return r.fail("'top_logprobs' needs 'logprobs': true", "top_logprobs");
    req.sampling.num_top_logprobs = static_cast<int32_t>(*v);
  }
  r.read_bool("add_generation_prompt", req.add_generation_prompt);
}

// "vosti": {"deployment_id": str}: the deployment the request must run on (409 otherwise).
void parse_vosti_options(FieldReader& r, GenerationRequest& req) {
  const json* v = r.find("vosti");
  if (!v) return;
  if (!v->is_object()) return r.fail("'vosti' must be an object: {\"deployment_id\": \"<32 hex digits>\"}", "vosti");
  for (const auto& [k, val] : v->items()) {
    if (k != "deployment_id") return r.fail("'vosti." + k + "' is not supported (supported: deployment_id)", "vosti");
    if (!val.is_string() || val.get<std::string>().empty())
      return r.fail("'vosti.deployment_id' must be a non-empty string (GET /deployment gives it)",
                    "vosti.deployment_id");
    req.pin_deployment_id = val.get<std::string>();
  }
}

std::variant<json, ApiError> parse_object(std::string_view body) {
  if (!is_valid_utf8(body)) return bad_request("the request body is not valid UTF-8; send UTF-8 encoded JSON");
  json doc = json::parse(body.begin(), body.end(), nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) return bad_request("the request body is not valid JSON");
  if (!doc.is_object()) return bad_request("the request body must be a JSON object");
  return doc;
}

}  // namespace

ParsedGeneration parse_generation_request(std::string_view body, Endpoint endpoint) {
  auto parsed = parse_object(body);
  if (auto* e = std::get_if<ApiError>(&parsed)) return *e;
  const json& doc = std::get<json>(parsed);
  const bool chat = endpoint == Endpoint::kChatCompletions;
  for (const auto& [k, v] : doc.items()) {
    if (chat ? !is_known(k, kChatFields) : !is_known(k, kCompletionFields)) {
      return bad_request(
          "unknown field '" + k + "' for " + (chat ? "/v1/chat/completions" : "/v1/completions") + "; remove it", k);
    }
  }
  GenerationRequest req;
  req.endpoint = endpoint;
  FieldReader r(doc);
  r.read_string("model", req.model);
  if (chat) {
    parse_chat_fields(r, req);
  } else {
    parse_completion_fields(r, req);
  }
  parse_sampling(r, req);
  parse_stream_options(r, req);
  r.read_bool("ignore_eos", req.ignore_eos);
  r.read_bool("return_token_ids", req.return_token_ids);
  r.read_bool("return_logits_digests", req.return_logits_digests);
  r.read_bool("return_routed_experts", req.return_routed_experts);
  r.read_bool("return_sampling_mask", req.return_sampling_mask);
  parse_vosti_options(r, req);
  if (r.failed()) return *r.error();
  auto structured = parse_structured_fields(doc, body);
  if (auto* e = std::get_if<ApiError>(&structured)) return *e;
  req.structured = std::get<std::optional<StructuredOutputs>>(std::move(structured));
  if (chat) {
    auto tools = parse_tool_fields(doc, body);
    if (auto* e = std::get_if<ApiError>(&tools)) return *e;
    req.tools = std::get<std::optional<ToolRequest>>(std::move(tools));
    if (req.tools && (req.tools->choice == ToolChoice::kRequired || req.tools->choice == ToolChoice::kNamed)) {
      if (req.structured)
        return bad_request(
            "tool_choice \"required\" or a named function is enforced by a grammar; it cannot be combined with "
            "another output constraint (response_format, structured_outputs, guided_*)",
            "tool_choice");
      // The grammar itself is the served family's format (OpenAiService sets it: forced_constraint).
    }
  }
  std::string user;
  r.read_string("user", user);
  if (r.failed()) return *r.error();
  return req;
}

ParsedTokenize parse_tokenize_request(std::string_view body) {
  auto parsed = parse_object(body);
  if (auto* e = std::get_if<ApiError>(&parsed)) return *e;
  const json& doc = std::get<json>(parsed);
  for (const auto& [k, v] : doc.items()) {
    if (k != "model" && k != "prompt" && k != "messages" && k != "add_special_tokens" && k != "add_generation_prompt") {
      return bad_request("unknown field '" + k + "' for /tokenize; remove it", k);
    }
  }
  TokenizeRequest req;
  FieldReader r(doc);
  r.read_string("model", req.model);
  r.read_bool("add_special_tokens", req.add_special_tokens);
  r.read_bool("add_generation_prompt", req.add_generation_prompt);
  if (r.find("messages")) {
    req.is_chat = true;
    parse_messages(r, req.messages);
  } else if (r.find("prompt")) {
    r.read_string("prompt", req.prompt);
  } else {
    r.fail("/tokenize needs 'prompt' (a string) or 'messages'", "prompt");
  }
  if (r.failed()) return *r.error();
  return req;
}

ParsedDetokenize parse_detokenize_request(std::string_view body) {
  auto parsed = parse_object(body);
  if (auto* e = std::get_if<ApiError>(&parsed)) return *e;
  const json& doc = std::get<json>(parsed);
  for (const auto& [k, v] : doc.items()) {
    if (k != "model" && k != "tokens") return bad_request("unknown field '" + k + "' for /detokenize; remove it", k);
  }
  DetokenizeRequest req;
  FieldReader r(doc);
  r.read_string("model", req.model);
  const json* t = r.find("tokens");
  if (!t || !t->is_array() || !read_token_ids(*t, req.tokens)) {
    r.fail("'tokens' must be an array of token ids (integers >= 0)", "tokens");
  }
  if (r.failed()) return *r.error();
  return req;
}

}  // namespace vosti
