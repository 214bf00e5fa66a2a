#include "runner/step_batch.h"

#include <algorithm>
#include <map>

#include "core/check.h"

namespace vosti {
namespace {

// Clears `out`'s arrays for a new step (their storage stays).
void reset(StepBatch& out, int32_t block_size, int64_t num_seqs) {
  out.block_size = block_size;
  out.num_seqs = num_seqs;
  out.token_ids.clear();
  out.positions.clear();
  out.slots.clear();
  out.row_seq.clear();
  out.block_tables.clear();
  out.window_slots.clear();
  out.window_block_tables.clear();
  out.wanted.clear();
  out.logit_order.clear();
  out.tasks.clear();
  out.host_sampled.clear();
  out.adjusts.clear();
  out.num_score_rows = 0;
}

// Request s's token rows, block table row and wanted rows.
void add_request(const ScheduledRequest& r, const RequestLogitsTask& t, int32_t s, StepBatch& out) {
  VOSTI_CHECK(static_cast<int32_t>(r.token_ids.size()) == r.num_new_tokens, "token_ids disagree with num_new_tokens");
  const int32_t bs = out.block_size;
  const auto first_row = static_cast<int32_t>(out.token_ids.size());
  const bool window = !r.window_block_table.empty();
  const bool full = !window || !r.block_table.empty();  // window-local KV of a model without full layers: none
  for (int32_t j = 0; j < r.num_new_tokens; ++j) {
    const int32_t p = r.num_computed_tokens + j;
    const auto block = static_cast<size_t>(p / bs);
    VOSTI_CHECK(!full || block < r.block_table.size(), "block table does not cover the step");
    out.token_ids.push_back(r.token_ids[static_cast<size_t>(j)]);
    out.positions.push_back(p);
    out.slots.push_back(full ? r.block_table[block] * bs + p % bs : -1);
    out.row_seq.push_back(s);
    if (window) {
      VOSTI_CHECK(block < r.window_block_table.size() && r.window_block_table[block] != kNoBlock,
                  "window table does not cover the step");
      out.window_slots.push_back(r.window_block_table[block] * bs + p % bs);
    }
  }
  const size_t table = static_cast<size_t>(s) * static_cast<size_t>(out.block_table_stride);
  std::copy(r.block_table.begin(), r.block_table.end(), out.block_tables.begin() + static_cast<std::ptrdiff_t>(table));
  if (window) {
    const size_t wtable = static_cast<size_t>(s) * static_cast<size_t>(out.window_block_table_stride);
    std::copy(r.window_block_table.begin(), r.window_block_table.end(),
              out.window_block_tables.begin() + static_cast<std::ptrdiff_t>(wtable));
  }
  if (t.score_prompt) {
    for (int32_t j = 0; j < r.num_new_tokens; ++j) {
      const int32_t pos = r.num_computed_tokens + j;
      if (static_cast<size_t>(pos) + 1 >= t.prompt.size()) break;
      out.wanted.push_back({s, first_row + j, pos, RowKind::kScore, t.prompt[static_cast<size_t>(pos) + 1]});
      ++out.num_score_rows;
    }
  }
  if (t.sample) {
    VOSTI_CHECK(r.completes_known_tokens, "a sampled row must complete the request's known tokens");
    VOSTI_CHECK(t.num_draft == r.num_draft_tokens && r.num_draft_tokens < r.num_new_tokens &&
                    t.history.size() == (t.num_draft > 0 ? t.outputs.size() + static_cast<size_t>(t.num_draft) : 0),
                "a speculating request's task must match its draft tokens");
    for (int32_t i = 0; i <= r.num_draft_tokens; ++i) {
      const int32_t j = r.num_new_tokens - 1 - r.num_draft_tokens + i;
      out.wanted.push_back({s, first_row + j, r.num_computed_tokens + j, RowKind::kSample, -1, i});
    }
  }
}

// The logits order and, where asked, the sampler tasks and adjustments in it.
void add_logits_rows(std::span<const RequestLogitsTask> tasks, const StepBatchOptions& options, StepBatch& out) {
  for (const RowKind kind : {RowKind::kScore, RowKind::kSample})
    for (size_t i = 0; i < out.wanted.size(); ++i)
      if (out.wanted[i].kind == kind) out.logit_order.push_back(static_cast<int32_t>(i));
  if (!options.sampler_tasks) return;
  for (const int32_t i : out.logit_order) {
    const WantedRow& w = out.wanted[static_cast<size_t>(i)];
    const RequestLogitsTask& t = tasks[static_cast<size_t>(w.plan_index)];
    SamplerRowTask task = sampler_task(t, w);
    uint8_t host = 0;
    // The device sampler reports the raw row only: a processed mode's logprobs need the host's.
    if (w.kind == RowKind::kSample && t.sampling->logprobs && reports_processed(t.logprobs_mode)) {
      host = 1;
    } else if (w.kind == RowKind::kSample) {
      const size_t before = out.adjusts.size();
      append_sampler_adjusts(t, w, out.adjusts);
      if (options.adjust_capacity > 0 && static_cast<int64_t>(out.adjusts.size()) > options.adjust_capacity) {
        out.adjusts.resize(before);  // no room: the host samples this row
        host = 1;
      } else {
        task.adjust_begin = static_cast<int32_t>(before);
        task.adjust_count = static_cast<int32_t>(out.adjusts.size() - before);
      }
    }
    out.tasks.push_back(task);
    out.host_sampled.push_back(host);
  }
}

}  // namespace

std::vector<int32_t> StepBatch::logit_token_rows() const {
  std::vector<int32_t> rows;
  rows.reserve(logit_order.size());
  for (const int32_t i : logit_order) rows.push_back(wanted[static_cast<size_t>(i)].token_row);
  return rows;
}

ForwardBatch forward_batch(const StepBatch& batch, std::span<const int32_t> logit_rows) {
  ForwardBatch f;
  f.token_ids = batch.token_ids;
  f.positions = batch.positions;
  f.slots = batch.slots;
  f.row_seq = batch.row_seq;
  f.block_tables = batch.block_tables;
  f.block_table_stride = batch.block_table_stride;
  f.window_slots = batch.window_slots;
  f.window_block_tables = batch.window_block_tables;
  f.window_block_table_stride = batch.window_block_table_stride;
  f.logit_rows = logit_rows;
  return f;
}

void build_step_batch(const StepPlan& plan, std::span<const RequestLogitsTask> tasks, int32_t block_size,
                      const StepBatchOptions& options, StepBatch& out) {
  VOSTI_CHECK(tasks.size() == plan.requests.size(), "one RequestLogitsTask per scheduled request");
  VOSTI_CHECK(block_size > 0, "block_size must be positive");
  const auto num_seqs = static_cast<int64_t>(plan.requests.size());
  reset(out, block_size, num_seqs);
  int32_t stride = 1;
  int32_t window_stride = 1;
  bool window = false;
  bool decode = true;
  for (const ScheduledRequest& r : plan.requests) {
    stride = std::max(stride, static_cast<int32_t>(r.block_table.size()));
    window_stride = std::max(window_stride, static_cast<int32_t>(r.window_block_table.size()));
    window = window || !r.window_block_table.empty();
    decode = decode && r.num_new_tokens == 1;
  }
  out.block_table_stride = stride;
  out.block_tables.assign(static_cast<size_t>(num_seqs) * static_cast<size_t>(stride), 0);
  out.window_block_table_stride = window_stride;
  if (window)
    out.window_block_tables.assign(static_cast<size_t>(num_seqs) * static_cast<size_t>(window_stride), kNoBlock);
  out.token_ids.reserve(static_cast<size_t>(plan.num_batched_tokens));
  for (int64_t s = 0; s < num_seqs; ++s)
    add_request(plan.requests[static_cast<size_t>(s)], tasks[static_cast<size_t>(s)], static_cast<int32_t>(s), out);
  out.decode_only = decode && out.num_score_rows == 0;
  add_logits_rows(tasks, options, out);
}

SamplerRowTask sampler_task(const RequestLogitsTask& t, const WantedRow& row) {
  VOSTI_CHECK(t.sampling != nullptr, "a wanted row needs its request's sampling params");
  const SamplingParams& p = *t.sampling;
  SamplerRowTask s;
  s.num_top = p.num_top_logprobs;
  if (row.kind == RowKind::kScore) {
    s.kind = kSamplerRowScore;
    s.target_token = row.target_token;
    return s;
  }
  s.kind = kSamplerRowSample;
  s.top_k = p.top_k;
  s.temperature = p.temperature;
  s.top_p = p.top_p;
  s.min_p = p.min_p;
  s.repetition_penalty = p.repetition_penalty;
  s.frequency_penalty = p.frequency_penalty;
  s.presence_penalty = p.presence_penalty;
  s.seed = t.seed;
  s.output_position = t.outputs.size() + static_cast<uint64_t>(row.sample_index);
  return s;
}

void append_sampler_adjusts(const RequestLogitsTask& t, const WantedRow& row, std::vector<SamplerAdjust>& out) {
  const SamplingParams& p = *t.sampling;
  const std::span<const int32_t> outputs = t.outputs_before(row.sample_index);
  const bool repetition = p.repetition_penalty != 1.0f;
  const bool counted = p.frequency_penalty != 0.0f || p.presence_penalty != 0.0f;
  if (p.logit_bias.empty() && !repetition && !counted) return;
  std::map<int32_t, SamplerAdjust> by_token;
  for (const auto& [token, bias] : p.logit_bias) {
    SamplerAdjust& a = by_token[token];
    a.token = token;
    a.flags |= kAdjustBias;
    a.bias = bias;
  }
  if (repetition) {
    for (const auto tokens : {t.prompt, outputs})
      for (const int32_t token : tokens) {
        SamplerAdjust& a = by_token[token];
        a.token = token;
        a.flags |= kAdjustRepeated;
      }
  }
  if (counted) {
    for (const int32_t token : outputs) {
      SamplerAdjust& a = by_token[token];
      a.token = token;
      a.flags |= kAdjustCounted;
      ++a.count;
    }
  }
  for (const auto& [token, a] : by_token) out.push_back(a);
}

void add_routed_rows(const StepPlan& plan, std::span<const RequestLogitsTask> tasks, std::span<const int32_t> routed,
                     int64_t num_tokens, std::vector<RoutedRows>& out) {
  const size_t per = num_tokens > 0 ? routed.size() / static_cast<size_t>(num_tokens) : 0;
  size_t row = 0;
  for (size_t i = 0; i < plan.requests.size(); ++i) {
    const ScheduledRequest& s = plan.requests[i];
    const auto n = static_cast<size_t>(s.num_new_tokens);
    if (tasks[i].routed_experts && per > 0) {
      RoutedRows r;
      r.plan_index = static_cast<int32_t>(i);
      r.first_position = s.num_computed_tokens;
      r.ids.assign(routed.begin() + static_cast<std::ptrdiff_t>(row * per),
                   routed.begin() + static_cast<std::ptrdiff_t>((row + n) * per));
      out.push_back(std::move(r));
    }
    row += n;
  }
}

}  // namespace vosti
