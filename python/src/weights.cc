// Engine.update_weights_* / get_weights / tensor_names: weights in and out of a running engine.
// In: safetensors files (mapped, no copy), a model file Vosti reads (GGUF), or in-memory
// arrays through DLPack / the buffer protocol (NumPy, PyTorch CPU tensors), read straight from
// their memory and copied once into the engine's own buffers, so that a trainer may keep
// changing its tensors. Out: f32 NumPy arrays in Hugging Face names and layout.
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "offline/weight_sources.h"
#include "python/src/binding_util.h"

namespace nb = nanobind;

namespace vosti::python {

namespace {

using CpuArray = nb::ndarray<nb::ro, nb::c_contig, nb::device::cpu>;

Status update_from_tensors(OfflineEngine& engine, const std::vector<ReplacementTensor>& tensors) {
  VOSTI_ASSIGN_OR_RETURN(std::shared_ptr<const ModelFile> file, ModelFile::with_replaced(engine.model_file(), tensors));
  return engine.update_weights(std::move(file));
}

Result<WeightType> weight_type(const CpuArray& a, const std::string& name) {
  const nb::dlpack::dtype t = a.dtype();
  if (t.lanes == 1 && t.code == static_cast<uint8_t>(nb::dlpack::dtype_code::Float) && t.bits == 32)
    return WeightType::kF32;
  if (t.lanes == 1 && t.code == static_cast<uint8_t>(nb::dlpack::dtype_code::Float) && t.bits == 16)
    return WeightType::kF16;
  if (t.lanes == 1 && t.code == static_cast<uint8_t>(nb::dlpack::dtype_code::Bfloat) && t.bits == 16)
    return WeightType::kBF16;
  return invalid_argument("tensor '" + name + "': weights must be float32, float16 or bfloat16 arrays");
}

void update_from_path(OfflineEngine& engine, const std::string& path) {
  Status status;
  {
    nb::gil_scoped_release release;
    Result<std::vector<ReplacementTensor>> tensors = tensors_from_path(path);
    status = tensors.ok() ? update_from_tensors(engine, *tensors) : tensors.status();
  }
  if (!status.ok()) throw_status(status, /*loading=*/status.code() == StatusCode::kNotFound);
}

void update_from_arrays(OfflineEngine& engine, const std::vector<std::pair<std::string, CpuArray>>& arrays) {
  std::vector<ReplacementTensor> tensors;
  tensors.reserve(arrays.size());
  for (const auto& [name, a] : arrays) {
    Result<WeightType> type = weight_type(a, name);
    if (!type.ok()) throw_status(type.status());
    ReplacementTensor t;
    t.name = name;
    t.type = *type;
    for (size_t d = 0; d < a.ndim(); ++d) t.shape.push_back(static_cast<int64_t>(a.shape(d)));
    t.data = static_cast<const uint8_t*>(a.data());
    t.num_bytes = a.nbytes();
    tensors.push_back(std::move(t));  // no owner: with_replaced copies the values
  }
  Status status;
  {
    nb::gil_scoped_release release;  // `arrays` keeps every buffer alive meanwhile
    status = update_from_tensors(engine, tensors);
  }
  if (!status.ok()) throw_status(status);
}

nb::list get_weights(const OfflineEngine& engine, const std::optional<std::vector<std::string>>& names) {
  const std::shared_ptr<const ModelFile> file = engine.model_file();
  std::vector<TensorSlot> slots;
  if (names) {
    for (const std::string& n : *names) {
      Result<TensorSlot> s = file->find_tensor(n);
      if (!s.ok()) throw_status(s.status());
      slots.push_back(*s);
    }
  } else {
    slots = file->tensor_slots();
  }
  nb::list out;
  for (const TensorSlot& s : slots) {
    Result<std::vector<float>> values = std::vector<float>();
    {
      nb::gil_scoped_release release;
      values = file->read_hf_f32(s.role, s.layer, s.expert);
    }
    if (!values.ok()) throw_status(values.status());
    auto* owned = new std::vector<float>(std::move(values).value());
    nb::capsule owner(owned, [](void* p) noexcept { delete static_cast<std::vector<float>*>(p); });
    const std::vector<int64_t> shape64 = file->expected_shape(s.role);
    std::vector<size_t> shape(shape64.begin(), shape64.end());
    nb::ndarray<nb::numpy, float> array(owned->data(), shape.size(), shape.data(), owner);
    out.append(nb::make_tuple(hf_tensor_name(file->config().arch, s.role, s.layer, s.expert), array));
  }
  return out;
}

std::vector<std::string> tensor_names(const OfflineEngine& engine) {
  std::vector<std::string> out;
  const auto& file = engine.model_file();
  for (const TensorSlot& s : file->tensor_slots())
    out.push_back(hf_tensor_name(file->config().arch, s.role, s.layer, s.expert));
  return out;
}

}  // namespace

void bind_weights(nb::class_<OfflineEngine>& engine) {
  engine.def("update_weights_from_path", &update_from_path, nb::arg("path"))
      .def("update_weights_from_arrays", &update_from_arrays, nb::arg("arrays"))
      .def("get_weights", &get_weights, nb::arg("names").none() = nb::none())
      .def("tensor_names", &tensor_names);
}

}  // namespace vosti::python
