// CudaModel::Source: where an upload's weights come from (a ModelFile or a loaded Model), by
// role. Internal to src/model/cuda (cuda_model.cc, cuda_moe.cc).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "model/cuda/cuda_model.h"

namespace vosti {

// The weights of one model, by role, whatever holds them.
struct CudaModel::Source {
  ModelConfig config;
  std::string path;
  bool tied = false;  // lm_head is the embedding
  // (role, layer, expert: -1 but for the expert roles)
  std::function<Result<std::vector<uint16_t>>(WeightRole, int64_t, int64_t)> bf16;  // matrices, HF row order
  std::function<Result<std::vector<float>>(WeightRole, int64_t, int64_t)> f32;      // norms and biases
};

}  // namespace vosti
