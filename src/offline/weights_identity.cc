#include "offline/weights_identity.h"

#include <xxhash.h>

#include <cstdio>
#include <vector>

namespace vosti {

namespace {

// Streams the tensor's f32 values (HF row order) into `state`: straight from the file where it
// stores them as f32 in that order, through read_f32 otherwise.
Status hash_values(const ModelFile& file, const TensorSlot& slot, XXH3_state_t* state) {
  VOSTI_ASSIGN_OR_RETURN(WeightView w, file.view(slot.role, slot.layer));
  if (w.type == WeightType::kF32 && !file.needs_row_unpermute(slot.role)) {
    XXH3_128bits_update(state, w.data, w.num_bytes);
    return Status();
  }
  VOSTI_ASSIGN_OR_RETURN(std::vector<float> values, file.read_f32(slot.role, slot.layer));
  XXH3_128bits_update(state, values.data(), values.size() * sizeof(float));
  return Status();
}

}  // namespace

Result<LogitsDigest> weights_digest(const ModelFile& file) {
  XXH3_state_t* state = XXH3_createState();
  VOSTI_CHECK(state != nullptr, "XXH3_createState failed");
  XXH3_128bits_reset(state);
  Status status;
  for (const TensorSlot& slot : file.tensor_slots()) {
    const int64_t header[2] = {static_cast<int64_t>(slot.role), slot.layer};
    XXH3_128bits_update(state, header, sizeof(header));
    const std::vector<int64_t> shape = file.expected_shape(slot.role);
    XXH3_128bits_update(state, shape.data(), shape.size() * sizeof(int64_t));
    status = hash_values(file, slot, state);
    if (!status.ok()) break;
  }
  const XXH128_hash_t h = XXH3_128bits_digest(state);
  XXH3_freeState(state);
  if (!status.ok()) return status;
  return LogitsDigest{h.low64, h.high64};
}

std::string digest_hex(const LogitsDigest& digest) {
  char buf[33];
  std::snprintf(buf, sizeof(buf), "%016llx%016llx", static_cast<unsigned long long>(digest[1]),
                static_cast<unsigned long long>(digest[0]));
  return buf;
}

std::string deployment_digest_hex(const LogitsDigest& weights, const ModelConfig& model, const EngineConfig& config,
                                  const RunnerInfo& runner) {
  char numbers[160];
  std::snprintf(numbers, sizeof(numbers), ";rms_norm_eps=%.17g;rope_theta=%.17g;rope_factor=%.17g", model.rms_norm_eps,
                model.rope_theta, model.rope_scaling.factor);
  const std::string text =
      "weights=" + digest_hex(weights) + ";arch=" + std::string(architecture_name(model.arch)) + numbers +
      ";device=" + config.device + ";backend=" + (config.device == "cpu" ? config.backend : std::string("cuda")) +
      ";kv_cache_dtype=" + runner.kv_cache_dtype + ";block_size=" + std::to_string(config.block_size) +
      ";max_model_len=" + std::to_string(config.max_model_len);
  const XXH128_hash_t h = XXH3_128bits(text.data(), text.size());
  return digest_hex(LogitsDigest{h.low64, h.high64});
}

}  // namespace vosti
