// The scalar oracle: the simplest correct code for every KernelBackend op.
//
// Reduction orders (the oracle's, not the CPU backend's):
// - matmul: y = ((0 + x0*w0) + x1*w1) + ... sequentially over k (each product
//   rounded, then added), then + bias; w's values are core/quant_blocks.h's decoding of
//   its stored rows.
// - rms_norm: sum of squares sequentially over n, then scalar_math.h's scale.
// - attention: plain two-pass softmax over positions first..p (no tiling): scores by a
//   sequential dot over head_dim, max, exp, sequential sum, then out[d] =
//   (sum_j p_j * v_j[d], sequential over j) / sum.
// - rope, silu_mul, gelu_tanh_mul, kv_write: element-wise, the formulas of scalar_math.h.
// Thread safety: stateless; one caller at a time per the KernelBackend contract.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "core/check.h"
#include "core/quant_blocks.h"
#include "kernels/kernel_backend.h"
#include "kernels/ref/paged_kv.h"
#include "kernels/ref/scalar_math.h"

namespace vosti {
namespace {

class RefBackend final : public KernelBackend {
 public:
  std::string_view name() const override { return "ref"; }

  using KernelBackend::matmul;
  using KernelBackend::rope;

  // Each weight row is decoded to f32 (core/quant_blocks.h) and then dotted with every x row.
  void matmul(const float* x, int64_t m, const WeightMatrix& w, const float* bias, float* y) override {
    const int64_t k = w.k, n = w.n;
    VOSTI_CHECK(m >= 0 && k > 0 && n > 0, "matmul: bad shape");
    std::vector<float> wc(static_cast<size_t>(k));  // [k]: the decoded row
    int64_t c = 0;
    for (int p = 0; p < w.num_parts; ++p) {
      const WeightRows& part = w.parts[p];
      for (int64_t i = 0; i < part.num_rows; ++i, ++c) {
        decode_values(part.type, part.rows[i], k, wc.data());
        for (int64_t r = 0; r < m; ++r) {
          const float* xr = x + r * k;  // [k]
          float s = 0.0f;
          for (int64_t j = 0; j < k; ++j) s += xr[j] * wc[static_cast<size_t>(j)];
          y[r * n + c] = bias != nullptr ? s + bias[c] : s;
        }
      }
    }
  }

  void rms_norm(const float* x, int64_t m, int64_t n, const float* weight, float eps, float* y) override {
    VOSTI_CHECK(m >= 0 && n > 0, "rms_norm: bad shape");
    for (int64_t r = 0; r < m; ++r) {
      const float* xr = x + r * n;
      float ss = 0.0f;
      for (int64_t i = 0; i < n; ++i) ss += xr[i] * xr[i];
      const float inv = rms_inv_scale(ss, n, eps);
      for (int64_t i = 0; i < n; ++i) y[r * n + i] = (xr[i] * inv) * weight[i];
    }
  }

  void rope(float* x, int64_t m, int num_heads, int head_dim, const float* cos, const float* sin,
            RopeLayout layout) override {
    VOSTI_CHECK(head_dim > 0 && head_dim % 2 == 0, "rope: head_dim must be even");
    const int half = head_dim / 2;
    for (int64_t r = 0; r < m; ++r) {
      const float* cos_t = cos + r * half;  // [half]
      const float* sin_t = sin + r * half;  // [half]
      for (int h = 0; h < num_heads; ++h) {
        float* xh = x + (r * num_heads + h) * head_dim;  // [head_dim]
        for (int i = 0; i < half; ++i) {
          const int i0 = layout == RopeLayout::kNeox ? i : 2 * i;
          const int i1 = layout == RopeLayout::kNeox ? i + half : 2 * i + 1;
          const RotatedPair p = rope_rotate(xh[i0], xh[i1], cos_t[i], sin_t[i]);
          xh[i0] = p.first;
          xh[i1] = p.second;
        }
      }
    }
  }

  void silu_mul(const float* gate_up, int64_t m, int64_t n, float* y) override {
    for (int64_t r = 0; r < m; ++r) {
      for (int64_t i = 0; i < n; ++i) y[r * n + i] = silu_times(gate_up[r * 2 * n + i], gate_up[r * 2 * n + n + i]);
    }
  }

  void gelu_tanh_mul(const float* gate_up, int64_t m, int64_t n, float* y) override {
    for (int64_t r = 0; r < m; ++r) {
      for (int64_t i = 0; i < n; ++i)
        y[r * n + i] = gelu_tanh_times(gate_up[r * 2 * n + i], gate_up[r * 2 * n + n + i]);
    }
  }

  void kv_write(const float* k_new, const float* v_new, int64_t m, const int32_t* slots, PagedKvView kv) override {
    const int64_t row = static_cast<int64_t>(kv.num_kv_heads) * kv.head_dim;  // floats per token
    for (int64_t r = 0; r < m; ++r) {
      if (slots[r] < 0) continue;  // padding row
      VOSTI_CHECK(slots[r] < kv.num_blocks * kv.block_size, "kv_write: slot outside the KV pool");
      std::memcpy(kv.k + kv_slot_offset(kv, slots[r], 0), k_new + r * row, sizeof(float) * static_cast<size_t>(row));
      std::memcpy(kv.v + kv_slot_offset(kv, slots[r], 0), v_new + r * row, sizeof(float) * static_cast<size_t>(row));
    }
  }

  void attention(const float* q, int64_t m, int num_heads, const AttentionQuery* queries, PagedKvView kv, float scale,
                 float* out) override {
    VOSTI_CHECK(kv.num_kv_heads > 0 && num_heads % kv.num_kv_heads == 0, "attention: heads not a multiple of kv heads");
    const int d = kv.head_dim;
    const int group = num_heads / kv.num_kv_heads;
    std::vector<float> scores;  // [position + 1]
    for (int64_t r = 0; r < m; ++r) {
      const AttentionQuery& query = queries[r];
      VOSTI_CHECK(query.first >= 0 && query.first <= query.position, "attention: first outside 0..position");
      const int64_t lo = query.first, len = static_cast<int64_t>(query.position) + 1;
      scores.resize(static_cast<size_t>(len));
      for (int h = 0; h < num_heads; ++h) {
        const float* qh = q + (r * num_heads + h) * d;  // [d]
        float* oh = out + (r * num_heads + h) * d;      // [d]
        const int kvh = h / group;
        float mx = -std::numeric_limits<float>::infinity();
        for (int64_t j = lo; j < len; ++j) {
          const float* kj = kv.k + kv_slot_offset(kv, kv_slot_of_position(kv, query.block_table, j), kvh);
          float s = 0.0f;
          for (int i = 0; i < d; ++i) s += qh[i] * kj[i];
          scores[static_cast<size_t>(j)] = s * scale;
          mx = std::max(mx, scores[static_cast<size_t>(j)]);
        }
        float sum = 0.0f;
        for (int64_t j = lo; j < len; ++j) {
          scores[static_cast<size_t>(j)] = std::exp(scores[static_cast<size_t>(j)] - mx);
          sum += scores[static_cast<size_t>(j)];
        }
        for (int i = 0; i < d; ++i) oh[i] = 0.0f;
        for (int64_t j = lo; j < len; ++j) {
          const float* vj = kv.v + kv_slot_offset(kv, kv_slot_of_position(kv, query.block_table, j), kvh);
          for (int i = 0; i < d; ++i) oh[i] += scores[static_cast<size_t>(j)] * vj[i];
        }
        for (int i = 0; i < d; ++i) oh[i] = oh[i] / sum;
      }
    }
  }
};

}  // namespace

std::unique_ptr<KernelBackend> make_ref_backend() { return std::make_unique<RefBackend>(); }

}  // namespace vosti
