// Paged attention on the GPU: kv_write stores a step's K/V rows into their cache slots,
// then attention() runs every query over logical positions 0..p of its own sequence,
// read back through the paged cache (DESIGN.md rule 4). KV cache f32, layout of
// kernels/ref/paged_kv.h: k and v are [num_blocks, block_size, num_kv_heads, head_dim];
// logical position j lives in block block_table[j / block_size] at offset j % block_size.
// PagedKvView's pointers are device pointers here.
//
// Reduction order of attention (fixed; depends only on the query's own q, its own
// position p, its block table and the cache; never on the query's index, the row count m,
// the chunk a query came in or other queries). One warp per (query, head); head h reads
// kv head h / (num_heads / num_kv_heads). KV tiles t = 0, 1, ..., floor(p / kKvTile) cover
// logical positions [t*kKvTile, (t+1)*kKvTile), kKvTile = 32 = the warp width; in tile t:
//   lane l owns position j = t*32 + l; if j <= p:
//     s_j = (fma chain over d = 0, 1, ..., head_dim-1 from +0: s = fma(q[d], k_j[d], s)) * scale
//     (one rounded multiply); lanes with j > p hold no score and read nothing;
//   m_t = max of the s_j (butterfly __shfl_xor max, offsets 16, 8, 4, 2, 1; max is exact);
//   M' = max(M, m_t) (M = -inf before tile 0); p_j = expf(s_j - M') for j <= p, +0 otherwise;
//   S_t = butterfly sum of the p_j, __shfl_xor offsets 16, 8, 4, 2, 1 (identical in all lanes);
//   alpha = expf(M - M') (0 for tile 0); L = L * alpha + S_t (rounded multiply, then add);
//   lane l owns output elements d = l, l + 32, ... < head_dim: O[d] = O[d] * alpha, then
//     O[d] = fma(p_j, v_j[d], O[d]) for j = t*32, t*32 + 1, ..., min(t*32 + 31, p) in order;
//   M = M'.
// Finally out[d] = O[d] / L (one IEEE division), rounded once to the output dtype.
// Every operation is an explicitly rounded intrinsic (no contraction left to the compiler).
// The number of tiles and the masked tail depend on p alone: the query's own position.
// kv_write has no arithmetic (a copy).
// Thread safety: stateless; calls are enqueued on the given stream.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "core/dtype.h"
#include "core/status.h"
#include "kernels/kernel_backend.h"

namespace vosti {

// Largest head_dim attention() supports (q is staged in shared memory per warp).
inline constexpr int kMaxCudaHeadDim = 256;

// Copies k_new/v_new rows r < m (row r at k_new + r * row_stride: [num_kv_heads, head_dim]
// f32) into cache slot slots[r] (slot = block * block_size + offset). A negative slot marks
// a padding row, which is skipped; a slot >= num_blocks * block_size is skipped too (never
// written out of bounds). REQUIRES: device pointers; row_stride >= num_kv_heads * head_dim.
Status kv_write(const float* k_new, const float* v_new, int64_t row_stride, int64_t m, const int64_t* slots,
                PagedKvView kv, cudaStream_t stream);

struct AttentionArgs {
  const float* q = nullptr;  // [m, q_row_stride] f32, device: head h of row r at q + r * q_row_stride + h * head_dim
  int64_t q_row_stride = 0;
  int num_heads = 0;                      // a multiple of kv.num_kv_heads
  const int32_t* positions = nullptr;     // [m] device: query r attends over logical positions 0..positions[r]
  const int32_t* block_tables = nullptr;  // [m, block_table_stride] device; stride 0: every query reads one table
  int64_t block_table_stride = 0;
  float scale = 1.0f;  // multiplies q.k (1 / sqrt(head_dim))
  void* out =
      nullptr;  // [m, out_row_stride] out_dtype, device: head h of row r at out + r * out_row_stride + h * head_dim
  int64_t out_row_stride = 0;
  DType out_dtype = DType::kF32;  // kF32 or kBF16
  int64_t m = 0;
};

// out = softmax(q k^T * scale) v per (query, head), in the order documented above. Columns of
// an out row past num_heads * head_dim are not written. A query with a negative position gets
// a row of NaN.
// REQUIRES: block table entries covering 0..p of each query are blocks < kv.num_blocks (not
// checked on the device); the step's K/V written (kv_write) before the call on the stream.
// Errors: kInvalidArgument for null pointers, m < 0, head_dim not a multiple of 4 or above
// kMaxCudaHeadDim, num_heads not a multiple of num_kv_heads, strides too small, an
// unsupported out_dtype; kInternal for a launch failure.
Status attention(const AttentionArgs& args, PagedKvView kv, cudaStream_t stream);

}  // namespace vosti
