// AttentionWorkBuffers: see attention_work.h.
#include "model/cuda/attention_work.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "kernels/cuda/cuda_status.h"

namespace vosti {

size_t AttentionWorkBuffers::folded_offset() const {
  return merges_offset() + static_cast<size_t>(row_capacity_) * sizeof(AttentionMerge);
}
size_t AttentionWorkBuffers::per_split_offset() const {
  return folded_offset() + static_cast<size_t>(row_capacity_) * sizeof(AttentionWork);
}

Result<AttentionWorkBuffers> AttentionWorkBuffers::allocate(int64_t row_capacity, int32_t partial_capacity,
                                                            int num_heads, int head_dim, int split, int window) {
  if (row_capacity <= 0 || partial_capacity < 0)
    return invalid_argument("attention work buffers: row capacity must be positive, partial capacity >= 0");
  AttentionWorkBuffers b;
  b.row_capacity_ = row_capacity;
  b.partial_capacity_ = partial_capacity;
  b.split_ = split;
  b.window_ = window;
  const size_t bytes =
      b.per_split_offset() + static_cast<size_t>(row_capacity + partial_capacity) * sizeof(AttentionWork);
  VOSTI_ASSIGN_OR_RETURN(b.host_, PinnedMemory::allocate(bytes, "the attention plan"));
  VOSTI_ASSIGN_OR_RETURN(b.device_, DeviceMemory::allocate(bytes, "the attention plan"));
  std::memset(b.host_.as<void>(), 0, bytes);
  VOSTI_CUDA_RETURN_IF_ERROR(cudaMemcpy(b.device_.as<void>(), b.host_.as<void>(), bytes, cudaMemcpyHostToDevice));
  if (partial_capacity > 0) {
    const size_t partial_bytes =
        static_cast<size_t>(partial_capacity) * static_cast<size_t>(attention_partial_floats(num_heads, head_dim)) * 4;
    VOSTI_ASSIGN_OR_RETURN(b.partials_, DeviceMemory::allocate(partial_bytes, "the attention split states"));
  }
  return b;
}

AttentionWorkView AttentionWorkBuffers::base_view() const {
  char* d = device_.as<char>();
  AttentionWorkView v;
  v.num_per_split = reinterpret_cast<const int32_t*>(d);
  v.num_merges = reinterpret_cast<const int32_t*>(d) + 1;
  v.merges = reinterpret_cast<const AttentionMerge*>(d + merges_offset());
  v.folded = reinterpret_cast<const AttentionWork*>(d + folded_offset());
  v.per_split = reinterpret_cast<const AttentionWork*>(d + per_split_offset());
  v.partials = partials_.empty() ? nullptr : partials_.as<float>();
  v.partial_capacity = partial_capacity_;
  v.split = split_;
  v.window = window_;
  return v;
}

Result<AttentionWorkView> AttentionWorkBuffers::upload(const AttentionPlan& plan, cudaStream_t stream) {
  const auto n_folded = static_cast<int64_t>(plan.folded.size());
  const auto n_per_split = static_cast<int64_t>(plan.per_split.size());
  const auto n_merges = static_cast<int64_t>(plan.merges.size());
  if (n_folded > row_capacity_ || n_merges > row_capacity_ || n_per_split > row_capacity_ + partial_capacity_ ||
      plan.num_partials > partial_capacity_) {
    return invalid_argument("attention plan of " + std::to_string(n_folded + n_per_split) +
                            " items does not fit the work buffers (rows " + std::to_string(row_capacity_) +
                            ", partial slots " + std::to_string(partial_capacity_) + ")");
  }
  char* h = host_.as<char>();
  int32_t* counts = reinterpret_cast<int32_t*>(h);
  counts[0] = static_cast<int32_t>(n_per_split);
  counts[1] = static_cast<int32_t>(n_merges);
  counts[2] = static_cast<int32_t>(n_folded);
  counts[3] = plan.num_partials;
  std::memcpy(h + merges_offset(), plan.merges.data(), plan.merges.size() * sizeof(AttentionMerge));
  std::memcpy(h + folded_offset(), plan.folded.data(), plan.folded.size() * sizeof(AttentionWork));
  std::memcpy(h + per_split_offset(), plan.per_split.data(), plan.per_split.size() * sizeof(AttentionWork));
  const size_t used = per_split_offset() + plan.per_split.size() * sizeof(AttentionWork);
  VOSTI_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(device_.as<void>(), h, used, cudaMemcpyHostToDevice, stream));
  AttentionWorkView v = base_view();
  v.split = plan.split;
  v.window = plan.window;
  v.folded_rows = plan.folded_rows;
  v.num_folded = static_cast<int32_t>(n_folded);
  v.num_folded_one_split = plan.num_folded_one_split;
  v.per_split_grid = static_cast<int32_t>(n_per_split);
  v.per_split_folds = plan.decode_folds;
  v.merge_grid = static_cast<int32_t>(n_merges);
  return v;
}

AttentionWorkView AttentionWorkBuffers::graph_view(int64_t num_rows, int32_t per_split_ctas) const {
  AttentionWorkView v = base_view();
  v.num_folded = 0;
  v.per_split_grid = std::max<int32_t>(1, per_split_ctas);
  v.merge_grid = static_cast<int32_t>(std::min<int64_t>(num_rows, row_capacity_));
  return v;
}

}  // namespace vosti
