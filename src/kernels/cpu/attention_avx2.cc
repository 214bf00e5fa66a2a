// Tiled online-softmax paged attention; the order is documented in attention_avx2.h.
// Speed comes from computing several independent elements at once (4 scores share
// the q loads; 8 vectors of O stay in registers across a tile), never from changing
// one element's sequence of operations.
#include "kernels/cpu/attention_avx2.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>

#include "core/check.h"
#include "kernels/cpu/simd_avx2.h"
#include "kernels/ref/paged_kv.h"

namespace vosti {
namespace {

// s[0..N) = lane-8 dot(q, k_rows[j], d) * scale: N independent dots, each in exactly
// the order of avx2::dot_lane8, interleaved for instruction-level parallelism.
template <int N>
void scores_block(const float* q, const float* const* k_rows, int d, float scale, float* s) {
  __m256 acc[N];
  for (int j = 0; j < N; ++j) acc[j] = _mm256_setzero_ps();
  const int d8 = d & ~7;
  for (int i = 0; i < d8; i += 8) {
    const __m256 qv = _mm256_loadu_ps(q + i);
    for (int j = 0; j < N; ++j) acc[j] = _mm256_fmadd_ps(qv, _mm256_loadu_ps(k_rows[j] + i), acc[j]);
  }
  if constexpr (N == 8) {
    if (d8 == d) {  // no tail: the 8 tree sums come out as one vector
      _mm256_storeu_ps(s, _mm256_mul_ps(avx2::hsum8x8(acc), _mm256_set1_ps(scale)));
      return;
    }
  }
  for (int j = 0; j < N; ++j) {
    float dot = avx2::hsum8(acc[j]);
    for (int i = d8; i < d; ++i) dot = std::fma(q[i], k_rows[j][i], dot);
    s[j] = dot * scale;
  }
}

// O[0..d) of one tile: O = O * alpha (if rescale), then O[i] = fma(p_j, v_j[i], O[i]) for
// j = 0..n-1 in order. Up to 8 vectors of O live in registers across the j loop.
void accumulate_tile(float* o, const float* const* v_rows, const float* p, int n, int d, bool rescale, float alpha) {
  constexpr int kVecs = 8;
  const __m256 av = _mm256_set1_ps(alpha);
  int i0 = 0;
  for (; i0 + 8 * kVecs <= d; i0 += 8 * kVecs) {
    __m256 acc[kVecs];
    for (int u = 0; u < kVecs; ++u) {
      acc[u] = _mm256_loadu_ps(o + i0 + 8 * u);
      if (rescale) acc[u] = _mm256_mul_ps(acc[u], av);
    }
    for (int j = 0; j < n; ++j) {
      const __m256 pj = _mm256_set1_ps(p[j]);
      for (int u = 0; u < kVecs; ++u) acc[u] = _mm256_fmadd_ps(pj, _mm256_loadu_ps(v_rows[j] + i0 + 8 * u), acc[u]);
    }
    for (int u = 0; u < kVecs; ++u) _mm256_storeu_ps(o + i0 + 8 * u, acc[u]);
  }
  for (int i = i0; i < d; ++i) {  // head_dim not a multiple of 64: same per-element ops, scalar
    float acc = rescale ? o[i] * alpha : o[i];
    for (int j = 0; j < n; ++j) acc = std::fma(p[j], v_rows[j][i], acc);
    o[i] = acc;
  }
}

// Running online-softmax state of one head: M, L and O[d].
struct HeadState {
  float run_max = 0.0f;
  float run_sum = 0.0f;
  float* o = nullptr;  // [d]
};

// Tile maximum: lanes of full 8-blocks by vector max, then the lanes and the tail.
// (max is exact, so this order gives the same value as any other.)
float tile_max_of(const float* s, int n) {
  int j = 0;
  float mx = s[0];
  if (n >= 8) {
    __m256 v = _mm256_loadu_ps(s);
    for (j = 8; j + 8 <= n; j += 8) v = _mm256_max_ps(v, _mm256_loadu_ps(s + j));
    alignas(32) float lanes[8];
    _mm256_store_ps(lanes, v);
    mx = lanes[0];
    for (int l = 1; l < 8; ++l) mx = std::max(mx, lanes[l]);
  }
  for (; j < n; ++j) mx = std::max(mx, s[j]);
  return mx;
}

// One head, one tile of n positions: scores, softmax statistics and O, in the order of
// attention_avx2.h. `first` is true for the query's first tile.
void head_tile(const float* q, const float* const* k_rows, const float* const* v_rows, int n, int d, float scale,
               bool first, HeadState& st) {
  float s[kKvTile];  // [n]: scores, then probabilities
  int j = 0;
  for (; j + 8 <= n; j += 8) scores_block<8>(q, k_rows + j, d, scale, s + j);
  for (; j + 4 <= n; j += 4) scores_block<4>(q, k_rows + j, d, scale, s + j);
  for (; j < n; ++j) scores_block<1>(q, k_rows + j, d, scale, s + j);
  const float tile_max = tile_max_of(s, n);
  const float new_max = first ? tile_max : std::max(st.run_max, tile_max);
  const float alpha = first ? 1.0f : exp_f32(st.run_max - new_max);
  // p_j = exp(s_j - M'), and the tile's lane-8 sum of the p_j.
  const __m256 mv = _mm256_set1_ps(new_max);
  __m256 lane_sum = _mm256_setzero_ps();
  for (j = 0; j + 8 <= n; j += 8) {
    const __m256 p = avx2::exp_lane8(_mm256_sub_ps(_mm256_loadu_ps(s + j), mv));
    _mm256_storeu_ps(s + j, p);
    lane_sum = _mm256_add_ps(lane_sum, p);
  }
  float tile_sum = avx2::hsum8(lane_sum);
  if (j < n) {
    // Tail exps on a padded vector (exp_lane8 == exp_f32 per lane); the sum stays sequential.
    alignas(32) float tail[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    for (int t = j; t < n; ++t) tail[t - j] = s[t];
    _mm256_store_ps(tail, avx2::exp_lane8(_mm256_sub_ps(_mm256_load_ps(tail), mv)));
    for (int t = j; t < n; ++t) {
      s[t] = tail[t - j];
      tile_sum = tile_sum + s[t];
    }
  }
  st.run_sum = first ? tile_sum : st.run_sum * alpha + tile_sum;
  accumulate_tile(st.o, v_rows, s, n, d, !first, alpha);
  st.run_max = new_max;
}

}  // namespace

void attention_group_avx2(const float* q, int num_group_heads, const AttentionQuery& query, const PagedKvView& kv,
                          int kv_head, float scale, float* out) {
  const int d = kv.head_dim;
  VOSTI_CHECK(d > 0 && d <= kMaxCpuHeadDim, "attention: head_dim outside 1..512");
  VOSTI_CHECK(num_group_heads > 0 && num_group_heads <= kMaxCpuGroupHeads, "attention: group heads outside 1..8");
  VOSTI_CHECK(query.position >= 0, "attention: negative position");
  VOSTI_CHECK(query.first >= 0 && query.first <= query.position, "attention: first outside 0..position");
  alignas(32) float o[kMaxCpuGroupHeads * kMaxCpuHeadDim];  // [num_group_heads, d]: running numerators
  HeadState states[kMaxCpuGroupHeads];
  for (int g = 0; g < num_group_heads; ++g) states[g].o = o + g * d;
  std::fill(o, o + num_group_heads * d, 0.0f);
  const float* k_rows[kKvTile];  // [tile]: K row of each position in the tile
  const float* v_rows[kKvTile];  // [tile]: V row of each position in the tile
  const int64_t len = static_cast<int64_t>(query.position) + 1;
  // The first tile starts at the query's first position; the others at multiples of kKvTile.
  const int64_t first = query.first;
  for (int64_t t0 = first; t0 < len; t0 = (t0 / kKvTile + 1) * kKvTile) {
    const int n = static_cast<int>(std::min<int64_t>((t0 / kKvTile + 1) * kKvTile, len) - t0);
    // Address only (no arithmetic): walk the block table from the tile start without a division per position.
    int64_t slot = kv_slot_of_position(kv, query.block_table, t0);
    int64_t in_block = t0 % kv.block_size;
    for (int j = 0; j < n; ++j) {
      if (in_block == kv.block_size) {
        slot = kv_slot_of_position(kv, query.block_table, t0 + j);
        in_block = 0;
      }
      const int64_t off = kv_slot_offset(kv, slot, kv_head);
      k_rows[j] = kv.k + off;
      v_rows[j] = kv.v + off;
      ++slot;
      ++in_block;
    }
    // The tile's K/V (n x d each) stay in L1 while every head of the group uses them.
    for (int g = 0; g < num_group_heads; ++g) head_tile(q + g * d, k_rows, v_rows, n, d, scale, t0 == first, states[g]);
  }
  for (int g = 0; g < num_group_heads; ++g) {
    for (int i = 0; i < d; ++i) out[g * d + i] = states[g].o[i] / states[g].run_sum;
  }
}

}  // namespace vosti
