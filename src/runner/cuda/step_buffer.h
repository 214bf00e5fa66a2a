// The CUDA runner's step buffer: one step (its StepBatch, the attention plan of its rows, the
// sampler's tasks of its logits rows) laid out in the runner's pinned host buffer and copied to the
// device in one transfer, and the device view the forward and the sampler read.
//
// Layout (byte offsets; each region starts 64-byte aligned), in this order:
//   stride [1], window_stride [1], token_ids [T], positions [T], slots [T], row_seq [T],
//   window_slots [T or 0], logit_rows [R], then per
//   attention plan w < W (one per sliding window of the model: CudaModel::windows()):
//   counts_w [4] (attention_plan_counts), merges_w [M], per_split_w [P]
//     the arrays a CUDA graph reads: for a decode graph of G rows, T = R = M = G and P =
//     G x (the most splits a row can have), so their offsets are the same at every replay;
//   block_tables [S, stride], window_block_tables [S, window_stride] (window-local KV only)
//     read by graphs too, last: their sizes follow the step's strides, which the kernels read on
//     the device (at offsets 0 and 64); a graph step with window tables pads both to the runner's
//     largest stride (StepArrays::table_stride), so that every offset is the same at each replay;
//   folded_w [F_w] per plan, tasks [R], adjusts [A], digest_rows [D], mask_rows [K],
//   masks [K, mask_words]
//     what eager launches and the sampler (never captured) read.
// A step copies [0, bytes) of it: everything it uses, nothing past it.
// Window tables: a released leading entry (kNoBlock) is written as block 0. The tensor-core
// attention reads the entries of a window's first KV tile that lie before the window (their scores
// are then masked to -inf, so their weights are exact zeros whatever finite values they hold); the
// window pool is zeroed at allocation and only ever written with finite K/V, so block 0 is finite.
// Thread safety: pure functions over the caller's buffers.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>

#include "kernels/cuda/attention/attention.h"
#include "model/cuda/cuda_model.h"
#include "runner/step_batch.h"
#include "sample/sampler_task.h"

namespace vosti {

// The sizes of one step's regions.
struct StepShape {
  int64_t tokens = 0;                                  // T (a graph's G)
  int64_t seqs = 0;                                    // S
  int64_t logit_rows = 0;                              // R
  int64_t stride = 0;                                  // block-table entries per sequence
  int64_t window_stride = 0;                           // window-table entries per sequence (0: none)
  int windows = 1;                                     // W: attention plans (0: none)
  int64_t merges = 0;                                  // M: room for each plan's merges (a graph's G)
  int64_t per_split = 0;                               // P: room for each plan's per-split items (a graph's capacity)
  std::array<int64_t, kMaxAttentionWindows> folded{};  // F_w: plan w's folded items
  int64_t adjusts = 0;                                 // A
  int64_t digests = 0;                                 // D
  int64_t masks = 0;                                   // K: token masks (structured outputs)
  int64_t mask_words = 0;                              // words of one mask
};

struct StepLayout {
  using PerPlan = std::array<size_t, kMaxAttentionWindows>;
  size_t stride = 0, window_stride = 0, token_ids = 0, positions = 0, slots = 0, row_seq = 0, window_slots = 0,
         logit_rows = 0;
  PerPlan counts{}, merges{}, per_split{};
  size_t block_tables = 0, window_block_tables = 0;
  PerPlan folded{};
  size_t tasks = 0, adjusts = 0, digest_rows = 0, mask_rows = 0, masks = 0;
  size_t bytes = 0;
};

StepLayout make_step_layout(const StepShape& shape);

// What a step writes beyond its StepBatch, in the runner's order.
struct StepArrays {
  int64_t graph_rows = 0;                  // > 0: a decode graph's G; token rows past T are padding
  std::span<const int32_t> logit_rows;     // [R] token rows whose logits are computed
  std::span<const SamplerRowTask> tasks;   // [R]
  std::span<const SamplerAdjust> adjusts;  // [A]
  std::span<const int32_t> digest_rows;    // [D] rows of the sampler's logits chunk digested on the device
  std::span<const int32_t> mask_rows;      // [K] rows of the sampler's logits chunk masked on the device
  std::span<const uint32_t> masks;         // [K, mask_words] their token masks (sample/token_bitmask.h)
  int64_t mask_words = 0;
  std::span<const AttentionPlan> attention;  // the tensor-core attention's plans (one per window), or none
  int64_t per_split_capacity = 0;            // graph steps: P of the layout (>= each plan's per-split items)
  int64_t table_stride = 0;                  // > 0: both table matrices written at this stride (graph steps)
};

// The step as the device reads it.
struct DeviceStep {
  CudaBatch batch;  // the forward's view (attention: set by the caller from `attention`)
  std::array<AttentionPlanDevice, kMaxAttentionWindows> attention;  // where each plan's arrays are
                                                                    // (partials: the caller's)
  const SamplerRowTask* tasks = nullptr;
  const SamplerAdjust* adjusts = nullptr;
  const int32_t* digest_rows = nullptr;
  const int32_t* mask_rows = nullptr;
  const uint32_t* masks = nullptr;
  size_t bytes = 0;  // of the one transfer
};

// Writes the step into `host` (the pinned buffer) and returns its view at `device` (the device
// copy's base). Padding rows (graph steps) have token 0, position -1, slot -1, sequence 0: they
// write no KV and read none. Both buffers hold `capacity` bytes; a step whose layout needs more
// stops the process (VOSTI_CHECK) before a byte is written: the runner's caps under-sized it.
DeviceStep write_step(const StepBatch& batch, const StepArrays& arrays, char* host, char* device, size_t capacity);

}  // namespace vosti
