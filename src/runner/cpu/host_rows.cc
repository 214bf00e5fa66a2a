#include "runner/cpu/host_rows.h"

#include "core/check.h"

namespace vosti {

RowResult finish_row_on_host(std::span<const float> logits, const WantedRow& row, const RequestLogitsTask& task,
                             SamplerScratch& scratch) {
  VOSTI_CHECK(task.sampling != nullptr, "a wanted row needs its request's sampling params");
  RowResult out;
  out.plan_index = row.plan_index;
  out.position = row.position;
  out.kind = row.kind;
  if (row.kind == RowKind::kScore) {
    out.scored =
        report_token(logits, row.target_token, task.sampling->num_top_logprobs, reports_logits(task.logprobs_mode));
    if (task.digest) out.digest = logits_digest(logits);
    return out;
  }
  out.sample_index = row.sample_index;
  const std::span<const int32_t> outputs = task.outputs_before(row.sample_index);
  out.scored = sample_token(logits, *task.sampling, task.seed, static_cast<int64_t>(outputs.size()), task.prompt,
                            outputs, scratch, task.logprobs_mode);
  if (task.digest) out.digest = logits_digest(logits);
  if (task.full_logits) out.logits.assign(logits.begin(), logits.end());
  return out;
}

}  // namespace vosti
