#include "offline/weights_identity.h"

#include <xxhash.h>

#include <cstdio>
#include <vector>

namespace vosti {

namespace {

// XXH3-128 of the tensor's f32 values (HF row order): straight from the file where it stores
// them as f32 in that order, through read_f32 otherwise.
Result<LogitsDigest> tensor_digest(const ModelFile& file, const TensorSlot& slot, const WeightView& w) {
  if (w.type == WeightType::kF32 && !file.needs_conversion(slot.role)) {
    const XXH128_hash_t h = XXH3_128bits(w.data, w.num_bytes);
    return LogitsDigest{h.low64, h.high64};
  }
  VOSTI_ASSIGN_OR_RETURN(std::vector<float> values, file.read_f32(slot.role, slot.layer, slot.expert));
  const XXH128_hash_t h = XXH3_128bits(values.data(), values.size() * sizeof(float));
  return LogitsDigest{h.low64, h.high64};
}

// The whole model's digest from its tensors', `tensor` giving each one's.
template <typename TensorDigest>
Result<LogitsDigest> combine(const ModelFile& file, TensorDigest tensor) {
  std::vector<int64_t> stream;  // [role, layer, shape..., digest low, digest high] per tensor
  for (const TensorSlot& slot : file.tensor_slots()) {
    VOSTI_ASSIGN_OR_RETURN(WeightView w, file.view(slot.role, slot.layer, slot.expert));
    VOSTI_ASSIGN_OR_RETURN(LogitsDigest d, tensor(slot, w));
    stream.push_back(static_cast<int64_t>(slot.role));
    stream.push_back(slot.layer);
    if (slot.expert >= 0) stream.push_back(slot.expert);  // dense models' streams as before
    for (int64_t dim : file.expected_shape(slot.role)) stream.push_back(dim);
    stream.push_back(static_cast<int64_t>(d[0]));
    stream.push_back(static_cast<int64_t>(d[1]));
  }
  const XXH128_hash_t h = XXH3_128bits(stream.data(), stream.size() * sizeof(int64_t));
  return LogitsDigest{h.low64, h.high64};
}

}  // namespace

Result<LogitsDigest> weights_digest(const ModelFile& file) {
  return combine(file, [&](const TensorSlot& slot, const WeightView& w) { return tensor_digest(file, slot, w); });
}

Result<LogitsDigest> WeightsDigester::digest(const ModelFile& file) {
  return combine(file, [&](const TensorSlot& slot, const WeightView& w) -> Result<LogitsDigest> {
    const std::string name = file.tensor_name(slot.role, slot.layer, slot.expert);
    auto it = by_name_.find(name);
    if (it != by_name_.end() && w.owner && it->second.data == w.data && !it->second.owner.expired() &&
        it->second.owner.lock() == w.owner)
      return it->second.digest;
    VOSTI_ASSIGN_OR_RETURN(LogitsDigest d, tensor_digest(file, slot, w));
    if (w.owner) by_name_[name] = Entry{w.data, w.owner, d};
    return d;
  });
}

std::string kernel_plan(const EngineConfig& config) {
  if (config.device == "cpu") return "cpu backend=" + config.backend;
  return config.device + " attention_split=" + std::to_string(config.attention_split);
}

const char* vosti_version() { return VOSTI_VERSION_STRING; }

std::string deployment_digest_hex(const LogitsDigest& weights, const ModelConfig& model, const EngineConfig& config,
                                  const RunnerInfo& runner) {
  char numbers[160];
  std::snprintf(numbers, sizeof(numbers), ";rms_norm_eps=%.17g;rope_theta=%.17g;rope_factor=%.17g", model.rms_norm_eps,
                model.rope_theta, model.rope_scaling.factor);
  // The CPU runner's device text names its thread count, which changes no bit: left out there.
  const std::string device = config.device == "cpu" ? config.device : config.device + " " + runner.device;
  const std::string text = "weights=" + digest_hex(weights) + ";arch=" + std::string(architecture_name(model.arch)) +
                           numbers + ";device=" + device + ";plan=" + kernel_plan(config) +
                           ";kv_cache_dtype=" + runner.kv_cache_dtype +
                           ";block_size=" + std::to_string(config.block_size) +
                           ";max_model_len=" + std::to_string(config.max_model_len) + ";vosti=" + vosti_version() +
                           // Added only where it is not the default, so default deployments keep their ids.
                           (config.logprobs_mode == "raw_logprobs" ? "" : ";logprobs_mode=" + config.logprobs_mode);
  const XXH128_hash_t h = XXH3_128bits(text.data(), text.size());
  return digest_hex(LogitsDigest{h.low64, h.high64});
}

DeploymentInfo describe_deployment(const LogitsDigest& weights, int64_t weights_version, const std::string& model_path,
                                   const ModelConfig& model, const EngineConfig& config, const RunnerInfo& runner) {
  DeploymentInfo d;
  d.deployment_id = deployment_digest_hex(weights, model, config, runner);
  d.weights_id = digest_hex(weights);
  d.weights_version = weights_version;
  d.model = model_path;
  d.weights_dtype = config.device == "cpu" ? "f32" : "bf16";
  d.kv_cache_dtype = runner.kv_cache_dtype;
  d.kernel_plan = kernel_plan(config);
  d.device = runner.device;
  d.vosti_version = vosti_version();
  d.logprobs_mode = config.logprobs_mode;
  return d;
}

}  // namespace vosti
