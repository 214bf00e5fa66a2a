// AttentionWorkBuffers: the device side of the tensor-core attention's launch plan
// (kernels/cuda/attention_plan.h) for whoever runs the forward (the CUDA runner; the tests'
// fixture). It owns the pinned host staging and the device copy of the plan's arrays at fixed
// addresses, and the partial workspace for split states, so that a CUDA graph captured once
// reads every later step's plan from the same places.
//
// Layout of the plan copy: int32 counts [4] (per_split, merges, folded, partials), then
// merges [row_capacity], folded [row_capacity], per_split [row_capacity + partial_capacity];
// one step copies only up to its last used per_split item.
// Thread safety: one owner; upload() is enqueued on the owner's stream and the staging may be
// rewritten only after that stream has passed the copy (the runner synchronises every step).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "core/status.h"
#include "kernels/cuda/attention.h"
#include "kernels/cuda/attention_plan.h"
#include "model/cuda/device_memory.h"

namespace vosti {

class AttentionWorkBuffers {
 public:
  // Room for steps of up to row_capacity query rows and partial_capacity partial slots of a
  // model with num_heads heads of head_dim, its KV split and sliding window (0: none).
  // Errors: kResourceExhausted naming the buffer.
  static Result<AttentionWorkBuffers> allocate(int64_t row_capacity, int32_t partial_capacity, int num_heads,
                                               int head_dim, int split, int window = 0);

  // Copies `plan` to the device on `stream`; returns the view the attention reads, with the
  // grids of an eager launch (one CTA row per item, which the launcher caps at the CTAs that
  // fit at once). REQUIRES: the plan fits the capacities
  // (checked: kInvalidArgument otherwise).
  Result<AttentionWorkView> upload(const AttentionPlan& plan, cudaStream_t stream);

  // The view a CUDA graph captures for steps of up to num_rows single-row sequences: grids
  // fixed by the capacity, the kernels reading the step's counts on the device; per_split_ctas
  // is the per-split launch's CTA rows. REQUIRES: the step's plan has no folded items, and folds
  // decode rows in the per-split kernel only where attention_decode_fits.
  AttentionWorkView graph_view(int64_t num_rows, int32_t per_split_ctas) const;

  int32_t partial_capacity() const { return partial_capacity_; }
  int split() const { return split_; }

 private:
  AttentionWorkView base_view() const;
  size_t merges_offset() const { return 16; }
  size_t folded_offset() const;
  size_t per_split_offset() const;

  PinnedMemory host_;
  DeviceMemory device_;
  DeviceMemory partials_;
  int64_t row_capacity_ = 0;
  int32_t partial_capacity_ = 0;
  int split_ = kAttnDefaultSplit;
  int window_ = 0;
};

}  // namespace vosti
