// Paged attention on the GPU over the device KV pool: kv_write stores a step's K/V rows into
// their cache slots (rounded once to the pool's dtype), then attention() runs every query
// over logical positions 0..p of its own sequence, read back through that sequence's block
// table (DESIGN.md rule 4).
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
// Reduction order of attention (fixed; depends only on the query's own q, its own position p,
// its block table and the cache; never on the query's row, the row count m, the chunk the
// query came in, its sequence's index or other queries). One warp per (query, head); head h
// reads kv head h / (num_heads / num_kv_heads). KV tiles t = 0, 1, ..., floor(p / kKvTile)
// cover logical positions [t*kKvTile, (t+1)*kKvTile), kKvTile = 32 = the warp width; in tile t:
//   lane l owns position j = t*32 + l; if j <= p:
//     s_j = (fma chain over d = 0, 1, ..., head_dim-1 from +0: s = fma(q[d], k_j[d], s)) * scale
//     (one rounded multiply; k_j[d] widened exactly from the pool dtype); lanes with j > p hold
//     no score and read nothing;
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
// kv_write has no arithmetic but the one rounding to the pool dtype.
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

struct AttentionArgs {
  const float* q = nullptr;  // [m, q_row_stride] f32, device: head h of row r at q + r * q_row_stride + h * head_dim
  int64_t q_row_stride = 0;
  int num_heads = 0;                            // a multiple of kv.num_kv_heads
  const int32_t* positions = nullptr;           // [m] device: query r attends over logical positions 0..positions[r]
  const int32_t* row_seq = nullptr;             // [m] device: the sequence of query r
  const int32_t* block_tables = nullptr;        // [num_seqs, *block_table_stride] device
  const int32_t* block_table_stride = nullptr;  // device scalar
  float scale = 1.0f;                           // multiplies q.k (1 / sqrt(head_dim))
  void* out =
      nullptr;  // [m, out_row_stride] out_dtype, device: head h of row r at out + r * out_row_stride + h * head_dim
  int64_t out_row_stride = 0;
  DType out_dtype = DType::kF32;  // kF32 or kBF16
  int64_t m = 0;
};

// out = softmax(q k^T * scale) v per (query, head), in the order documented above. Columns of
// an out row past num_heads * head_dim are not written. A query with a negative position gets
// a row of NaN (padding rows).
// REQUIRES: block table entries covering 0..p of each query are blocks < kv.num_blocks (not
// checked on the device); the step's K/V written (kv_write) before the call on the stream.
// Errors: kInvalidArgument for null pointers, m < 0, head_dim not a multiple of 4 or above
// kMaxCudaHeadDim, num_heads not a multiple of num_kv_heads, strides too small, an
// unsupported dtype; kInternal for a launch failure.
Status attention(const AttentionArgs& args, CudaKvLayer kv, cudaStream_t stream);

}  // namespace vosti
