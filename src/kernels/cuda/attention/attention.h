// Paged attention on the GPU over the device KV pool: kv_write stores a step's K/V rows into
// their cache slots (rounded once to the pool's dtype), then attention() runs every query
// over logical positions f..p of its own sequence, read back through that sequence's block
// table (DESIGN.md rule 4). f = 0, or under a sliding window of W positions (AttentionArgs::
// window, a constant of the model) f = max(0, p - W + 1): a function of p alone.
//
// Pool layout of one layer (CudaKvLayer): k and v are [num_blocks, num_kv_heads, block_size,
// head_dim] of the pool dtype (bf16 or f32): a (block, head) page is block_size * head_dim
// contiguous elements. Logical position j of a sequence lives in block table[j / block_size]
// at offset j % block_size; slot = block * block_size + offset.
// Batch description (the runner's step buffer, all device memory): per query row r its
// position positions[r] and its sequence row_seq[r]; per sequence s its block table at
// block_tables + s * (*block_table_stride). The stride is read on the device, so a CUDA graph
// captured once serves steps whose tables have other widths.
//
// Two kernel families compute attention; which one runs is a function of the deployment alone
// (the pool dtype, head_dim and group size: tensor_core_attention()), never of the step.
//
// 1. The tensor-core family (attention_mma_tile.cuh and the kernels beside it; bf16 pools, head_dim 16/32/64/128/256,
// at most
//    kAttnRowsPerCta query heads per KV head). Its launch plan (attention_plan.h) packs the
//    query heads of one KV head group into the rows of mma.sync.m16n8k16 tiles (and, in the
//    128-row CTAs on sm_90a at head_dim 64 and 128, of wgmma m64nNk16 tiles: each k16 step
//    gives each element the bits mma.sync's gives it, wgmma_ptx.cuh). For one query
//    row (position p, head h, KV head h / group) the operations are, whatever rows share its
//    CTA, warp or mma, and whichever CTA computes it:
//   q = bf16(q_f32) elementwise (round to nearest even); c = scale * log2(e) (one f32 product,
//   host); KV tiles t = floor(f / 64) .. floor(p / 64) cover positions [64t, 64t + 64); split s
//   covers the tiles of positions [s * split, (s + 1) * split) (split: AttentionShape, a
//   multiple of 64); the row's splits are floor(f / split) .. floor(p / split).
//   Per split, from M = -inf, l = 0, O = +0 (l is held as 4 partial sums, one per column class
//   below), for each tile t of the split that the row visits, in increasing t:
//     x_j = mma chain over d in steps of 16 (k = 0, 16, ...: D = A*B + D from +0) of q . k_j,
//       j in the tile (the tensor core's k16 step as a function of its operands); x_j = -inf
//       for j > p (only in tile floor(p / 64); those K rows hold whatever their page holds) and
//       for j < f (only in tile floor(f / 64); positions of the sequence, whose K/V are
//       written): every visited tile holds at least one position f <= j <= p;
//     mx = max_j x_j (exact); M' = max(M, mx); alpha = ex2((M - M') * c) (rounded subtract,
//       rounded multiply, ex2.approx.ftz; 0 when M = -inf); m' = M' * c (rounded);
//     p_j = ex2(fma(x_j, c, -m')) (one rounding, then ex2.approx.ftz; exactly +0 for x_j = -inf);
//     column class k = (j mod 8) / 2 of the row (the mma lane holding j); for each class
//       l_k = l_k * alpha + sum_k, sum_k = ((0 + p_j0) + p_j1) + ... over the class's j in
//       increasing j (rounded adds, rounded multiply);
//     O[d] = O[d] * alpha (rounded; skipped where the row's alpha = 1, a decision of the row
//       alone: O * 1 = O for every O but a NaN, which stays a NaN), then O[d] = mma chain
//       over j in steps of 16 (j = 64t, 64t + 16, ...) of bf16(p_j) * v_j[d] accumulated into
//       O[d] (v_j = +0 past the last position of the rows the CTA computes with it: each
//       masked term is an exact zero);
//     M = M'.
//   End of split: L = (l_0 + l_1) + (l_2 + l_3) (the lane butterfly: the same value in every
//   lane). The split states (M_s, L_s, O_s) of splits 0 .. n-1 fold left to right:
//     A = state 0; for s = 1 .. n-1: M* = max(A.M, M_s); a = ex2((A.M - M*) * c);
//     b = ex2((M_s - M*) * c); A.L = A.L * a + L_s * b; A.O[d] = A.O[d] * a + O_s[d] * b
//     (each product rounded, then one rounded add); A.M = M*.
//   out[d] = A.O[d] / A.L (the correctly rounded f32 quotient, as one IEEE division; computed
//   without a branch an element, attention_mma_tile.cuh's divide_row), rounded once to the output
//   dtype. One CTA folds
//   the splits in registers and shared memory (a folding CTA, or the decode kernel for a decode
//   row the plan keeps whole), or each split runs on its own CTA and saves its state (exact f32
//   values) for the merge kernel, which folds the same way: the same values.
//   The tiles a row visits, its masked positions and its split cuts depend on p (and W) alone.
//
// 2. The per-query family (attention_per_query.cu; every other deployment, f32 pools among them), one CTA
//    per (query, head) on CUDA cores. Reduction order (fixed; depends only on the query's own
//    q, its own position p, its block table and the cache; never on the query's row, the row
//    count m, the chunk the query came in, its sequence's index or other queries). Head h
//    reads kv head h / (num_heads / num_kv_heads). KV tiles t = floor(f / kKvTile), ...,
//    floor(p / kKvTile) cover logical positions [t*kKvTile, (t+1)*kKvTile), kKvTile = 32 = the
//    warp width; in tile t:
//   lane l owns position j = t*32 + l; if f <= j <= p:
//     s_j = (fma chain over d = 0, 1, ..., head_dim-1 from +0: s = fma(q[d], k_j[d], s)) * scale
//     (one rounded multiply; k_j[d] widened exactly from the pool dtype); other lanes hold
//     no score (-inf) and read nothing;
//   m_t = max of the s_j (butterfly __shfl_xor max, offsets 16, 8, 4, 2, 1; max is exact);
//   M' = max(M, m_t) (M = -inf before the first tile); p_j = expf(s_j - M') for f <= j <= p, +0
//   otherwise;
//   S_t = butterfly sum of the p_j, __shfl_xor offsets 16, 8, 4, 2, 1 (identical in all lanes);
//   alpha = expf(M - M') (0 for the first tile); L = L * alpha + S_t (rounded multiply, then add);
//   lane l owns output elements d = l, l + 32, ... < head_dim: O[d] = O[d] * alpha, then
//     O[d] = fma(p_j, v_j[d], O[d]) for j = max(t*32, f), ..., min(t*32 + 31, p) in order;
//   M = M'.
//   Finally out[d] = O[d] / L (one IEEE division), rounded once to the output dtype.
// Every operation of both families is an explicitly rounded intrinsic or one named PTX
// instruction (no contraction left to the compiler).
// kv_write has no arithmetic but the one rounding to the pool dtype.
// Thread safety: stateless; calls are enqueued on the given stream.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "core/dtype.h"
#include "core/status.h"
#include "kernels/cuda/attention/attention_plan.h"
#include "kernels/kernel_backend.h"

namespace vosti {

// Largest head_dim attention() supports (q is staged in shared memory per warp).
inline constexpr int kMaxCudaHeadDim = 256;

// One layer of the device KV pool (see the layout above). dtype: kBF16 or kF32.
struct CudaKvLayer {
  void* k = nullptr;
  void* v = nullptr;
  DType dtype = DType::kBF16;
  int64_t num_blocks = 0;
  int block_size = 0;
  int num_kv_heads = 0;
  int head_dim = 0;
};

// Bytes of one (K or V) element of the pool.
inline size_t kv_element_bytes(DType dtype) { return dtype == DType::kF32 ? 4 : 2; }

// Copies k_new/v_new rows r < m (row r at k_new + r * row_stride: [num_kv_heads, head_dim]
// f32) into cache slot slots[r], rounded to the pool dtype. A negative slot marks a padding
// row, which is skipped; a slot >= num_blocks * block_size is skipped too (never written out
// of bounds). REQUIRES: device pointers; row_stride >= num_kv_heads * head_dim.
Status kv_write(const float* k_new, const float* v_new, int64_t row_stride, int64_t m, const int32_t* slots,
                CudaKvLayer kv, cudaStream_t stream);

// Device copies of an AttentionPlan (attention_plan.h) and the partial workspace: what the
// tensor-core family reads. Counts the kernels read on the device are device scalars, so a CUDA
// graph captured once serves later steps; the host values size the grids.
struct AttentionWorkView {
  const AttentionWork* folded = nullptr;     // [num_folded] device, the one-split items first
  int32_t num_folded = 0;                    // host (eager launches only: the launch's item count)
  int32_t num_folded_one_split = 0;          // host
  int folded_rows = kAttnRowsPerCta;         // rows of a folding CTA (AttentionShape::folded_rows)
  const AttentionWork* per_split = nullptr;  // [*num_per_split] device
  const int32_t* num_per_split = nullptr;    // device scalar
  int32_t per_split_grid = 0;                // host: CTA rows launched; each strides over the items
  bool per_split_folds = false;              // host: some per-split item folds its splits (AttentionPlan::decode_folds)
  const AttentionMerge* merges = nullptr;    // [*num_merges] device
  const int32_t* num_merges = nullptr;       // device scalar
  int32_t merge_grid = 0;                    // host: CTAs launched (>= *num_merges)
  float* partials = nullptr;                 // [partial_capacity, num_heads, head_dim + 2] f32 device: O, then M and L
  int32_t partial_capacity = 0;
  int split = kAttnDefaultSplit;  // the deployment's KV split (attention_plan.h)
  int window = 0;                 // the sliding window the plan was made for (AttentionArgs::window)
};

// Where a plan's arrays and the split states are in device memory (the runner's step buffer; a
// test's own buffers): counts [4] = (per_split, merges, folded, partials) as
// attention_plan_counts() writes them, then the arrays as AttentionPlan holds them.
struct AttentionPlanDevice {
  const int32_t* counts = nullptr;
  const AttentionMerge* merges = nullptr;
  const AttentionWork* folded = nullptr;
  const AttentionWork* per_split = nullptr;
  float* partials = nullptr;  // [partial_capacity, num_heads, head_dim + 2]
  int32_t partial_capacity = 0;
};

// The four counts the kernels read on the device (per_split, merges, folded, partials).
void attention_plan_counts(const AttentionPlan& plan, int32_t (&counts)[4]);

// The view of `plan`, copied to `at`, for eager launches (one CTA row per item, which the
// launcher caps at the CTAs that fit at once).
AttentionWorkView attention_eager_view(const AttentionPlan& plan, const AttentionPlanDevice& at);

// The view a CUDA graph captures for steps of up to num_rows single-row sequences under the
// deployment's split and window: grids fixed by num_rows, the kernels reading the step's counts on
// the device; per_split_ctas is the per-split launch's CTA rows. REQUIRES: every step replayed
// with it has no folded items, at most num_rows merges, and folds decode rows in the per-split
// kernel only where attention_decode_fits.
AttentionWorkView attention_graph_view(const AttentionPlanDevice& at, int split, int window, int64_t num_rows,
                                       int32_t per_split_ctas);

// Floats of one partial slot: num_heads * (head_dim + 2).
inline int64_t attention_partial_floats(int num_heads, int head_dim) {
  return static_cast<int64_t>(num_heads) * (head_dim + 2);
}

struct AttentionKernels;  // attention_kernels.h

struct AttentionArgs {
  const float* q = nullptr;  // [m, q_row_stride] f32, device: head h of row r at q + r * q_row_stride + h * head_dim
  int64_t q_row_stride = 0;
  int num_heads = 0;                            // a multiple of kv.num_kv_heads
  const int32_t* positions = nullptr;           // [m] device: query r attends over logical positions 0..positions[r]
  const int32_t* row_seq = nullptr;             // [m] device: the sequence of query r
  const int32_t* block_tables = nullptr;        // [num_seqs, *block_table_stride] device
  const int32_t* block_table_stride = nullptr;  // device scalar
  float scale = 1.0f;                           // multiplies q.k (1 / sqrt(head_dim))
  int window = 0;  // sliding window (the model's, a deployment constant): query at p reads p - window + 1..p; 0: 0..p
  void* out =
      nullptr;  // [m, out_row_stride] out_dtype, device: head h of row r at out + r * out_row_stride + h * head_dim
  int64_t out_row_stride = 0;
  DType out_dtype = DType::kF32;  // kF32 or kBF16
  int64_t m = 0;
  AttentionWorkView work;  // the tensor-core family's plan (the per-query family reads positions and row_seq)
  // The tensor-core family's kernels for this head_dim on this device (prepare_attention_kernels,
  // once per model; the per-query family needs that call too, for its shared-memory limits).
  const AttentionKernels* kernels = nullptr;
};

// Whether the deployment (pool dtype, head_dim, group) runs the tensor-core family.
bool tensor_core_attention(const CudaKvLayer& kv, int num_heads);

// out = softmax(q k^T * scale) v per (query, head), by the family the deployment selects, in
// the order documented above. Columns of an out row past num_heads * head_dim are not
// written. Rows the plan gives no work (padding rows) are not written by the tensor-core
// family; the per-query family writes NaN to rows with a negative position.
// REQUIRES: block table entries covering 0..p of each query are blocks < kv.num_blocks (not
// checked on the device); the step's K/V written (kv_write) before the call on the stream; for
// the tensor-core family, args.work a device copy of plan_attention() over these rows with
// the same split, and enough partial slots.
// Errors: kInvalidArgument for null pointers, m < 0, head_dim not a multiple of 4 or above
// kMaxCudaHeadDim, num_heads not a multiple of num_kv_heads, strides too small, an
// unsupported dtype, a missing plan, a negative window or one that differs from the plan's;
// kInternal for a launch failure.
Status attention(const AttentionArgs& args, CudaKvLayer kv, cudaStream_t stream);

// The two families by name (tests and benchmarks compare them; attention() picks one).
Status attention_per_query(const AttentionArgs& args, CudaKvLayer kv, cudaStream_t stream);
Status attention_tensor_cores(const AttentionArgs& args, CudaKvLayer kv, cudaStream_t stream);

}  // namespace vosti
