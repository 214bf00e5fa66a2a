// DeviceModel: one model's weights loaded on one device, shared by every engine (and so
// every runner) made from it: the CPU's f32 Model (runner/cpu/cpu_runner.h) or the GPU's bf16
// CudaModel (runner/cuda/cuda_runner.h). load_device_model() (runner/load_device_model.h)
// picks one from EngineConfig::device.
// Thread safety: immutable after loading; make_runner() may be called from any thread.
#pragma once

#include <memory>
#include <string>

#include "core/engine_config.h"
#include "core/status.h"
#include "model/model_config.h"
#include "runner/model_runner.h"

namespace vosti {

class DeviceModel {
 public:
  virtual ~DeviceModel() = default;

  virtual const ModelConfig& config() const = 0;
  // The file or directory the weights came from (part of the deployment's identity).
  virtual const std::string& path() const = 0;
  // "cpu" or "cuda": the EngineConfig::device this model serves.
  virtual std::string device() const = 0;

  // A runner with its own KV memory and buffers for `config` (block size, sequence and token
  // limits, KV size or memory fraction, backend). The runner's info() reports the limits it
  // derived (num_blocks, max_model_len).
  // Errors: kInvalidArgument for a config the device cannot serve (named); kResourceExhausted
  // when its memory does not fit; kInternal for device failures.
  virtual Result<std::unique_ptr<ModelRunner>> make_runner(const EngineConfig& config) const = 0;
};

}  // namespace vosti
