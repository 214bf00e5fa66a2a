// StepBatch: everything a runner reads about one step, built in one pass from the StepPlan and
// the requests' logits tasks (build_step_batch): the token rows (ids, positions, cache slots, the
// sequence of each row), the block-table matrix, the rows whose logits are wanted and, where the
// runner asks, each logits row's sampler task and adjustments. The CPU runner reads it as its
// forward batch; the CUDA runner copies it into its step buffer with one transfer. The slot
// formula lives here alone:
//   slot(p) = block_table[p / block_size] * block_size + p % block_size.
//
// Row orders:
//   token rows  the requests in plan order, each its new tokens in position order;
//   wanted      per request (plan order) its scored prompt positions, then its sampled row (a
//               speculating request: its num_draft + 1 sampled rows, in position order):
//               the order of StepResult::rows (the engine relies on it);
//   logits      the score rows first (wanted order), then the sampled rows (wanted order): the
//               order runners compute logits in, so that a step's sampled rows are its last
//               logits chunk. logit_order[i] indexes `wanted`.
// Invariants (after build_step_batch): token_ids, positions, slots and row_seq have
// num_tokens() entries; block_tables has num_seqs * block_table_stride entries, request s's table
// first in row s, then zeros; every slot is a block of its own table; logit_order is a
// permutation of wanted's indices.
// Thread safety: a value type; one runner fills and reads its own.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "model/model.h"
#include "runner/model_runner.h"
#include "sample/sampler_task.h"
#include "sched/step_plan.h"

namespace vosti {

// A row whose logits the step produces.
struct WantedRow {
  int32_t plan_index = 0;  // into StepPlan::requests
  int32_t token_row = 0;   // row of the step's token rows
  int32_t position = 0;
  RowKind kind = RowKind::kSample;
  int32_t target_token = -1;  // kScore: prompt[position + 1]
  int32_t sample_index = 0;   // kSample: i of RequestLogitsTask::outputs_before
};

// What the runner asks of build_step_batch beyond the rows.
struct StepBatchOptions {
  // Build a SamplerRowTask (and adjustments) for every logits row: the device sampler's input.
  bool sampler_tasks = false;
  // Adjustment entries the runner's buffer holds; a sampled row whose adjustments do not fit goes
  // to the host sampler (host_sampled) instead. 0: no limit.
  int64_t adjust_capacity = 0;
};

struct StepBatch {
  int32_t block_size = 0;
  int64_t num_seqs = 0;
  std::vector<int32_t> token_ids;     // [T]
  std::vector<int32_t> positions;     // [T]
  std::vector<int32_t> slots;         // [T] cache slot of each row's K/V
  std::vector<int32_t> row_seq;       // [T] the row's sequence: its index in plan.requests
  int32_t block_table_stride = 1;     // the step's longest block table (>= 1)
  std::vector<int32_t> block_tables;  // [num_seqs, block_table_stride]
  // Window-local KV (empty without it): the window layers' slots and tables, the released
  // leading entries of a table kNoBlock (no query of the step reads them).
  std::vector<int32_t> window_slots;         // [T]
  int32_t window_block_table_stride = 1;     // the step's longest window table (>= 1)
  std::vector<int32_t> window_block_tables;  // [num_seqs, window_block_table_stride]
  std::vector<WantedRow> wanted;             // [R] in wanted order
  std::vector<int32_t> logit_order;          // [R] indices into wanted, in logits order
  int64_t num_score_rows = 0;                // the first num_score_rows of logits order are score rows
  bool decode_only = false;                  // every request has one new token and no row is scored
  // With StepBatchOptions::sampler_tasks, aligned with logit_order:
  std::vector<SamplerRowTask> tasks;  // [R] (adjust_begin / adjust_count index adjusts)
  // [R] 1: the host samples this row (its adjustments did not fit, or it reports a processed row)
  std::vector<uint8_t> host_sampled;
  std::vector<SamplerAdjust> adjusts;  // [A] every device-sampled row's adjustments, in logits order

  int64_t num_tokens() const { return static_cast<int64_t>(token_ids.size()); }
  int64_t num_logit_rows() const { return static_cast<int64_t>(wanted.size()); }
  // The block table of token row t: block_table_stride entries.
  const int32_t* table_of_row(int64_t t) const {
    return block_tables.data() + static_cast<int64_t>(row_seq[static_cast<size_t>(t)]) * block_table_stride;
  }
  // The token rows of the logits rows, in logits order.
  std::vector<int32_t> logit_token_rows() const;
};

// Fills `out` (reusing its storage) from the plan and tasks.
// REQUIRES: tasks.size() == plan.requests.size(); each request's block table covers its new
// positions; block_size > 0; a sampled request completes its known tokens (checked).
void build_step_batch(const StepPlan& plan, std::span<const RequestLogitsTask> tasks, int32_t block_size,
                      const StepBatchOptions& options, StepBatch& out);

// The forward batch (model/model.h) of `batch`'s token rows with logits for `logit_rows`: a view
// of both, valid while they are.
ForwardBatch forward_batch(const StepBatch& batch, std::span<const int32_t> logit_rows);

// The device sampler's task of a logits row, and the adjustments of a sampled row (sampler.h steps
// 1-3, one entry per touched token, appended to `adjusts`); used by build_step_batch.
SamplerRowTask sampler_task(const RequestLogitsTask& task, const WantedRow& row);
void append_sampler_adjusts(const RequestLogitsTask& task, const WantedRow& row, std::vector<SamplerAdjust>& adjusts);

// Appends to `out` the routing of each request that asked (RequestLogitsTask::routed_experts), cut
// from `routed` ([num_tokens, MoE layers, top_k]: the step's token rows in plan order) along the
// plan's token rows (requests in plan order, each its new tokens). Nothing for an empty `routed`.
void add_routed_rows(const StepPlan& plan, std::span<const RequestLogitsTask> tasks, std::span<const int32_t> routed,
                     int64_t num_tokens, std::vector<RoutedRows>& out);

}  // namespace vosti
