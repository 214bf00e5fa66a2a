#include "runner/cuda/step_buffer.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "cache/block_table.h"
#include "core/check.h"

namespace vosti {
namespace {

size_t n(int64_t count) { return static_cast<size_t>(count); }

template <typename T>
void put(char* host, size_t offset, std::span<const T> values) {
  if (!values.empty()) std::memcpy(host + offset, values.data(), values.size_bytes());
}

// A table matrix of `seqs` rows of `stride` entries at `host`, from `rows` rows of `from_stride`:
// each row copied, then zeros; in window tables a released entry (kNoBlock) is written as block 0
// (step_buffer.h).
void put_tables(char* host, const std::vector<int32_t>& tables, int32_t from_stride, int64_t rows, int32_t stride,
                int64_t seqs, bool window) {
  auto* out = reinterpret_cast<int32_t*>(host);
  if (from_stride == stride) {
    std::memcpy(out, tables.data(), tables.size() * sizeof(int32_t));
  } else {
    for (int64_t r = 0; r < rows; ++r) {
      std::copy_n(tables.data() + r * from_stride, from_stride, out + r * stride);
      std::fill_n(out + r * stride + from_stride, stride - from_stride, 0);
    }
  }
  if (window) std::replace(out, out + rows * stride, kNoBlock, 0);
  std::fill_n(out + rows * stride, (seqs - rows) * stride, 0);
}

template <typename T>
const T* at(char* device, size_t offset) {
  return reinterpret_cast<const T*>(device + offset);
}

}  // namespace

StepLayout make_step_layout(const StepShape& s) {
  StepLayout l;
  size_t next = 0;
  const auto take = [&next](size_t bytes) {
    const size_t offset = next;
    next = (next + bytes + 63) / 64 * 64;
    return offset;
  };
  VOSTI_CHECK(s.windows >= 0 && s.windows <= kMaxAttentionWindows, "attention plans per step");
  const auto windows = static_cast<size_t>(s.windows);
  const bool window = s.window_stride > 0;
  l.stride = take(sizeof(int32_t));
  l.window_stride = take(sizeof(int32_t));
  l.token_ids = take(n(s.tokens) * sizeof(int32_t));
  l.positions = take(n(s.tokens) * sizeof(int32_t));
  l.slots = take(n(s.tokens) * sizeof(int32_t));
  l.row_seq = take(n(s.tokens) * sizeof(int32_t));
  l.window_slots = take(window ? n(s.tokens) * sizeof(int32_t) : 0);
  l.logit_rows = take(n(s.logit_rows) * sizeof(int32_t));
  for (size_t w = 0; w < windows; ++w) {
    l.counts[w] = take(4 * sizeof(int32_t));
    l.merges[w] = take(n(s.merges) * sizeof(AttentionMerge));
    l.per_split[w] = take(n(s.per_split) * sizeof(AttentionWork));
  }
  l.block_tables = take(n(s.seqs) * n(s.stride) * sizeof(int32_t));
  l.window_block_tables = take(n(s.seqs) * n(s.window_stride) * sizeof(int32_t));
  for (size_t w = 0; w < windows; ++w) l.folded[w] = take(n(s.folded[w]) * sizeof(AttentionWork));
  l.tasks = take(n(s.logit_rows) * sizeof(SamplerRowTask));
  l.adjusts = take(n(s.adjusts) * sizeof(SamplerAdjust));
  l.digest_rows = take(n(s.digests) * sizeof(int32_t));
  l.mask_rows = take(n(s.masks) * sizeof(int32_t));
  l.masks = take(n(s.masks) * n(s.mask_words) * sizeof(uint32_t));
  l.bytes = next;
  return l;
}

DeviceStep write_step(const StepBatch& b, const StepArrays& a, char* host, char* device, size_t capacity) {
  const int64_t T = b.num_tokens();
  const int64_t rows = a.graph_rows > 0 ? a.graph_rows : T;
  const int64_t seqs = a.graph_rows > 0 ? a.graph_rows : b.num_seqs;
  VOSTI_CHECK(rows >= T && seqs >= b.num_seqs, "a graph's rows hold the step");
  const std::span<const AttentionPlan> plans = a.attention;
  VOSTI_CHECK(plans.size() <= static_cast<size_t>(kMaxAttentionWindows), "attention plans per step");
  StepShape shape;
  shape.tokens = rows;
  shape.seqs = seqs;
  shape.logit_rows = static_cast<int64_t>(a.logit_rows.size());
  const bool window = !b.window_slots.empty();
  VOSTI_CHECK(
      a.table_stride == 0 || (a.table_stride >= b.block_table_stride && a.table_stride >= b.window_block_table_stride),
      "a table stride below the step's");
  shape.stride = a.table_stride > 0 ? a.table_stride : b.block_table_stride;
  shape.window_stride = !window ? 0 : a.table_stride > 0 ? a.table_stride : b.window_block_table_stride;
  shape.windows = static_cast<int>(plans.size());
  for (size_t w = 0; w < plans.size(); ++w) {
    const AttentionPlan& plan = plans[w];
    shape.merges = std::max(shape.merges, static_cast<int64_t>(plan.merges.size()));
    shape.per_split = std::max(shape.per_split, static_cast<int64_t>(plan.per_split.size()));
    shape.folded[w] = static_cast<int64_t>(plan.folded.size());
    VOSTI_CHECK(a.graph_rows == 0 ||
                    (static_cast<int64_t>(plan.merges.size()) <= a.graph_rows &&
                     static_cast<int64_t>(plan.per_split.size()) <= a.per_split_capacity && plan.folded.empty()),
                "the attention plan exceeds the step's regions");
  }
  if (a.graph_rows > 0) {
    shape.merges = a.graph_rows;
    shape.per_split = a.per_split_capacity;
  }
  shape.adjusts = static_cast<int64_t>(a.adjusts.size());
  shape.digests = static_cast<int64_t>(a.digest_rows.size());
  shape.masks = static_cast<int64_t>(a.mask_rows.size());
  shape.mask_words = a.mask_words;
  VOSTI_CHECK(a.masks.size() == a.mask_rows.size() * static_cast<size_t>(a.mask_words), "one mask per masked row");
  VOSTI_CHECK(a.tasks.size() == a.logit_rows.size(), "one sampler task per logits row");
  const StepLayout l = make_step_layout(shape);
  VOSTI_CHECK(l.bytes <= capacity, "the step needs " + std::to_string(l.bytes) + " bytes of a " +
                                       std::to_string(capacity) + "-byte step buffer");

  const auto stride = static_cast<int32_t>(shape.stride), window_stride = static_cast<int32_t>(shape.window_stride);
  std::memcpy(host + l.stride, &stride, sizeof(int32_t));
  std::memcpy(host + l.window_stride, &window_stride, sizeof(int32_t));
  const auto padded = [&](size_t offset, const std::vector<int32_t>& values, int32_t pad) {
    put(host, offset, std::span<const int32_t>(values));
    std::fill_n(reinterpret_cast<int32_t*>(host + offset) + T, rows - T, pad);
  };
  padded(l.token_ids, b.token_ids, 0);
  padded(l.positions, b.positions, -1);
  padded(l.slots, b.slots, -1);
  padded(l.row_seq, b.row_seq, 0);
  if (window) padded(l.window_slots, b.window_slots, -1);
  put(host, l.logit_rows, a.logit_rows);
  for (size_t w = 0; w < plans.size(); ++w) {
    int32_t counts[4] = {0, 0, 0, 0};
    attention_plan_counts(plans[w], counts);
    std::memcpy(host + l.counts[w], counts, sizeof counts);
    put(host, l.merges[w], std::span<const AttentionMerge>(plans[w].merges));
    put(host, l.per_split[w], std::span<const AttentionWork>(plans[w].per_split));
    put(host, l.folded[w], std::span<const AttentionWork>(plans[w].folded));
  }
  put_tables(host + l.block_tables, b.block_tables, b.block_table_stride, b.num_seqs, stride, seqs, false);
  if (window)
    put_tables(host + l.window_block_tables, b.window_block_tables, b.window_block_table_stride, b.num_seqs,
               window_stride, seqs, true);
  put(host, l.tasks, a.tasks);
  put(host, l.adjusts, a.adjusts);
  put(host, l.digest_rows, a.digest_rows);
  put(host, l.mask_rows, a.mask_rows);
  put(host, l.masks, a.masks);

  DeviceStep d;
  d.bytes = l.bytes;
  CudaBatch& batch = d.batch;
  batch.num_tokens = rows;
  batch.token_ids = at<int32_t>(device, l.token_ids);
  batch.positions = at<int32_t>(device, l.positions);
  batch.slots = at<int32_t>(device, l.slots);
  batch.row_seq = at<int32_t>(device, l.row_seq);
  batch.block_tables = at<int32_t>(device, l.block_tables);
  batch.block_table_stride = at<int32_t>(device, l.stride);
  if (window) {
    batch.window_slots = at<int32_t>(device, l.window_slots);
    batch.window_block_tables = at<int32_t>(device, l.window_block_tables);
    batch.window_block_table_stride = at<int32_t>(device, l.window_stride);
  }
  batch.num_logit_rows = shape.logit_rows;
  batch.logit_rows = at<int32_t>(device, l.logit_rows);
  for (size_t w = 0; w < plans.size(); ++w) {
    AttentionPlanDevice& p = d.attention[w];
    p.counts = at<int32_t>(device, l.counts[w]);
    p.merges = at<AttentionMerge>(device, l.merges[w]);
    p.folded = at<AttentionWork>(device, l.folded[w]);
    p.per_split = at<AttentionWork>(device, l.per_split[w]);
  }
  d.tasks = at<SamplerRowTask>(device, l.tasks);
  d.adjusts = at<SamplerAdjust>(device, l.adjusts);
  d.digest_rows = at<int32_t>(device, l.digest_rows);
  d.mask_rows = at<int32_t>(device, l.mask_rows);
  d.masks = at<uint32_t>(device, l.masks);
  return d;
}

}  // namespace vosti
