#include "runner/load_device_model.h"

#include "model/model.h"
#include "runner/cpu/cpu_runner.h"
#if VOSTI_HAVE_CUDA
#include "runner/cuda/cuda_runner.h"
#endif

namespace vosti {

bool built_with_cuda() { return VOSTI_HAVE_CUDA != 0; }

std::shared_ptr<const DeviceModel> cpu_device_model(std::shared_ptr<const Model> model) {
  return std::make_shared<const CpuDeviceModel>(std::move(model));
}

Result<std::shared_ptr<const DeviceModel>> load_device_model(const std::string& path, const std::string& device) {
  if (device == "cpu") {
    VOSTI_ASSIGN_OR_RETURN(std::shared_ptr<const Model> model, Model::load(path));
    return cpu_device_model(std::move(model));
  }
  if (device == "cuda") {
#if VOSTI_HAVE_CUDA
    VOSTI_ASSIGN_OR_RETURN(std::shared_ptr<const CudaDeviceModel> model, CudaDeviceModel::load(path));
    return std::shared_ptr<const DeviceModel>(std::move(model));
#else
    return failed_precondition("this build of vosti has no CUDA runner (nvcc was not found when it was built)");
#endif
  }
  return invalid_argument("unknown device \"" + device + "\" (choose cpu or cuda)");
}

Result<std::shared_ptr<const DeviceModel>> load_device_model(const std::shared_ptr<const ModelFile>& file,
                                                             const std::string& device) {
  if (!file) return invalid_argument("load_device_model needs a model file");
  if (device == "cpu") {
    VOSTI_ASSIGN_OR_RETURN(std::shared_ptr<const Model> model, Model::load(*file));
    return cpu_device_model(std::move(model));
  }
  if (device == "cuda") {
#if VOSTI_HAVE_CUDA
    VOSTI_ASSIGN_OR_RETURN(std::shared_ptr<const CudaModel> model, CudaModel::load(*file));
    return std::shared_ptr<const DeviceModel>(std::make_shared<const CudaDeviceModel>(std::move(model)));
#else
    return failed_precondition("this build of vosti has no CUDA runner (nvcc was not found when it was built)");
#endif
  }
  return invalid_argument("unknown device \"" + device + "\" (choose cpu or cuda)");
}

}  // namespace vosti
