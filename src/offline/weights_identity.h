// Weights identity: the 128-bit fingerprint by which a response says which weights produced
// it, and the deployment identity built on it (DESIGN.md section 1: a deployment fixes the
// weights, the device and its numeric policy, the block size, ...).
//
// weights_digest is XXH3-128 over every tensor of the model in ModelFile::tensor_slots() order:
// its role, layer and shape, then the XXH3-128 of its values as f32 in HF row order
// (ModelFile::read_f32), so it names the values and not their encoding: the same values given
// as f32 arrays, or read back from the model and given again, have the same digest as the file
// they came from, and a weight update that changes any value changes it.
// Thread safety: the free functions are pure; a WeightsDigester has one caller at a time.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "core/engine_config.h"
#include "core/status.h"
#include "model/model_file.h"
#include "runner/model_runner.h"
#include "sample/logits_digest.h"

namespace vosti {

// REQUIRES: every tensor of `file` readable. Errors: the file's (ModelFile::read_f32).
Result<LogitsDigest> weights_digest(const ModelFile& file);

// weights_digest that remembers each tensor's digest by the memory holding the tensor (its
// data pointer, while a weak reference to its owner says that memory is still the same), so
// that after a weight update only the replaced tensors are read and hashed again.
class WeightsDigester {
 public:
  Result<LogitsDigest> digest(const ModelFile& file);

 private:
  struct Entry {
    const uint8_t* data = nullptr;
    std::weak_ptr<const void> owner;
    LogitsDigest digest{};
  };
  std::map<std::string, Entry, std::less<>> by_name_;  // by the file's tensor name
};

// The identity of a deployment: XXH3-128 of its description (the weights digest, the model's
// architecture, the device (on cuda also the card the runner names), the kernel plan, the KV dtype,
// the block size, the maximum context length, the Vosti version), as digest_hex text. The weights
// enter by their digest, not by the update count: the same values give the same id.
std::string deployment_digest_hex(const LogitsDigest& weights, const ModelConfig& model, const EngineConfig& config,
                                  const RunnerInfo& runner);

// The kernel plan a deployment runs: the host backend on cpu ("cpu backend=cpu"), the attention
// split on cuda ("cuda attention_split=0"): the fields beyond the device that set reduction orders.
std::string kernel_plan(const EngineConfig& config);

// This build's version (CMake's PROJECT_VERSION).
const char* vosti_version();

// What a response names as the deployment it ran on (the server's "vosti" object, the Python
// outputs' deployment_id): the id and what it was made from, plus the update count.
struct DeploymentInfo {
  std::string deployment_id;    // deployment_digest_hex
  std::string weights_id;       // digest_hex of the weights digest
  int64_t weights_version = 0;  // 0 at start, +1 per weight update
  std::string model;            // the model path
  std::string weights_dtype;    // "f32" (cpu) or "bf16" (cuda)
  std::string kv_cache_dtype;
  std::string kernel_plan;
  std::string device;  // RunnerInfo::device
  std::string vosti_version;
  std::string logprobs_mode;  // EngineConfig::logprobs_mode: what reported logprobs are
};

DeploymentInfo describe_deployment(const LogitsDigest& weights, int64_t weights_version, const std::string& model_path,
                                   const ModelConfig& model, const EngineConfig& config, const RunnerInfo& runner);

}  // namespace vosti
