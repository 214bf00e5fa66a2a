// load_device_model: a model file loaded for one device: "cpu" (the f32 Model behind
// CpuDeviceModel) or "cuda" (CudaDeviceModel: bf16 weights straight to the GPU), the one place
// that turns EngineConfig::device into weights. The tools, the harness and the server call it.
// Thread safety: none needed (a pure loader).
#pragma once

#include <memory>
#include <string>

#include "core/status.h"
#include "model/model.h"
#include "model/model_file.h"
#include "runner/device_model.h"

namespace vosti {

// Errors: kInvalidArgument for an unknown device, kFailedPrecondition for "cuda" in a build
// without CUDA or on a machine without a GPU (named), and the loaders' errors.
Result<std::shared_ptr<const DeviceModel>> load_device_model(const std::string& path, const std::string& device);
// The same for a model file already opened (e.g. one whose tensors a weight update replaced).
Result<std::shared_ptr<const DeviceModel>> load_device_model(const std::shared_ptr<const ModelFile>& file,
                                                             const std::string& device);

// A model already loaded on the host, served by the cpu device.
std::shared_ptr<const DeviceModel> cpu_device_model(std::shared_ptr<const Model> model);

// Whether this build has the CUDA runner.
bool built_with_cuda();

}  // namespace vosti
