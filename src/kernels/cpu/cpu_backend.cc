// The CPU backend: AVX2/FMA kernels split over a ThreadPool.
//
// Threads split only independent outputs: matmul output columns (chunks of
// kMatmulColChunk; weights read in their stored encoding, matmul_avx2.h), rms_norm/rope/silu_mul/gelu_tanh_mul rows,
// attention (token, heads sharing one kv head): whole (token, head) pairs, never a part of one. Each output element's
// reduction order is documented at its kernel (matmul_avx2.h, attention_avx2.h, simd_avx2.h) and never depends on m,
// the row index, the thread count or other rows. Element-wise ops (rope, silu_mul, gelu_tanh_mul, kv_write, the
// rms_norm scaling) use scalar_math.h and are bit-identical to the reference backend; matmul, the rms_norm sum of
// squares and attention use a different (lane-8 / tiled) order than the oracle and match it within rounding. Thread
// safety: one caller at a time (the pool runs one parallel_for at a time).
#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <type_traits>
#include <vector>

#include "core/check.h"
#include "core/thread_pool.h"
#include "kernels/cpu/attention_avx2.h"
#include "kernels/cpu/matmul_avx2.h"
#include "kernels/cpu/simd_avx2.h"
#include "kernels/kernel_backend.h"
#include "kernels/ref/paged_kv.h"
#include "kernels/ref/scalar_math.h"

namespace vosti {
namespace {

class CpuBackend final : public KernelBackend {
 public:
  explicit CpuBackend(ThreadPool* pool)
      : pool_(pool),
        tiles_(static_cast<size_t>(pool != nullptr ? pool->num_threads() : 1),
               std::vector<float>(static_cast<size_t>(kMatmulTileFloats))) {}

  std::string_view name() const override { return "cpu"; }

  using KernelBackend::matmul;
  using KernelBackend::rope;

  // Threads take chunks of kMatmulColChunk output columns of one part (parts in order).
  void matmul(const float* x, int64_t m, const WeightMatrix& w, const float* bias, float* y) override {
    VOSTI_CHECK(m >= 0 && w.k > 0 && w.n > 0, "matmul: bad shape");
    if (m == 0) return;
    int64_t num_chunks = 0;
    for (int p = 0; p < w.num_parts; ++p) num_chunks += (w.parts[p].num_rows + kMatmulColChunk - 1) / kMatmulColChunk;
    parallel(static_cast<size_t>(num_chunks), 1, [&](size_t b, size_t e, int worker) {
      float* tile = tiles_[static_cast<size_t>(worker)].data();
      // Walk the parts to chunk b, then run chunks [b, e) part by part.
      int p = 0;
      int64_t first_col = 0, chunk0 = 0;  // the part's first output column and first chunk
      for (auto chunk = static_cast<int64_t>(b); chunk < static_cast<int64_t>(e);) {
        const WeightRows& part = w.parts[p];
        const int64_t part_chunks = (part.num_rows + kMatmulColChunk - 1) / kMatmulColChunk;
        if (chunk >= chunk0 + part_chunks) {
          chunk0 += part_chunks;
          first_col += part.num_rows;
          ++p;
          continue;
        }
        const int64_t last = std::min(static_cast<int64_t>(e), chunk0 + part_chunks);  // chunks of this part
        const int64_t c0 = (chunk - chunk0) * kMatmulColChunk;
        const int64_t c1 = std::min(part.num_rows, (last - chunk0) * kMatmulColChunk);
        const float* part_bias = bias != nullptr ? bias + first_col : nullptr;
        matmul_part_columns_avx2(x, m, w.k, part, part_bias, y + first_col, w.n, c0, c1, tile);
        chunk = last;
      }
    });
  }

  // Per row: sum of squares in lane-8 dot order, scale from scalar_math.h, then
  // y[i] = (x[i] * inv) * weight[i] (element-wise, same as the oracle).
  void rms_norm(const float* x, int64_t m, int64_t n, const float* weight, float eps, float* y) override {
    VOSTI_CHECK(m >= 0 && n > 0, "rms_norm: bad shape");
    parallel(static_cast<size_t>(m), 1, [&](size_t b, size_t e) {
      for (int64_t r = static_cast<int64_t>(b); r < static_cast<int64_t>(e); ++r) {
        const float* xr = x + r * n;  // [n]
        float* yr = y + r * n;        // [n], may alias xr
        const float inv = rms_inv_scale(avx2::dot_lane8(xr, xr, n), n, eps);
        const __m256 iv = _mm256_set1_ps(inv);
        int64_t i = 0;
        for (; i + 8 <= n; i += 8) {
          const __m256 t = _mm256_mul_ps(_mm256_loadu_ps(xr + i), iv);
          _mm256_storeu_ps(yr + i, _mm256_mul_ps(t, _mm256_loadu_ps(weight + i)));
        }
        for (; i < n; ++i) yr[i] = (xr[i] * inv) * weight[i];
      }
    });
  }

  void rope(float* x, int64_t m, int num_heads, int head_dim, const float* cos, const float* sin,
            RopeLayout layout) override {
    VOSTI_CHECK(head_dim > 0 && head_dim % 2 == 0 && head_dim <= kMaxCpuHeadDim, "rope: head_dim must be even, <= 512");
    const int half = head_dim / 2;
    parallel(static_cast<size_t>(m), 1, [&](size_t b, size_t e) {
      for (int64_t r = static_cast<int64_t>(b); r < static_cast<int64_t>(e); ++r)
        rope_row(x + r * num_heads * head_dim, num_heads, head_dim, cos + r * half, sin + r * half, layout);
    });
  }

  // Threads take whole rows: whether element i runs in the 8-lane loop or the scalar tail is then
  // decided by i and n alone (the same operations either way; verify/analyzer proves the former).
  void silu_mul(const float* gate_up, int64_t m, int64_t n, float* y) override {
    parallel(static_cast<size_t>(m), 1, [&](size_t b, size_t e) {
      for (int64_t r = static_cast<int64_t>(b); r < static_cast<int64_t>(e); ++r)
        silu_mul_range(gate_up + r * 2 * n, gate_up + r * 2 * n + n, y + r * n, 0, n);
    });
  }

  // Threads take whole rows, as silu_mul.
  void gelu_tanh_mul(const float* gate_up, int64_t m, int64_t n, float* y) override {
    parallel(static_cast<size_t>(m), 1, [&](size_t b, size_t e) {
      for (int64_t r = static_cast<int64_t>(b); r < static_cast<int64_t>(e); ++r)
        gelu_tanh_mul_range(gate_up + r * 2 * n, gate_up + r * 2 * n + n, y + r * n, 0, n);
    });
  }

  void kv_write(const float* k_new, const float* v_new, int64_t m, const int32_t* slots, PagedKvView kv) override {
    const int64_t row = static_cast<int64_t>(kv.num_kv_heads) * kv.head_dim;  // floats per token
    const size_t bytes = sizeof(float) * static_cast<size_t>(row);
    for (int64_t r = 0; r < m; ++r) {
      if (slots[r] < 0) continue;  // padding row
      VOSTI_CHECK(slots[r] < kv.num_blocks * kv.block_size, "kv_write: slot outside the KV pool");
      std::memcpy(kv.k + kv_slot_offset(kv, slots[r], 0), k_new + r * row, bytes);
      std::memcpy(kv.v + kv_slot_offset(kv, slots[r], 0), v_new + r * row, bytes);
    }
  }

  void attention(const float* q, int64_t m, int num_heads, const AttentionQuery* queries, PagedKvView kv, float scale,
                 float* out) override {
    VOSTI_CHECK(kv.num_kv_heads > 0 && num_heads % kv.num_kv_heads == 0, "attention: heads not a multiple of kv heads");
    const int d = kv.head_dim;
    const int group = num_heads / kv.num_kv_heads;
    // Work items: (token, run of up to kMaxCpuGroupHeads heads sharing one kv head).
    // Each (token, head) pair lies in exactly one item and its arithmetic does not
    // depend on which other heads share the item.
    // Items are dealt round-robin (thread lane l takes items l, l + lanes, ...): a
    // prefill's late tokens cost more than its early ones, and contiguous ranges would
    // leave one thread with all the long rows.
    const int runs_per_kv = (group + kMaxCpuGroupHeads - 1) / kMaxCpuGroupHeads;
    const int runs_per_token = kv.num_kv_heads * runs_per_kv;
    const size_t num_items = static_cast<size_t>(m * runs_per_token);
    const size_t lanes = std::min(num_items, static_cast<size_t>(pool_ != nullptr ? pool_->num_threads() : 1));
    auto attend_item = [&](size_t item) {
      const int64_t r = static_cast<int64_t>(item) / runs_per_token;
      const int run = static_cast<int>(static_cast<int64_t>(item) % runs_per_token);
      const int kvh = run / runs_per_kv;
      const int h0 = kvh * group + (run % runs_per_kv) * kMaxCpuGroupHeads;
      const int heads = std::min(kMaxCpuGroupHeads, (kvh + 1) * group - h0);
      const int64_t off = (r * num_heads + h0) * d;
      attention_group_avx2(q + off, heads, queries[r], kv, kvh, scale, out + off);
    };
    parallel(lanes, 1, [&](size_t lane_begin, size_t lane_end) {
      for (size_t lane = lane_begin; lane < lane_end; ++lane) {
        for (size_t item = lane; item < num_items; item += lanes) attend_item(item);
      }
    });
  }

 private:
  // x[num_heads, head_dim] of one token rotated by cos_t/sin_t [head_dim / 2]; element-wise, same as the oracle.
  static void rope_row(float* x, int num_heads, int head_dim, const float* cos_t, const float* sin_t,
                       RopeLayout layout) {
    const int half = head_dim / 2;
    for (int h = 0; h < num_heads; ++h) {
      float* xh = x + h * head_dim;  // [head_dim]
      int i = 0;
      if (layout == RopeLayout::kNeox) {
        for (; i + 8 <= half; i += 8) {
          const __m256 x0 = _mm256_loadu_ps(xh + i);
          const __m256 x1 = _mm256_loadu_ps(xh + half + i);
          const __m256 c = _mm256_loadu_ps(cos_t + i);
          const __m256 s = _mm256_loadu_ps(sin_t + i);
          _mm256_storeu_ps(xh + i, _mm256_sub_ps(_mm256_mul_ps(x0, c), _mm256_mul_ps(x1, s)));
          _mm256_storeu_ps(xh + half + i, _mm256_add_ps(_mm256_mul_ps(x1, c), _mm256_mul_ps(x0, s)));
        }
      }
      for (; i < half; ++i) {
        const int i0 = layout == RopeLayout::kNeox ? i : 2 * i;
        const int i1 = layout == RopeLayout::kNeox ? i + half : 2 * i + 1;
        const RotatedPair p = rope_rotate(xh[i0], xh[i1], cos_t[i], sin_t[i]);
        xh[i0] = p.first;
        xh[i1] = p.second;
      }
    }
  }

  // y[i] = silu_times(gate[i], up[i]) for i in [i0, i1): 8 lanes with exp_lane8, then the
  // scalar tail with exp_f32 -- the same operations, so the same bits as the oracle.
  static void silu_mul_range(const float* gate, const float* up, float* y, int64_t i0, int64_t i1) {
    const __m256 one = _mm256_set1_ps(1.0f);
    const __m256 sign = _mm256_set1_ps(-0.0f);
    int64_t i = i0;
    for (; i + 8 <= i1; i += 8) {
      const __m256 g = _mm256_loadu_ps(gate + i);
      const __m256 ex = avx2::exp_lane8(_mm256_xor_ps(g, sign));
      const __m256 silu = _mm256_div_ps(g, _mm256_add_ps(one, ex));
      _mm256_storeu_ps(y + i, _mm256_mul_ps(silu, _mm256_loadu_ps(up + i)));
    }
    for (; i < i1; ++i) y[i] = silu_times(gate[i], up[i]);
  }

  // y[i] = gelu_tanh_times(gate[i], up[i]) for i in [i0, i1): 8 lanes with exp_lane8 in the
  // operation order of scalar_math.h, then the scalar tail -- the same bits as the oracle.
  static void gelu_tanh_mul_range(const float* gate, const float* up, float* y, int64_t i0, int64_t i1) {
    const __m256 one = _mm256_set1_ps(1.0f);
    const __m256 sign = _mm256_set1_ps(-0.0f);
    const __m256 kappa = _mm256_set1_ps(kGeluKappa);
    const __m256 two_beta = _mm256_set1_ps(kGeluTwoBeta);
    int64_t i = i0;
    for (; i + 8 <= i1; i += 8) {
      const __m256 g = _mm256_loadu_ps(gate + i);
      const __m256 c = _mm256_mul_ps(_mm256_mul_ps(g, g), g);
      const __m256 s = _mm256_add_ps(g, _mm256_mul_ps(kappa, c));
      const __m256 ex = avx2::exp_lane8(_mm256_xor_ps(_mm256_mul_ps(two_beta, s), sign));
      const __m256 gelu = _mm256_div_ps(g, _mm256_add_ps(one, ex));
      _mm256_storeu_ps(y + i, _mm256_mul_ps(gelu, _mm256_loadu_ps(up + i)));
    }
    for (; i < i1; ++i) y[i] = gelu_tanh_times(gate[i], up[i]);
  }

  // fn(begin, end) or fn(begin, end, worker) over a split of [0, n).
  template <typename Fn>
  void parallel(size_t n, size_t grain, const Fn& fn) {
    if (n == 0) return;
    if (pool_ == nullptr || pool_->num_threads() == 1) {
      if constexpr (std::is_invocable_v<const Fn&, size_t, size_t, int>) {
        fn(size_t{0}, n, 0);
      } else {
        fn(size_t{0}, n);
      }
      return;
    }
    pool_->parallel_for(n, grain, fn);
  }

  ThreadPool* pool_;
  std::vector<std::vector<float>> tiles_;  // [threads][kMatmulTileFloats]: each thread's matmul decode tile
};

}  // namespace

std::unique_ptr<KernelBackend> make_cpu_backend(ThreadPool* pool) { return std::make_unique<CpuBackend>(pool); }

}  // namespace vosti
