// Planted violations of the determinism rules, for the tests that show the harness and the
// invariance checks catch them (test-only: never linked into the product, whose configuration
// holds no such switch). Each is the product's own component with one rule broken on purpose.
// Thread safety: as the components they wrap.
#pragma once

#include <memory>

#include "kernels/kernel_backend.h"
#include "model/model.h"
#include "runner/device_model.h"

namespace vosti {

class ThreadPool;

// The CPU backend (kernels/cpu) whose matmul splits its k reduction in two when a call has more
// than one row (tests/support/planted_matmul.h): a row's bits depend on the row count.
std::unique_ptr<KernelBackend> make_planted_cpu_backend(ThreadPool* pool);

// A cpu device whose runners compute with make_planted_cpu_backend.
std::shared_ptr<const DeviceModel> planted_cpu_device_model(std::shared_ptr<const Model> model);

// A cuda device (`model` loaded with load_device_model(..., "cuda")) whose runners plan the
// attention with twice the deployment's split whenever a step holds several sequences (rule 1:
// the split follows the batch). Null where the build has no CUDA runner or `model` is not cuda.
std::shared_ptr<const DeviceModel> planted_cuda_device_model(std::shared_ptr<const DeviceModel> model);

}  // namespace vosti
