// The launch plan of the tensor-core paged attention (attention.h): which CTA computes which
// query rows over which KV splits, and which rows' split states are merged afterwards. Host
// code only (no CUDA), so the plan and its rules are tested on any machine.
//
// Invariants (what keeps the bits independent of the batch; attention.h states the arithmetic):
// - A work item holds consecutive positions of one sequence that share the KV tile of their
//   last position (floor(p / kAttnKvTile) is the same for every row of an item) and, under a
//   sliding window, the KV tile of their first (floor(f / kAttnKvTile), f the row's first
//   position: attention.h), all heads of one KV head group, at most kAttnRowsPerCta rows
//   (AttentionShape::folded_rows for items that fold their splits). So every row of an item
//   walks the same tiles floor(f / kAttnKvTile)..floor(p / kAttnKvTile), and no row ever sees a
//   tile wholly outside its own positions.
// - Split boundaries are multiples of the deployment's split size (AttentionShape::split),
//   a multiple of kAttnKvTile: logical positions, never a function of the step.
// - Where an item's splits run (one CTA folding them in order, or one CTA per split with the
//   merge kernel folding the saved states in the same order) is a choice of place only: both
//   paths run the same operations on every row. The plan puts a split on its own CTA only
//   for a sequence with one row in the step (a decode) while partial slots remain, and only
//   where the step's decodes are too few to fill the per-split launch's CTAs with whole rows
//   (decode_rows_fold); everything else folds in one CTA: a decode in the per-split kernel
//   (AttentionShape::decode_fold_ctas), any other row in a folding CTA.
// Thread safety: plan_attention is a pure function of its arguments.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/status.h"

namespace vosti {

inline constexpr int kAttnKvTile = 64;      // KV positions per tile (deployment constant)
inline constexpr int kAttnRowsPerCta = 64;  // query rows (position x head of the group) per CTA
// KV positions per split unless the deployment says otherwise. 1,024 (512 until 2026-12-03): on
// the H200, decode 64 x 2,048 at 84-86% of copy cut per split (89% since the decode kernel folds
// the splits of enough decodes; 2,048 gave 89-92% cut but one sequence's decode attention 1.5x
// slower at 2,048-8,192 positions), 1 x 32,768 at 61-62%, and an 8 x 1,024 prefill's items in one
// split (docs/BENCHMARKS.md, issue 19).
inline constexpr int kAttnDefaultSplit = 1024;

struct AttentionShape {
  int num_heads = 0;     // query heads
  int num_kv_heads = 0;  // a divisor of num_heads; group = num_heads / num_kv_heads <= kAttnRowsPerCta
  int head_dim = 0;
  int split = kAttnDefaultSplit;  // KV positions per split: a positive multiple of kAttnKvTile
  // Rows of a CTA that folds its splits: kAttnRowsPerCta or twice it (two m16 blocks per warp,
  // the K/V fragments loaded once for both). Where a row is computed, never how.
  int folded_rows = kAttnRowsPerCta;
  int window = 0;  // the model's sliding window (attention.h): 0 = none
  // CTAs a KV head that the per-split launch runs at once where its kernel folds a decode row's
  // splits itself (attention_decode_fits); 0: it does not, and decode rows are cut per split.
  int decode_fold_ctas = 0;
  int group() const { return num_heads / num_kv_heads; }
};

// One CTA's rows (for each KV head: grid.y) and splits. Plain data copied to the device.
struct AttentionWork {
  int32_t seq = 0;             // row of the block-table matrix
  int32_t first_row = 0;       // query row of first_position; position first_position + i is row first_row + i
  int32_t first_position = 0;  // logical position of the first query
  int32_t num_positions = 0;   // 1 .. (kAttnRowsPerCta or folded_rows) / group
  int32_t split_begin = 0;     // the splits [split_begin, split_end) this CTA computes, in order (a row's
                               // first split is floor(f / split): 0 without a sliding window)
  int32_t split_end = 0;
  int32_t partial = -1;  // -1: fold the splits and write the output; >= 0: (one position, one split) save the
                         // split's state in partial slot `partial`
};
// AttentionPlan::per_split holds three kinds of items: one split of a decode row (partial >= 0),
// a decode row of one split, and a decode row whose splits the per-split kernel folds in order
// (partial -1, decode_fold_ctas > 0).
static_assert(sizeof(AttentionWork) == 28, "AttentionWork is copied to the device as 7 int32");

// One decode row whose splits ran on separate CTAs: the merge kernel folds slots
// first_partial .. first_partial + num_splits - 1 in order into the row's output.
struct AttentionMerge {
  int32_t row = 0;
  int32_t first_partial = 0;
  int32_t num_splits = 0;
};
static_assert(sizeof(AttentionMerge) == 12, "AttentionMerge is copied to the device as 3 int32");

struct AttentionPlan {
  // Items whose CTA folds all their splits: the num_folded_one_split items of one split first;
  // in each part the items with the most KV tiles first (each item is a CTA of its own, and
  // the hardware hands the next one to whichever SM is free: the longest start first).
  std::vector<AttentionWork> folded;
  int32_t num_folded_one_split = 0;
  std::vector<AttentionWork> per_split;  // decode rows: one split each (partial >= 0), or whole (partial -1)
  std::vector<AttentionMerge> merges;
  int32_t num_partials = 0;       // partial slots used
  int split = kAttnDefaultSplit;  // the split the plan was made for
  int folded_rows = kAttnRowsPerCta;
  int window = 0;             // the sliding window the plan was made for
  bool decode_folds = false;  // per_split holds decode rows of several splits (attention_decode_rows_fold)
  void clear() {
    decode_folds = false;
    folded.clear();
    num_folded_one_split = 0;
    per_split.clear();
    merges.clear();
    num_partials = 0;
  }
};

// Number of splits of a query at position p: floor(p / split) + 1.
inline int32_t attention_num_splits(int32_t position, int split) { return position / split + 1; }

// Plans the step whose query rows have positions[r] and sequences row_seq[r] (a run of
// adjacent rows of one sequence at consecutive positions shares items; a negative position
// marks a padding row, which gets no work). partial_capacity: partial slots available. Fills
// *plan (cleared first; its vectors keep their capacity, so a runner's step allocates nothing
// once warm). Errors: kInvalidArgument / kUnimplemented for a bad shape or split.
Status plan_attention(std::span<const int32_t> positions, std::span<const int32_t> row_seq, const AttentionShape& shape,
                      int32_t partial_capacity, AttentionPlan* plan);

// Whether the two-block kernel (folded_rows 2 kAttnRowsPerCta) runs for a deployment: head_dim
// <= 128 and a power-of-two block size of head_dim / 16 to 64 positions (its loader copies
// head_dim / 16 consecutive positions a thread from one page).
bool attention_two_blocks_fit(int head_dim, int block_size);

// The rows of a folding CTA (AttentionShape::folded_rows) for a step of `positions` query
// positions (tokens) on a device of `sms` SMs with KV blocks of block_size positions, `wgmma`:
// the device runs wgmma (sm_90). 2 kAttnRowsPerCta where attention_two_blocks_fit and either
// the device runs the wgmma kernel for head_dim (64, 128) or the step fills at least 4 of the
// two-block kernel's CTAs an SM; kAttnRowsPerCta otherwise. A choice of place only: rows per
// CTA never enter a row's arithmetic. (H200, 32 heads of 128, split 512, 64 / 128 rows: mma.sync
// 1,024 tokens 84 / 110 us, 2,048 223 / 214, 8 x 1,024 507 / 443; wgmma at 128 rows 67, 167, 398:
// docs/BENCHMARKS.md.)
int attention_folded_rows(const AttentionShape& shape, int block_size, int64_t positions, int sms, bool wgmma);

// Whether the per-split items run attention_decode_kernel (which folds a decode row's splits in
// order where an item holds several): a KV head's rows in one m16 block (group <= 16), head_dim
// 64, 128 or 256, and a power-of-two block size of head_dim / 16 to 64 positions (its loader
// copies head_dim / 16 consecutive positions a thread from one page). Otherwise the streaming
// kernel's one-split form runs them.
bool attention_decode_fits(int head_dim, int group, int block_size);

// Whether the step's decode rows fold their splits in the per-split kernel rather than split
// across CTAs: where shape.decode_fold_ctas > 0, some decode row has several splits, and the
// longest decode's tiles times decode_fold_ctas is at most all decodes' tiles (each CTA then gets
// at least one whole row's work, so no merge is needed to keep the CTAs busy). A choice of place.
bool attention_decode_rows_fold(std::span<const int32_t> positions, std::span<const int32_t> row_seq,
                                const AttentionShape& shape);

// Checks a shape for the tensor-core family: heads, group, head_dim in kAttnHeadDims, split,
// window >= 0.
Status check_attention_shape(const AttentionShape& shape);

// The head dimensions the tensor-core family is instantiated for.
inline constexpr int kAttnHeadDims[] = {16, 32, 64, 128, 256};

}  // namespace vosti
