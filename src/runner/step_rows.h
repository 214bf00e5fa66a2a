// The rows of a step whose logits are wanted, in the order the runners produce them:
// per scheduled request (plan order), its scored prompt positions, then its sampled row.
// Both runners derive them from (plan, tasks) with wanted_rows(), so the engine sees the
// same RowResult order whichever device ran the step.
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "runner/model_runner.h"
#include "sched/step_plan.h"

namespace vosti {

struct WantedRow {
  int32_t plan_index = 0;
  int32_t token_row = 0;  // row of the step's flattened batch (requests in plan order)
  int32_t position = 0;
  RowKind kind = RowKind::kSample;
  int32_t target_token = -1;  // kScore: prompt[position + 1]
};

// REQUIRES: tasks.size() == plan.requests.size().
std::vector<WantedRow> wanted_rows(const StepPlan& plan, std::span<const RequestLogitsTask> tasks);

}  // namespace vosti
