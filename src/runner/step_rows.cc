#include "runner/step_rows.h"

#include "core/check.h"

namespace vosti {

std::vector<WantedRow> wanted_rows(const StepPlan& plan, std::span<const RequestLogitsTask> tasks) {
  VOSTI_CHECK(tasks.size() == plan.requests.size(), "one RequestLogitsTask per scheduled request");
  std::vector<WantedRow> rows;
  int32_t first_row = 0;
  for (size_t i = 0; i < plan.requests.size(); ++i) {
    const ScheduledRequest& r = plan.requests[i];
    const RequestLogitsTask& t = tasks[i];
    const auto plan_index = static_cast<int32_t>(i);
    if (t.score_prompt) {
      for (int32_t j = 0; j < r.num_new_tokens; ++j) {
        const int32_t pos = r.num_computed_tokens + j;
        if (static_cast<size_t>(pos) + 1 >= t.prompt.size()) break;
        rows.push_back({plan_index, first_row + j, pos, RowKind::kScore, t.prompt[static_cast<size_t>(pos) + 1]});
      }
    }
    if (t.sample) {
      VOSTI_CHECK(r.completes_known_tokens, "a sampled row must complete the request's known tokens");
      const int32_t j = r.num_new_tokens - 1;
      rows.push_back({plan_index, first_row + j, r.num_computed_tokens + j, RowKind::kSample, -1});
    }
    first_row += r.num_new_tokens;
  }
  return rows;
}

}  // namespace vosti
