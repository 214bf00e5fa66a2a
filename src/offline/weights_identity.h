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

// XXH128's canonical hex of a 128-bit digest {low64, high64}: 32 lower-case digits, high 64
// bits first (Python's xxhash.xxh3_128_hexdigest).
std::string digest_hex(const LogitsDigest& digest);

// The identity of a deployment: XXH3-128 of its description (the weights digest, the model's
// architecture, the device, the host kernel backend, the KV dtype, the block size, the maximum
// context length), as digest_hex text.
std::string deployment_digest_hex(const LogitsDigest& weights, const ModelConfig& model, const EngineConfig& config,
                                  const RunnerInfo& runner);

}  // namespace vosti
