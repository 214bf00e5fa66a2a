// The mixture-of-experts kernels of the CUDA forward (model/cuda/cuda_model.h runs them where a
// layer's LayerSpec::moe is enabled): routing, the permutation of the token rows by expert, the
// grouped expert GEMM and the combine. The CPU twin and the layer's contract: model/moe_layer.h.
//
// Order, fixed by the deployment (model, device kind) alone, never by the batch:
//   0. Router logits [T, E] (f32): the batch-invariant GEMM (gemm_bf16.h) of the normed rows.
//   1. moe_route: per token, from its own logits row only, in one thread: m = max over e ascending
//      (m < l ? l : m), p_e = expf(l_e - m), s = sum of p_e over e ascending (f32 adds, no FMA),
//      p_e = p_e / s; top-k by k scans over e ascending with a strict > (ties to the lowest expert
//      index; a taken expert's p set to -1); where norm_topk_prob the k weights are divided by their
//      sum taken in rank order (largest first); then the k (expert, weight) pairs sorted by
//      ascending expert. (moe_layer.h's route_token, operation for operation; expf for exp_f32, so
//      the bits may differ from the CPU's, the order does not.)
//   2. moe_permute: integer only. Entry i = t * k + r (token t, slot r) goes to row
//      pos[i] = offset[e] + (number of entries j < i with expert e), offset = the exclusive scan of
//      the per-expert counts in expert order: expert e's rows are its tokens in ascending token
//      order. One CTA, no atomics. Also the tile list of the grouped GEMM: expert e's rows cut into
//      ceil(count_e / block_m) m-tiles, in expert order then row order.
//   3. moe_gather: x_perm[pos[i]] = h[t] (bf16 rows, copied).
//   4. moe_grouped_gemm: y_perm[p, :] = x_perm[p, :] * W[e]^T for the rows p of expert e: per
//      output element one chain of mma.sync m16n8k16 steps over all of k in increasing k order from
//      a zero f32 accumulator, then one rounding to the output dtype. No split-K, no atomics. The tile
//      (block_m, the warps) is a function of the weight shape (select_moe_gemm_schedule), never of a
//      count; the tensor core computes an element from its own row of x and row of W only, so a
//      row's bits do not depend on its position in the permuted buffer, on its place in its m-tile
//      or on how many rows share its expert. The grid is the upper bound of m-tiles
//      (moe_max_tiles of the step's T, a host value) times the n-tiles; a CTA past the real tile
//      count (a device scalar) exits. A tile always computes block_m rows (the rows past its count
//      are the next expert's or scratch, and are stored to scratch rows): the count reaches only
//      addresses, never a mask of the arithmetic.
//   5. The layer's activation on the permuted rows (row_kernels.h gated_mul), then the down
//      projection by moe_grouped_gemm.
//   6. moe_combine: out[t, c] = +0.0, then for the token's slots r = 0..k-1 (ascending expert)
//      out = out + (y_perm[pos[t * k + r], c] * w[t, r]): one f32 multiply, then one f32 add, each
//      rounded (__fmul_rn, __fadd_rn: no fused multiply-add). f32 out, as the dense MLP's down
//      projection (the next add_rms_norm adds it to the residual stream).
// Nothing reads the token count, a row's index or another row to choose an order or a tile: T and
// the counts appear only in grid sizes, loop bounds over whole rows and predicates.
// Thread safety: stateless; buffers belong to one stream.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "core/dtype.h"
#include "core/status.h"

namespace vosti {

inline constexpr int kMaxMoeExperts = 256;  // the route and permute kernels' per-thread and shared arrays
inline constexpr int kMaxMoeTopK = 16;

// One m-tile of the grouped GEMM: rows [row0, row_end) of the permuted buffer are expert's; the
// expert's rows start at expert_row0 (row_end - expert_row0 is its count).
struct MoeTile {
  int32_t expert;
  int32_t row0;
  int32_t row_end;
  int32_t expert_row0;
};

// The grouped GEMM's arithmetic and tile for one expert weight shape [n, k]: fixed at load.
struct MoeGemmSchedule {
  int64_t n = 0;
  int64_t k = 0;
  int num_k_blocks = 0;  // k / 64
  int block_m = 64;      // rows of an m-tile (moe_permute's tile list uses it)
};

// The schedule of expert weights [n, k]: block_m 64 for every shape (a function of (n, k) only).
// Errors: kInvalidArgument unless n > 0, n % 8 == 0 and k a positive multiple of 64.
Result<MoeGemmSchedule> select_moe_gemm_schedule(int64_t n, int64_t k);

// The tile-list capacity for `entries` = T * top_k routed rows: sum_e ceil(n_e / block_m) <=
// ceil(entries / block_m) + min(num_experts, entries).
int64_t moe_max_tiles(int64_t entries, int64_t num_experts, int block_m);

// Step 1: experts [T, top_k] (ascending per token) and weights [T, top_k] from logits [T, ld] (the
// first num_experts columns). Where routed != nullptr, each token's experts are also written to
// routed[t * routed_stride + routed_offset + r] (the step's [T, MoE layers, top_k] record).
struct MoeRouteArgs {
  const float* logits = nullptr;
  int64_t ld = 0;
  int64_t num_tokens = 0;
  int num_experts = 0;
  int top_k = 0;
  bool norm_topk_prob = false;
  int32_t* experts = nullptr;
  float* weights = nullptr;
  int32_t* routed = nullptr;
  int64_t routed_stride = 0;
  int64_t routed_offset = 0;
};
Status moe_route(const MoeRouteArgs& args, cudaStream_t stream);

// Step 2: pos [T * top_k], src_token [T * top_k] (the token of each permuted row), tiles
// [max_tiles] and num_tiles (device scalar) from experts [T, top_k].
// REQUIRES: max_tiles >= moe_max_tiles(T * top_k, num_experts, block_m).
struct MoePermuteArgs {
  const int32_t* experts = nullptr;
  int64_t num_entries = 0;  // T * top_k
  int top_k = 0;
  int num_experts = 0;
  int block_m = 0;
  int32_t* pos = nullptr;
  int32_t* src_token = nullptr;
  MoeTile* tiles = nullptr;
  int32_t* num_tiles = nullptr;
  int64_t max_tiles = 0;
};
Status moe_permute(const MoePermuteArgs& args, cudaStream_t stream);

// Step 3: x_perm [num_entries, hidden] bf16 rows = h[src_token[p]].
Status moe_gather(const uint16_t* h, const int32_t* src_token, int64_t num_entries, int64_t hidden, uint16_t* x_perm,
                  cudaStream_t stream);

// Step 4: y [rows, n] (out_dtype: f32 or bf16) = x [rows, k] (bf16) times each tile's expert's w
// [num_experts, n, k] (bf16, stacked), for the tiles of the list. REQUIRES: x and y hold
// moe_rows_with_scratch(entries, block_m) rows, scratch_row >= entries.
struct MoeGroupedGemmArgs {
  const uint16_t* x = nullptr;
  const uint16_t* w = nullptr;
  void* y = nullptr;
  DType out_dtype = DType::kF32;
  const MoeTile* tiles = nullptr;
  const int32_t* num_tiles = nullptr;
  int64_t max_tiles = 0;  // the grid (moe_max_tiles of the step's entries)
  // The first of block_m scratch rows of y, past every tile's rows (the step's entries or more): a
  // tile computes block_m rows and stores those past its count there. x holds block_m rows past
  // the last tile's first row (moe_rows_with_scratch).
  int64_t scratch_row = 0;
};
// Rows of a permuted buffer (x, the activations, y) for `entries` routed rows: the entries and
// block_m rows of scratch.
inline int64_t moe_rows_with_scratch(int64_t entries, int block_m) { return entries + block_m; }
Status moe_grouped_gemm(const MoeGemmSchedule& schedule, const MoeGroupedGemmArgs& args, cudaStream_t stream);

// Step 6: out [T, hidden] f32 from y_perm [T * top_k, hidden] f32, pos and weights [T, top_k].
Status moe_combine(const float* y_perm, const int32_t* pos, const float* weights, int64_t num_tokens, int top_k,
                   int64_t hidden, float* out, cudaStream_t stream);

}  // namespace vosti
