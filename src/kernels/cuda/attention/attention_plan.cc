// The tensor-core attention's launch plan; the rules are in attention_plan.h.
#include "kernels/cuda/attention/attention_plan.h"

#include <algorithm>
#include <string>

#include "kernels/kernel_backend.h"

namespace vosti {
namespace {

// Appends the work of one run of consecutive positions [first, first + count) of `seq` starting
// at `row`: cut at the boundaries of the tiles of the positions and of their first positions
// (f(q) reaches the next tile start 64 (t + 1) at q = 64 (t + 1) + window - 1), each piece's
// positions spread evenly over as few CTAs as fit.
// fold_decodes: attention_decode_rows_fold (decode rows stay whole items of the per-split kernel).
void plan_run(int32_t seq, int32_t row, int32_t first, int32_t count, bool decode, bool fold_decodes,
              const AttentionShape& shape, int32_t partial_capacity, AttentionPlan* plan) {
  const int max_positions = (decode ? kAttnRowsPerCta : shape.folded_rows) / shape.group();
  int32_t p = first;
  const int32_t end = first + count;
  while (p < end) {
    int32_t tile_end = std::min(end, (p / kAttnKvTile + 1) * kAttnKvTile);
    if (shape.window > 0) {
      const int64_t cut =
          int64_t{attention_window_first(p, shape.window) / kAttnKvTile + 1} * kAttnKvTile + shape.window - 1;
      tile_end = static_cast<int32_t>(std::min<int64_t>(tile_end, cut));
    }
    const int32_t n = tile_end - p;
    const int32_t pieces = (n + max_positions - 1) / max_positions;
    for (int32_t i = 0; i < pieces; ++i) {
      // Piece i of n positions split evenly: [n * i / pieces, n * (i + 1) / pieces).
      const int32_t a = p + n * i / pieces, b = p + n * (i + 1) / pieces;
      AttentionWork w;
      w.seq = seq;
      w.first_row = row + (a - first);
      w.first_position = a;
      w.num_positions = b - a;
      w.split_begin = attention_window_first(a, shape.window) / shape.split;
      w.split_end = attention_num_splits(b - 1, shape.split);
      const int32_t splits = w.split_end - w.split_begin;
      if (decode && (splits == 1 || fold_decodes)) {
        plan->per_split.push_back(w);
      } else if (decode && plan->num_partials + splits <= partial_capacity) {
        plan->merges.push_back({w.first_row, plan->num_partials, splits});
        for (int32_t s = 0; s < splits; ++s) {
          AttentionWork one = w;
          one.split_begin = w.split_begin + s;
          one.split_end = w.split_begin + s + 1;
          one.partial = plan->num_partials + s;
          plan->per_split.push_back(one);
        }
        plan->num_partials += splits;
      } else {
        plan->folded.push_back(w);
      }
    }
    p = tile_end;
  }
}

// Calls fn(r, e) for each run [r, e) of consecutive positions of one sequence (padding rows
// skipped): a sequence's rows are one run in the runner's steps; any other row order is planned
// run by run. A one-row run is a decode.
template <class Fn>
void for_each_run(std::span<const int32_t> positions, std::span<const int32_t> row_seq, Fn&& fn) {
  const auto m = static_cast<int32_t>(positions.size());
  int32_t r = 0;
  while (r < m) {
    if (positions[r] < 0) {  // padding row
      ++r;
      continue;
    }
    int32_t e = r + 1;
    while (e < m && row_seq[e] == row_seq[r] && positions[e] == positions[e - 1] + 1) ++e;
    fn(r, e);
    r = e;
  }
}

// KV tiles a query at position p reads (from its first position's tile to its own).
int32_t row_tiles(int32_t p, int window) {
  return p / kAttnKvTile - attention_window_first(p, window) / kAttnKvTile + 1;
}

}  // namespace

bool attention_decode_fits(int head_dim, int group, int block_size) {
  return (head_dim == 64 || head_dim == 128 || head_dim == 256) && group <= 16 && block_size <= kAttnKvTile &&
         (block_size & (block_size - 1)) == 0 && block_size >= head_dim / 16;
}

bool attention_decode_rows_fold(std::span<const int32_t> positions, std::span<const int32_t> row_seq,
                                const AttentionShape& shape) {
  if (shape.decode_fold_ctas <= 0 || positions.size() != row_seq.size()) return false;
  int64_t sum = 0, longest = 0;
  bool several = false;
  for_each_run(positions, row_seq, [&](int32_t r, int32_t e) {
    if (e - r != 1) return;
    const int32_t p = positions[r];
    const int32_t tiles = row_tiles(p, shape.window);
    sum += tiles;
    longest = std::max<int64_t>(longest, tiles);
    several =
        several || attention_num_splits(p, shape.split) > attention_window_first(p, shape.window) / shape.split + 1;
  });
  return several && longest * shape.decode_fold_ctas <= sum;
}

bool attention_two_blocks_fit(int head_dim, int block_size) {
  return head_dim <= 128 && block_size <= kAttnKvTile && (block_size & (block_size - 1)) == 0 &&
         block_size >= std::max(1, head_dim / 16);
}

int attention_folded_rows(const AttentionShape& shape, int block_size, int64_t positions, int sms, bool wgmma) {
  constexpr int kWide = 2 * kAttnRowsPerCta;
  if (!attention_two_blocks_fit(shape.head_dim, block_size)) return kAttnRowsPerCta;
  if (wgmma && (shape.head_dim == 64 || shape.head_dim == 128)) return kWide;
  const int64_t ctas = positions * shape.num_heads / kWide;  // a CTA: kWide rows (position x head) of a KV head
  return ctas >= 4 * int64_t{sms} ? kWide : kAttnRowsPerCta;
}

Status check_attention_shape(const AttentionShape& s) {
  if (s.num_heads <= 0 || s.num_kv_heads <= 0 || s.num_heads % s.num_kv_heads != 0) {
    return invalid_argument("attention: num_heads " + std::to_string(s.num_heads) +
                            " is not a positive multiple of num_kv_heads " + std::to_string(s.num_kv_heads));
  }
  if (s.group() > kAttnRowsPerCta) {
    return unimplemented("attention: " + std::to_string(s.group()) + " query heads per KV head; the tensor-core " +
                         "attention packs at most " + std::to_string(kAttnRowsPerCta));
  }
  if (std::find(std::begin(kAttnHeadDims), std::end(kAttnHeadDims), s.head_dim) == std::end(kAttnHeadDims)) {
    return unimplemented("attention: head_dim " + std::to_string(s.head_dim) +
                         " has no tensor-core instantiation (16, 32, 64, 128, 256)");
  }
  if (s.folded_rows != kAttnRowsPerCta && s.folded_rows != 2 * kAttnRowsPerCta) {
    return invalid_argument("attention: folded_rows " + std::to_string(s.folded_rows) + " must be " +
                            std::to_string(kAttnRowsPerCta) + " or " + std::to_string(2 * kAttnRowsPerCta));
  }
  if (s.split <= 0 || s.split % kAttnKvTile != 0) {
    return invalid_argument("attention: the KV split " + std::to_string(s.split) + " must be a positive multiple of " +
                            std::to_string(kAttnKvTile));
  }
  if (s.window < 0) return invalid_argument("attention: negative sliding window " + std::to_string(s.window));
  if (s.decode_fold_ctas < 0)
    return invalid_argument("attention: negative decode_fold_ctas " + std::to_string(s.decode_fold_ctas));
  return Status();
}

Status plan_attention(std::span<const int32_t> positions, std::span<const int32_t> row_seq, const AttentionShape& shape,
                      int32_t partial_capacity, AttentionPlan* plan) {
  plan->clear();
  VOSTI_RETURN_IF_ERROR(check_attention_shape(shape));
  plan->split = shape.split;
  plan->folded_rows = shape.folded_rows;
  plan->window = shape.window;
  if (positions.size() != row_seq.size())
    return invalid_argument("attention plan: positions and row_seq differ in length");
  const bool fold_decodes = attention_decode_rows_fold(positions, row_seq, shape);
  plan->decode_folds = fold_decodes;
  for_each_run(positions, row_seq, [&](int32_t r, int32_t e) {
    plan_run(row_seq[r], r, positions[r], e - r, e - r == 1, fold_decodes, shape, partial_capacity, plan);
  });
  // One-split items first: their CTAs need no shared memory for the fold.
  const auto multi = std::partition(plan->folded.begin(), plan->folded.end(),
                                    [](const AttentionWork& w) { return w.split_end - w.split_begin == 1; });
  plan->num_folded_one_split = static_cast<int32_t>(multi - plan->folded.begin());
  // The longest first in each part (ties keep the plan's order).
  const auto tiles = [&](const AttentionWork& w) {
    return (w.first_position + w.num_positions - 1) / kAttnKvTile -
           attention_window_first(w.first_position, shape.window) / kAttnKvTile;
  };
  const auto longer = [&](const AttentionWork& a, const AttentionWork& b) { return tiles(a) > tiles(b); };
  std::stable_sort(plan->folded.begin(), multi, longer);
  std::stable_sort(multi, plan->folded.end(), longer);
  return Status();
}

}  // namespace vosti
