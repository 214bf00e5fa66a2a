// Paged attention of (query token, head) pairs on the CPU, AVX2/FMA.
//
// Reduction order (fixed; depends only on the token's position p, its first position f (0,
// or the start of its sliding window: a function of p) and its own KV):
// KV tiles t = floor(f / kKvTile), ..., floor(p / kKvTile) cover logical positions
// [max(t*kKvTile, f), min((t+1)*kKvTile, p+1)); inside tile t, in increasing position j:
//   s_j = lane-8 dot(q, k_j) (simd_avx2.h) * scale;   m_t = max_j s_j;
//   M' = max(M, m_t) (M' = m_t for the first tile); p_j = exp(s_j - M');
//   S_t = lane-8 sum of the p_j: lanes l accumulate p_{8b+l} over full 8-blocks b in
//         increasing b (+0 start), hsum8's tree, then the tail j in increasing order;
//   first tile: L = S_t, O[i] = +0;  later tiles: alpha = exp(M - M'), L = L*alpha + S_t, O[i] = O[i]*alpha;
//   then O[i] = fma(p_j, v_j[i], O[i]) for j in increasing order; M = M'.
// Finally out[i] = O[i] / L. Tiles sit at fixed logical positions, so the physical
// block layout, the block size, the chunking of the prompt and the other queries of
// the batch never change the arithmetic.
// exp is exp_f32 (scalar_math.h), computed 8 lanes at a time by exp_lane8 (same bits).
// Thread safety: pure function; callers give each (token, head) pair to one thread.
#pragma once

#include <cstdint>

#include "kernels/kernel_backend.h"

namespace vosti {

// Largest head_dim and number of query heads per call the CPU attention supports
// (its accumulators are on the stack).
inline constexpr int kMaxCpuHeadDim = 512;
inline constexpr int kMaxCpuGroupHeads = 8;

// out[g, :] = attention of q[g, :] over the query's positions first..position in kv head kv_head,
// for g in [0, num_group_heads): heads that share one kv head, computed together so each
// K/V tile is read once; each head's arithmetic is exactly the single-head order above.
// REQUIRES: kv.head_dim <= kMaxCpuHeadDim; 1 <= num_group_heads <= kMaxCpuGroupHeads;
// 0 <= query.first <= query.position; the block table covers position.
void attention_group_avx2(const float* q, int num_group_heads, const AttentionQuery& query, const PagedKvView& kv,
                          int kv_head, float scale, float* out);

}  // namespace vosti
