// vosti_attention_plans: checks, on the real plan_attention (src/kernels/cuda/attention/attention_plan.cc),
// the invariant the kernel analyzer assumes for the tensor-core attention (A-plan,
// docs/VERIFICATION.md): every row of a work item shares the KV tile of the item's last position,
// the KV tile of its first position f (attention.h: under a sliding window f = p - window + 1)
// and its splits; a folded item covers splits [f / split, splits of its last position); a
// per-split item is one split of one decode row, or a whole decode (all its splits, which the
// decode kernel folds). Exhaustive over runs of one sequence starting at every position in
// [0, kMaxFirst) with every length in [1, kMaxCount], for every group size, split and window
// below, with and without partial slots, and for a decode with and without the decode kernel's
// fold.
//   vosti_attention_plans     prints "attention plans: N items checked" or the first violation;
//                             exits 1 on a violation.
#include <cstdint>
#include <iostream>
#include <string>
#include <utility>
#include <vector>

#include "kernels/cuda/attention/attention_plan.h"
#include "kernels/kernel_backend.h"

namespace {

constexpr int32_t kMaxFirst = 1100;
constexpr int32_t kMaxCount = 130;

bool check_item(const vosti::AttentionWork& w, int split, int window, bool per_split, std::string* why) {
  const int32_t last = w.first_position + w.num_positions - 1;
  if (w.first_position / vosti::kAttnKvTile != last / vosti::kAttnKvTile) {
    *why = "an item spans two KV tiles";
    return false;
  }
  const int32_t f_first = vosti::attention_window_first(w.first_position, window);
  if (f_first / vosti::kAttnKvTile != vosti::attention_window_first(last, window) / vosti::kAttnKvTile) {
    *why = "an item's rows start in two KV tiles";
    return false;
  }
  const int32_t splits = vosti::attention_num_splits(last, split);
  if (w.first_position / split != last / split) {
    *why = "an item's rows end in different splits";
    return false;
  }
  const int32_t split0 = f_first / split;
  if (!per_split && (w.split_begin != split0 || w.split_end != splits || w.partial != -1)) {
    *why = "a folded item does not cover exactly its rows' splits";
    return false;
  }
  if (per_split && !(w.num_positions == 1 && ((w.split_end == w.split_begin + 1 && w.split_begin >= split0 &&
                                               w.split_end <= splits && w.partial >= 0) ||
                                              (w.split_begin == split0 && w.split_end == splits && w.partial == -1)))) {
    *why = "a per-split item is neither one split of a decode nor a whole decode";
    return false;
  }
  return true;
}

}  // namespace

int main() {
  int64_t items = 0;
  vosti::AttentionPlan plan;
  for (const int group : {1, 2, 4, 8, 16, 32, 64}) {
    for (const int split : {64, 128, 512, 1024}) {
      for (const int window : {0, 333}) {
        vosti::AttentionShape shape{group * 2, 2, 128, split, vosti::kAttnRowsPerCta, window};
        for (const auto& [capacity, fold_ctas] : {std::pair{0, 0}, std::pair{1000, 0}, std::pair{1000, 1}}) {
          shape.decode_fold_ctas = fold_ctas;
          for (int32_t first = 0; first < kMaxFirst; ++first) {
            for (int32_t count = 1; count <= (fold_ctas > 0 ? 1 : kMaxCount); ++count) {  // a fold: decodes only
              std::vector<int32_t> positions(static_cast<size_t>(count)), seq(static_cast<size_t>(count), 7);
              for (int32_t i = 0; i < count; ++i) positions[static_cast<size_t>(i)] = first + i;
              const vosti::Status st = vosti::plan_attention(positions, seq, shape, capacity, &plan);
              if (!st.ok()) {
                std::cout << "attention plans: plan_attention refused a valid step: " << st.message() << "\n";
                return 1;
              }
              std::string why;
              for (const auto& w : plan.folded)
                if (!check_item(w, split, window, false, &why)) {
                  std::cout << "attention plans: " << why << " (group " << group << ", split " << split << ", window "
                            << window << ", first " << first << ", count " << count << ")\n";
                  return 1;
                }
              for (const auto& w : plan.per_split)
                if (!check_item(w, split, window, true, &why)) {
                  std::cout << "attention plans: " << why << " (group " << group << ", split " << split << ", window "
                            << window << ", first " << first << ", count " << count << ")\n";
                  return 1;
                }
              items += static_cast<int64_t>(plan.folded.size() + plan.per_split.size());
            }
          }
        }
      }
    }
  }
  std::cout << "attention plans: " << items << " items checked\n";
  return 0;
}
