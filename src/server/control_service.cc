#include "server/control_service.h"

#include <array>
#include <cstring>

#include <nlohmann/json.hpp>

#include "offline/weight_sources.h"
#include "runner/load_device_model.h"
#include "server/api_error.h"
#include "server/json_writer.h"

namespace vosti {
namespace {

using json = nlohmann::json;

struct Route {
  const char* path;
  const char* method;
};
constexpr Route kRoutes[] = {
    {"/init_weight_transfer_engine", "POST"},
    {"/start_weight_update", "POST"},
    {"/update_weights", "POST"},
    {"/finish_weight_update", "POST"},
    {"/update_weights_from_disk", "POST"},
    {"/pause", "POST"},
    {"/pause_generation", "POST"},
    {"/resume", "POST"},
    {"/continue_generation", "POST"},
    {"/is_paused", "GET"},
    {"/sleep", "POST"},
    {"/release_memory_occupation", "POST"},
    {"/wake_up", "POST"},
    {"/resume_memory_occupation", "POST"},
    {"/is_sleeping", "GET"},
    {"/deployment", "GET"},
};

ApiError api_error(int status, std::string message, std::string code, std::string param = "") {
  ApiError e;
  e.http_status = status;
  e.message = std::move(message);
  e.type = status >= 500 ? "server_error" : "invalid_request_error";
  e.code = std::move(code);
  e.param = std::move(param);
  return e;
}

void reply_error(const ControlService::Reply& reply, const ApiError& e) { reply(e.http_status, error_json(e)); }

// A Status from the engine or the loaders as an HTTP error.
ApiError status_error(const Status& s, const std::string& what) {
  switch (s.code()) {
    case StatusCode::kInvalidArgument:
    case StatusCode::kNotFound:
    case StatusCode::kOutOfRange:
    case StatusCode::kDataLoss:
      return api_error(400, what + ": " + s.message(), "invalid_weights");
    case StatusCode::kFailedPrecondition:
      return api_error(409, what + ": " + s.message(), "conflict");
    case StatusCode::kUnimplemented:
      return api_error(501, what + ": " + s.message(), "not_implemented");
    default:
      return api_error(500, what + ": " + s.message(), "internal_error");
  }
}

// The value of `name` in a query string "a=1&b=2" (not percent-decoded: the values are plain words).
std::optional<std::string> query_param(std::string_view query, std::string_view name) {
  while (!query.empty()) {
    const size_t amp = query.find('&');
    const std::string_view pair = query.substr(0, amp);
    const size_t eq = pair.find('=');
    if (pair.substr(0, eq) == name) return std::string(eq == std::string_view::npos ? "" : pair.substr(eq + 1));
    if (amp == std::string_view::npos) break;
    query.remove_prefix(amp + 1);
  }
  return std::nullopt;
}

// The body as a JSON object (an empty body is {}), or a 400.
std::variant<json, ApiError> parse_body(const std::string& body, std::string_view route,
                                        std::initializer_list<const char*> fields) {
  json doc = body.empty() ? json::object() : json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded() || !doc.is_object())
    return api_error(400, std::string(route) + ": the body must be a JSON object", "invalid_json");
  for (const auto& [k, v] : doc.items()) {
    bool known = false;
    for (const char* f : fields) known = known || k == f;
    if (!known) {
      std::string list;
      for (const char* f : fields) list += std::string(list.empty() ? "" : ", ") + f;
      return api_error(400, "unknown field '" + k + "' for " + std::string(route) + "; remove it (known: " + list + ")",
                       "unknown_field", k);
    }
  }
  return doc;
}

// Standard base64 (RFC 4648, with or without '=' padding); false on any other character.
bool decode_base64(std::string_view in, std::vector<uint8_t>& out) {
  static const std::array<int8_t, 256> kTable = [] {
    std::array<int8_t, 256> t{};
    t.fill(-1);
    const char* chars = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    for (int i = 0; i < 64; ++i) t[static_cast<uint8_t>(chars[i])] = static_cast<int8_t>(i);
    return t;
  }();
  while (!in.empty() && in.back() == '=') in.remove_suffix(1);
  if (in.size() % 4 == 1) return false;
  out.clear();
  out.reserve(in.size() * 3 / 4);
  uint32_t acc = 0;
  int bits = 0;
  for (char c : in) {
    const int8_t v = kTable[static_cast<uint8_t>(c)];
    if (v < 0) return false;
    acc = (acc << 6) | static_cast<uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(static_cast<uint8_t>((acc >> bits) & 0xff));
    }
  }
  return true;
}

// "float32" | "float16" | "bfloat16" (PyTorch's names, "torch." optional) -> the weight type.
std::optional<WeightType> weight_type_named(std::string name) {
  if (name.rfind("torch.", 0) == 0) name = name.substr(6);
  if (name == "float32" || name == "float") return WeightType::kF32;
  if (name == "float16" || name == "half") return WeightType::kF16;
  if (name == "bfloat16") return WeightType::kBF16;
  return std::nullopt;
}

void write_deployment_fields(JsonWriter& w, const DeploymentInfo& d) {
  w.key("deployment_id").value(d.deployment_id).key("weights_id").value(d.weights_id);
  w.key("weights_version").value(d.weights_version);
}

}  // namespace

ControlService::ControlService(EngineLoop& loop, std::shared_ptr<const ModelFile> file, WeightsDigester digester,
                               std::function<void()> abort_all)
    : loop_(loop), abort_all_(std::move(abort_all)), file_(std::move(file)), digester_(std::move(digester)) {
  version_ = loop_.deployment()->weights_version;
}

const char* ControlService::method_of(std::string_view path) {
  for (const Route& r : kRoutes)
    if (path == r.path) return r.method;
  return nullptr;
}

void ControlService::handle(const HttpRequest& request, Reply reply) {
  const std::string& path = request.path;
  if (path == "/init_weight_transfer_engine") return init_transfer(request, reply);
  if (path == "/start_weight_update") return start_update(request, reply);
  if (path == "/update_weights") return update_chunk(request, reply);
  if (path == "/finish_weight_update") {
    auto body = parse_body(request.body, path, {});
    if (auto* e = std::get_if<ApiError>(&body)) return reply_error(reply, *e);
    return finish_update(reply);
  }
  if (path == "/update_weights_from_disk") return update_from_disk(request, reply);
  if (path == "/pause" || path == "/pause_generation") return pause(request, reply, path == "/pause_generation");
  if (path == "/resume" || path == "/continue_generation") {
    const bool was_paused = loop_.resume();
    JsonWriter w;
    w.begin_object().key("status").value("ok").key("was_paused").value(was_paused).end_object();
    return reply(200, w.take());
  }
  if (path == "/is_paused") {
    JsonWriter w;
    w.begin_object().key("is_paused").value(loop_.paused()).end_object();
    return reply(200, w.take());
  }
  if (path == "/sleep" || path == "/release_memory_occupation") {
    int level = 2;  // SGLang's release frees both
    if (path == "/sleep") {
      const std::string text = query_param(request.query, "level").value_or("1");
      if (text != "1" && text != "2")
        return reply_error(reply, api_error(400,
                                            "/sleep: 'level' must be 1 (free the KV cache) or 2 (free the KV cache "
                                            "and the weights), got '" +
                                                text + "'",
                                            "invalid_level", "level"));
      level = text == "1" ? 1 : 2;
    }
    return sleep(level, reply);
  }
  if (path == "/wake_up" || path == "/resume_memory_occupation") return wake_up(reply);
  if (path == "/is_sleeping") {
    JsonWriter w;
    w.begin_object().key("is_sleeping").value(loop_.sleep_level() != 0);
    w.key("level").value(static_cast<int64_t>(loop_.sleep_level())).end_object();
    return reply(200, w.take());
  }
  if (path == "/deployment") return reply(200, deployment_json());
  reply_error(reply, api_error(404, "unknown path " + path, "unknown_url"));
}

std::string ControlService::deployment_json() const {
  const std::shared_ptr<const DeploymentInfo> d = loop_.deployment();
  JsonWriter w;
  w.begin_object();
  write_deployment_fields(w, *d);
  w.key("model").value(d->model).key("weights_dtype").value(d->weights_dtype);
  w.key("kv_cache_dtype").value(d->kv_cache_dtype).key("kernel_plan").value(d->kernel_plan);
  w.key("device").value(d->device).key("vosti_version").value(d->vosti_version);
  w.key("logprobs_mode").value(d->logprobs_mode);
  w.key("sleep_level").value(static_cast<int64_t>(loop_.sleep_level())).key("paused").value(loop_.paused());
  w.end_object();
  return w.take();
}

void ControlService::init_transfer(const HttpRequest& request, const Reply& reply) {
  auto body = parse_body(request.body, request.path, {"init_info"});
  if (auto* e = std::get_if<ApiError>(&body)) return reply_error(reply, *e);
  const json& doc = std::get<json>(body);
  std::string backend = "http";
  if (auto it = doc.find("init_info"); it != doc.end() && !it->is_null()) {
    if (!it->is_object()) return reply_error(reply, api_error(400, "'init_info' must be an object", "invalid_field"));
    for (const auto& [k, v] : it->items()) {
      if (k != "backend")
        return reply_error(
            reply, api_error(400, "'init_info." + k + "' is not supported by the 'http' transport (known: backend)",
                             "unknown_field", "init_info." + k));
      if (!v.is_string())
        return reply_error(reply, api_error(400, "'init_info.backend' must be a string", "invalid_field"));
      backend = v.get<std::string>();
    }
  }
  if (backend == "ipc" || backend == "cuda_ipc") {
    return reply_error(reply,
                       api_error(501,
                                 "the CUDA IPC weight transfer (backend '" + backend +
                                     "') is not implemented in vosti serve yet (device " + loop_.config().device +
                                     "); use backend 'http' (tensor bytes in /update_weights as base64) or "
                                     "/update_weights_from_disk",
                                 "not_implemented", "init_info.backend"));
  }
  if (backend == "nccl") {
    return reply_error(reply, api_error(501,
                                        "the NCCL weight transfer comes with tensor parallelism and is not "
                                        "implemented; use backend 'http' or /update_weights_from_disk",
                                        "not_implemented", "init_info.backend"));
  }
  if (backend != "http") {
    return reply_error(reply, api_error(400, "unknown weight transfer backend '" + backend + "' (known: http)",
                                        "invalid_field", "init_info.backend"));
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    backend_ = backend;
  }
  JsonWriter w;
  w.begin_object().key("status").value("ok").key("backend").value(backend).end_object();
  reply(200, w.take());
}

void ControlService::start_update(const HttpRequest& request, const Reply& reply) {
  auto body = parse_body(request.body, request.path, {"is_checkpoint_format"});
  if (auto* e = std::get_if<ApiError>(&body)) return reply_error(reply, *e);
  const json& doc = std::get<json>(body);
  if (auto it = doc.find("is_checkpoint_format"); it != doc.end() && !it->is_null()) {
    if (!it->is_boolean() || !it->get<bool>())
      return reply_error(reply, api_error(400,
                                          "'is_checkpoint_format' must be true: Vosti takes checkpoint (Hugging "
                                          "Face) names and layouts only",
                                          "invalid_field", "is_checkpoint_format"));
  }
  if (const int level = loop_.sleep_level(); level != 0)
    return reply_error(reply, api_error(409,
                                        "/start_weight_update: the engine is asleep (level " + std::to_string(level) +
                                            "); POST /wake_up first",
                                        "engine_asleep"));
  std::lock_guard<std::mutex> lock(mu_);
  if (backend_.empty())
    return reply_error(reply, api_error(409, "/start_weight_update before /init_weight_transfer_engine: init first",
                                        "transfer_not_initialized"));
  // A start while an update is open discards the tensors staged so far (a trainer that restarted).
  staged_ = file_;
  num_staged_ = 0;
  reply(200, R"({"status":"ok"})");
}

void ControlService::update_chunk(const HttpRequest& request, const Reply& reply) {
  auto body = parse_body(request.body, request.path, {"update_info"});
  if (auto* e = std::get_if<ApiError>(&body)) return reply_error(reply, *e);
  const json& doc = std::get<json>(body);
  auto info = doc.find("update_info");
  if (info == doc.end() || !info->is_object())
    return reply_error(reply, api_error(400, "'update_info' (an object) is required", "invalid_field", "update_info"));
  for (const auto& [k, v] : info->items()) {
    if (k == "ipc_handles" || k == "ipc_handles_pickled")
      return reply_error(reply, api_error(501,
                                          "'update_info." + k +
                                              "': the CUDA IPC weight transfer is not implemented in vosti serve; "
                                              "send the bytes as 'data_base64'",
                                          "not_implemented", "update_info." + k));
    if (k != "names" && k != "dtype_names" && k != "shapes" && k != "data_base64")
      return reply_error(
          reply,
          api_error(400, "unknown field 'update_info." + k + "' (known: names, dtype_names, shapes, data_base64)",
                    "unknown_field", "update_info." + k));
  }
  const auto array_field = [&](const char* name) -> const json* {
    auto it = info->find(name);
    return it != info->end() && it->is_array() ? &*it : nullptr;
  };
  const json* names = array_field("names");
  const json* dtypes = array_field("dtype_names");
  const json* shapes = array_field("shapes");
  const json* data = array_field("data_base64");
  if (!names || !dtypes || !shapes || !data || dtypes->size() != names->size() || shapes->size() != names->size() ||
      data->size() != names->size()) {
    return reply_error(reply, api_error(400,
                                        "'update_info' needs 'names', 'dtype_names', 'shapes' and 'data_base64': "
                                        "arrays of one entry per tensor, of equal length",
                                        "invalid_field", "update_info"));
  }
  std::vector<ReplacementTensor> tensors;
  for (size_t i = 0; i < names->size(); ++i) {
    const json& n = (*names)[i];
    if (!n.is_string())
      return reply_error(reply, api_error(400, "'update_info.names' must hold strings", "invalid_field"));
    const std::string name = n.get<std::string>();
    const json& dt = (*dtypes)[i];
    std::optional<WeightType> type = dt.is_string() ? weight_type_named(dt.get<std::string>()) : std::nullopt;
    if (!type)
      return reply_error(reply, api_error(400,
                                          "tensor '" + name + "': dtype " + dt.dump() +
                                              " is not supported (float32, float16 or bfloat16)",
                                          "invalid_dtype", "update_info.dtype_names"));
    ReplacementTensor t;
    t.name = name;
    t.type = *type;
    const json& shape = (*shapes)[i];
    bool shape_ok = shape.is_array();
    for (const json& d : shape) shape_ok = shape_ok && d.is_number_integer() && d.get<int64_t>() >= 0;
    if (!shape_ok)
      return reply_error(reply, api_error(400, "tensor '" + name + "': the shape must be an array of integers >= 0",
                                          "invalid_shape", "update_info.shapes"));
    for (const json& d : shape) t.shape.push_back(d.get<int64_t>());
    auto bytes = std::make_shared<std::vector<uint8_t>>();
    if (!(*data)[i].is_string() || !decode_base64((*data)[i].get<std::string>(), *bytes))
      return reply_error(reply, api_error(400, "tensor '" + name + "': 'data_base64' is not valid base64",
                                          "invalid_data", "update_info.data_base64"));
    t.data = bytes->data();
    t.num_bytes = bytes->size();
    t.owner = bytes;
    tensors.push_back(std::move(t));
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (!staged_)
    return reply_error(reply, api_error(409, "/update_weights without /start_weight_update: start an update first",
                                        "weight_update_not_started"));
  // Validates every tensor against the model (name, shape, dtype, bytes); the chunk applies whole or not at all.
  Result<std::shared_ptr<const ModelFile>> next = ModelFile::with_replaced(staged_, tensors);
  if (!next.ok()) return reply_error(reply, status_error(next.status(), "/update_weights refused the chunk"));
  staged_ = std::move(next).value();
  num_staged_ += static_cast<int64_t>(tensors.size());
  JsonWriter w;
  w.begin_object().key("status").value("ok").key("num_tensors").value(static_cast<int64_t>(tensors.size()));
  w.key("num_staged").value(num_staged_).end_object();
  reply(200, w.take());
}

void ControlService::finish_update(const Reply& reply) {
  std::shared_ptr<const ModelFile> staged;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!staged_)
      return reply_error(reply, api_error(409, "/finish_weight_update without /start_weight_update: nothing to finish",
                                          "weight_update_not_started"));
    staged = std::exchange(staged_, nullptr);
  }
  apply(std::move(staged), /*sglang_reply=*/false, reply);
}

void ControlService::update_from_disk(const HttpRequest& request, const Reply& reply) {
  auto body = parse_body(request.body, request.path,
                         {"model_path", "abort_all_requests", "flush_cache", "load_format", "weight_version"});
  if (auto* e = std::get_if<ApiError>(&body)) return reply_error(reply, *e);
  const json& doc = std::get<json>(body);
  auto path = doc.find("model_path");
  if (path == doc.end() || !path->is_string() || path->get<std::string>().empty())
    return reply_error(reply,
                       api_error(400, "'model_path' (a safetensors file or directory, or a GGUF file) is required",
                                 "invalid_field", "model_path"));
  bool abort_requests = false;
  if (auto it = doc.find("abort_all_requests"); it != doc.end() && !it->is_null()) {
    if (!it->is_boolean())
      return reply_error(reply, api_error(400, "'abort_all_requests' must be a boolean", "invalid_field"));
    abort_requests = it->get<bool>();
  }
  if (auto it = doc.find("flush_cache"); it != doc.end() && !it->is_null() && !(it->is_boolean() && it->get<bool>()))
    return reply_error(reply,
                       api_error(400, "'flush_cache' must be true: the prefix cache always goes with the old weights",
                                 "invalid_field", "flush_cache"));
  if (auto it = doc.find("load_format"); it != doc.end() && !it->is_null() && *it != "auto")
    return reply_error(reply, api_error(400, "'load_format' must be \"auto\" (the format is read from the path)",
                                        "invalid_field", "load_format"));
  if (auto it = doc.find("weight_version"); it != doc.end() && !it->is_null())
    return reply_error(reply, api_error(400,
                                        "'weight_version' cannot be set: Vosti numbers the versions itself (+1 per "
                                        "update) and names the weights by their digest",
                                        "invalid_field", "weight_version"));
  std::shared_ptr<const ModelFile> base;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (staged_)
      return reply_error(reply, api_error(409,
                                          "a staged weight update is open (/start_weight_update): finish it before "
                                          "/update_weights_from_disk",
                                          "weight_update_in_progress"));
    base = file_;
  }
  const std::string model_path = path->get<std::string>();
  Result<std::shared_ptr<const ModelFile>> next = internal_error("not read");
  if (is_safetensors_path(model_path)) {
    // Tensors by name over the weights served (mapped, not copied): a checkpoint may hold some.
    Result<std::vector<ReplacementTensor>> tensors = tensors_from_path(model_path);
    if (!tensors.ok()) return reply_error(reply, status_error(tensors.status(), "cannot read '" + model_path + "'"));
    next = ModelFile::with_replaced(base, *tensors);
  } else {
    // A whole model file (a GGUF): served as it is stored (quantised stays quantised), not as f32
    // copies; Engine::replace_model checks that its architecture is the one served.
    next = ModelFile::open(model_path);
  }
  if (!next.ok()) return reply_error(reply, status_error(next.status(), "the weights at '" + model_path + "'"));
  if (abort_requests) abort_all_();
  apply(std::move(next).value(), /*sglang_reply=*/true, reply);
}

void ControlService::apply(std::shared_ptr<const ModelFile> file, bool sglang_reply, Reply reply) {
  loop_.run_when_idle([this, file = std::move(file), sglang_reply, reply = std::move(reply)](Engine& engine) {
    Result<LogitsDigest> digest = digester_.digest(*file);
    if (!digest.ok()) return reply_error(reply, status_error(digest.status(), "cannot digest the new weights"));
    const std::string device = engine.config().device;
    const Status swapped = engine.replace_model([&] { return load_device_model(file, device); }, (*digest)[0]);
    if (!swapped.ok()) return reply_error(reply, status_error(swapped, "the weights were not updated"));
    int64_t version = 0;
    {
      std::lock_guard<std::mutex> lock(mu_);
      file_ = file;
      version = ++version_;
    }
    auto d = std::make_shared<DeploymentInfo>(describe_deployment(*digest, version, loop_.model_path(), file->config(),
                                                                  engine.config(), engine.runner_info()));
    loop_.set_deployment(d);
    loop_.refresh_stats();
    JsonWriter w;
    w.begin_object().key("status").value("ok");
    if (sglang_reply) w.key("success").value(true).key("message").value("the weights were updated");
    write_deployment_fields(w, *d);
    w.end_object();
    reply(200, w.take());
  });
}

void ControlService::pause(const HttpRequest& request, const Reply& reply, bool sglang) {
  auto body = parse_body(request.body, request.path, {"mode"});
  if (auto* e = std::get_if<ApiError>(&body)) return reply_error(reply, *e);
  const json& doc = std::get<json>(body);
  std::string mode = query_param(request.query, "mode").value_or("abort");
  if (auto it = doc.find("mode"); it != doc.end() && !it->is_null()) {
    if (!it->is_string()) return reply_error(reply, api_error(400, "'mode' must be a string", "invalid_field", "mode"));
    mode = it->get<std::string>();
  }
  PauseMode m;
  if (mode == "abort") {
    m = PauseMode::kAbort;
  } else if (!sglang && mode == "wait") {
    m = PauseMode::kWait;
  } else if (sglang ? mode == "in_place" || mode == "retract" : mode == "keep") {
    // SGLang's retract frees the KV and recomputes it on resume; the outputs are the same bits
    // as keeping it (KV is a function of the prefix), so Vosti keeps it.
    m = PauseMode::kKeep;
  } else {
    return reply_error(reply, api_error(400,
                                        "unknown pause mode '" + mode + "' (" +
                                            (sglang ? "abort, in_place, retract" : "abort, wait, keep") + ")",
                                        "invalid_field", "mode"));
  }
  if (m == PauseMode::kAbort) abort_all_();
  loop_.pause(m, [reply, mode] {
    JsonWriter w;
    w.begin_object().key("status").value("paused").key("mode").value(mode).end_object();
    reply(200, w.take());
  });
}

void ControlService::sleep(int level, const Reply& reply) {
  loop_.run_when_idle([this, reply, level](Engine& engine) {
    const Status s = engine.sleep(level);
    if (!s.ok()) return reply_error(reply, status_error(s, "/sleep"));
    loop_.refresh_stats();
    const RunnerInfo& info = engine.runner_info();
    JsonWriter w;
    w.begin_object().key("status").value("ok").key("level").value(static_cast<int64_t>(level));
    w.key("kv_cache_bytes").value(info.kv_cache_bytes).key("weight_bytes").value(info.weight_bytes).end_object();
    reply(200, w.take());
  });
}

void ControlService::wake_up(const Reply& reply) {
  loop_.run_when_idle([this, reply](Engine& engine) {
    const bool was_asleep = engine.sleep_level() != 0;
    if (was_asleep) {
      std::shared_ptr<const ModelFile> file;
      {
        std::lock_guard<std::mutex> lock(mu_);
        file = file_;
      }
      const std::string device = engine.config().device;
      const Status s = engine.wake_up([&] { return load_device_model(file, device); });
      if (!s.ok()) return reply_error(reply, status_error(s, "/wake_up"));
      loop_.refresh_stats();
    }
    const RunnerInfo& info = engine.runner_info();
    JsonWriter w;
    w.begin_object().key("status").value("ok").key("was_asleep").value(was_asleep);
    w.key("kv_cache_bytes").value(info.kv_cache_bytes).key("weight_bytes").value(info.weight_bytes).end_object();
    reply(200, w.take());
  });
}

}  // namespace vosti
