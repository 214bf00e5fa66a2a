// Tiled online-softmax paged attention; the order is documented in attention_avx2.h.
#include "kernels/cpu/attention_avx2.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>

#include "core/check.h"
#include "kernels/cpu/simd_avx2.h"
#include "kernels/ref/paged_kv.h"

namespace vosti {
namespace {

// o[i] = o[i] * alpha for i in [0, d).
void scale_in_place(float* o, int d, float alpha) {
  const __m256 a = _mm256_set1_ps(alpha);
  int i = 0;
  for (; i + 8 <= d; i += 8) _mm256_storeu_ps(o + i, _mm256_mul_ps(_mm256_loadu_ps(o + i), a));
  for (; i < d; ++i) o[i] = o[i] * alpha;
}

// o[i] = fma(p, v[i], o[i]) for i in [0, d): the same per-element op in vector and tail.
void axpy_fma(float* o, const float* v, int d, float p) {
  const __m256 pv = _mm256_set1_ps(p);
  int i = 0;
  for (; i + 8 <= d; i += 8) _mm256_storeu_ps(o + i, _mm256_fmadd_ps(pv, _mm256_loadu_ps(v + i), _mm256_loadu_ps(o + i)));
  for (; i < d; ++i) o[i] = std::fma(p, v[i], o[i]);
}

}  // namespace

void attention_head_avx2(const float* q, const AttentionQuery& query, const PagedKvView& kv, int kv_head, float scale,
                         float* out) {
  const int d = kv.head_dim;
  VOSTI_CHECK(d > 0 && d <= kMaxCpuHeadDim, "attention: head_dim outside 1..512");
  VOSTI_CHECK(query.position >= 0, "attention: negative position");
  alignas(32) float o[kMaxCpuHeadDim];  // [d]: running numerator O
  float s[kKvTile];                     // [tile]: scores, then probabilities
  const int64_t len = static_cast<int64_t>(query.position) + 1;
  float run_max = 0.0f;
  float run_sum = 0.0f;
  std::fill(o, o + d, 0.0f);
  for (int64_t t0 = 0; t0 < len; t0 += kKvTile) {
    const int n = static_cast<int>(std::min<int64_t>(kKvTile, len - t0));
    const float* k_rows[kKvTile];
    const float* v_rows[kKvTile];
    for (int j = 0; j < n; ++j) {
      const int64_t off = kv_slot_offset(kv, kv_slot_of_position(kv, query.block_table, t0 + j), kv_head);
      k_rows[j] = kv.k + off;
      v_rows[j] = kv.v + off;
    }
    float tile_max = -INFINITY;
    for (int j = 0; j < n; ++j) {
      s[j] = avx2::dot_lane8(q, k_rows[j], d) * scale;
      tile_max = std::max(tile_max, s[j]);
    }
    const float new_max = t0 == 0 ? tile_max : std::max(run_max, tile_max);
    if (t0 > 0) {
      const float alpha = std::exp(run_max - new_max);
      run_sum = run_sum * alpha;
      scale_in_place(o, d, alpha);
    }
    for (int j = 0; j < n; ++j) {
      s[j] = std::exp(s[j] - new_max);
      run_sum = run_sum + s[j];
    }
    for (int j = 0; j < n; ++j) axpy_fma(o, v_rows[j], d, s[j]);
    run_max = new_max;
  }
  for (int i = 0; i < d; ++i) out[i] = o[i] / run_sum;
}

}  // namespace vosti
