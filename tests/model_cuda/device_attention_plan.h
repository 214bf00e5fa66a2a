// A test's device copy of an AttentionPlan, in buffers of its own (the runner's lives in its step
// buffer: runner/cuda/step_buffer.h), with the kernels' views of it from attention.h.
// Used by the tests and bench/attention_cuda_bench.cc. Thread safety: none (single-threaded users).
#pragma once

#include <cstdint>

#include "kernels/cuda/attention/attention.h"
#include "kernels/cuda/attention/attention_plan.h"
#include "kernels/cuda/cuda_status.h"
#include "kernels/cuda/device_memory.h"

namespace vosti::cuda_test {

class DeviceAttentionPlan {
 public:
  DeviceAttentionPlan() = default;
  // Room for plans of up to row_capacity rows and partial_capacity split states of num_heads heads.
  DeviceAttentionPlan(int64_t row_capacity, int32_t partial_capacity, int num_heads, int head_dim)
      : rows_(row_capacity), partial_capacity_(partial_capacity) {
    const auto alloc = [this](DeviceMemory& m, size_t bytes) {
      auto r = DeviceMemory::allocate(bytes == 0 ? 4 : bytes, "test attention plan");
      if (r.ok()) {
        m = std::move(r).value();
      } else if (status_.ok()) {
        status_ = r.status();
      }
    };
    alloc(counts_, 4 * sizeof(int32_t));
    alloc(merges_, static_cast<size_t>(row_capacity) * sizeof(AttentionMerge));
    alloc(folded_, static_cast<size_t>(row_capacity) * sizeof(AttentionWork));
    alloc(per_split_, static_cast<size_t>(row_capacity + partial_capacity) * sizeof(AttentionWork));
    alloc(partials_, static_cast<size_t>(partial_capacity) * attention_partial_floats(num_heads, head_dim) * 4);
  }

  int32_t partial_capacity() const { return partial_capacity_; }

  // Copies `plan` to the device (synchronously) and returns its eager view.
  Result<AttentionWorkView> upload(const AttentionPlan& plan) {
    VOSTI_RETURN_IF_ERROR(status_);  // an allocation that failed
    if (static_cast<int64_t>(plan.folded.size()) > rows_ || static_cast<int64_t>(plan.merges.size()) > rows_ ||
        static_cast<int64_t>(plan.per_split.size()) > rows_ + partial_capacity_)
      return invalid_argument("test attention plan: the plan does not fit the buffers");
    int32_t counts[4];
    attention_plan_counts(plan, counts);
    VOSTI_CUDA_RETURN_IF_ERROR(cudaMemcpy(counts_.as<void>(), counts, sizeof counts, cudaMemcpyHostToDevice));
    VOSTI_RETURN_IF_ERROR(copy(merges_, plan.merges));
    VOSTI_RETURN_IF_ERROR(copy(folded_, plan.folded));
    VOSTI_RETURN_IF_ERROR(copy(per_split_, plan.per_split));
    return attention_eager_view(plan, at());
  }

  // The view a decode graph of `rows` rows captures (attention_graph_view).
  AttentionWorkView graph_view(int split, int window, int64_t rows, int32_t per_split_ctas) const {
    return attention_graph_view(at(), split, window, rows, per_split_ctas);
  }

 private:
  template <typename T>
  static Status copy(DeviceMemory& dst, const std::vector<T>& v) {
    if (v.empty()) return Status();
    VOSTI_CUDA_RETURN_IF_ERROR(cudaMemcpy(dst.as<void>(), v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice));
    return Status();
  }
  AttentionPlanDevice at() const {
    AttentionPlanDevice d;
    d.counts = counts_.as<int32_t>();
    d.merges = merges_.as<AttentionMerge>();
    d.folded = folded_.as<AttentionWork>();
    d.per_split = per_split_.as<AttentionWork>();
    d.partials = partial_capacity_ > 0 ? partials_.as<float>() : nullptr;
    d.partial_capacity = partial_capacity_;
    return d;
  }

  Status status_;
  int64_t rows_ = 0;
  int32_t partial_capacity_ = 0;
  DeviceMemory counts_, merges_, folded_, per_split_, partials_;
};

}  // namespace vosti::cuda_test
