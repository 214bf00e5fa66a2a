// The CUDA deployment's numeric policy (model/cuda/cuda_model.h) emulated on the CPU, as a
// reference for the GPU forward that differs from it only by f32 reduction order:
// bf16_weight_model() rounds the projection matrices and the embedding to bf16 (kept as
// f32 values), and Bf16InputBackend rounds every matmul input row to bf16, which is where
// the GPU stores bf16 activations (normed rows, attention output, SwiGLU output), and the
// K/V rows written to the cache (the default bf16 KV pool); its attention rounds where the
// tensor-core attention rounds (q and the softmax weights to bf16).
// Thread safety: none needed (tests are single-threaded).
#pragma once

#include <algorithm>
#include <cmath>
#include <memory>
#include <vector>

#include "core/dtype.h"
#include "kernels/kernel_backend.h"
#include "kernels/ref/paged_kv.h"
#include "model/model.h"
#include "tests/support/wrapped_cpu_backend.h"

namespace vosti::cuda_test {

inline float round_bf16(float v) { return bf16_to_f32(f32_to_bf16(v)); }

// An owned copy of t with every element rounded to bf16.
inline FloatTensor rounded_bf16(const FloatTensor& t) {
  auto data = std::make_shared<std::vector<float>>(static_cast<size_t>(t.num_elements()));
  for (size_t i = 0; i < data->size(); ++i) (*data)[i] = round_bf16(t.data[i]);
  FloatTensor out;
  out.shape = t.shape;
  out.data = data->data();
  out.owner = data;
  return out;
}

// `model` with the CUDA policy's bf16 weights: matrices and embedding rounded, norms and biases f32.
// REQUIRES: model was loaded with LoadOptions::f32_weights (its tensors have f32 data).
inline std::shared_ptr<const Model> bf16_weight_model(const Model& model) {
  ModelWeights w = model.weights();
  const bool tied = w.lm_head.data == w.embed.data;
  w.embed = rounded_bf16(w.embed);
  w.lm_head = tied ? w.embed : rounded_bf16(w.lm_head);
  for (LayerWeights& l : w.layers) {
    l.wqkv = rounded_bf16(l.wqkv);
    l.wo = rounded_bf16(l.wo);
    l.w_gate_up = rounded_bf16(l.w_gate_up);
    l.w_down = rounded_bf16(l.w_down);
    if (l.router.data != nullptr) l.router = rounded_bf16(l.router);  // MoE layers: the router and experts
    for (auto* experts : {&l.expert_gate_up, &l.expert_down})
      for (FloatTensor& t : *experts) t = rounded_bf16(t);
  }
  return std::make_shared<Model>(model.path(), model.config(), std::move(w), 0);
}

// Rounds each matmul's input x to bf16, then runs `inner`; every other op is inner's.
class Bf16InputBackend final : public WrappedCpuBackend {
 public:
  explicit Bf16InputBackend(std::unique_ptr<KernelBackend> inner) : WrappedCpuBackend(std::move(inner)) {}
  using WrappedCpuBackend::matmul;
  std::string_view name() const override { return "bf16-inputs"; }
  void matmul(const float* x, int64_t m, const WeightMatrix& w, const float* bias, float* y) override {
    rounded_.resize(static_cast<size_t>(m * w.k));  // [m, k]
    for (size_t i = 0; i < rounded_.size(); ++i) rounded_[i] = round_bf16(x[i]);
    inner_->matmul(rounded_.data(), m, w, bias, y);
  }
  void kv_write(const float* k_new, const float* v_new, int64_t m, const int32_t* slots, PagedKvView kv) override {
    const size_t n = static_cast<size_t>(m) * static_cast<size_t>(kv.num_kv_heads) * static_cast<size_t>(kv.head_dim);
    k_rounded_.resize(n);  // [m, num_kv_heads, head_dim]
    v_rounded_.resize(n);
    for (size_t i = 0; i < n; ++i) {
      k_rounded_[i] = round_bf16(k_new[i]);
      v_rounded_[i] = round_bf16(v_new[i]);
    }
    inner_->kv_write(k_rounded_.data(), v_rounded_.data(), m, slots, kv);
  }
  // The tensor-core attention's rounding points (kernels/cuda/attention/attention.h, family 1) with plain
  // f32 sums: q rounded to bf16; per KV tile of 64 positions the online softmax in base 2 with
  // c = scale * log2(e); the weights rounded to bf16 for the P.V products (the row sum L taken
  // from the unrounded weights). Splits are not emulated: the golden prompts are shorter than
  // one split (512).
  void attention(const float* q, int64_t m, int num_heads, const AttentionQuery* queries, PagedKvView kv, float scale,
                 float* out) override {
    const int d = kv.head_dim, group = num_heads / kv.num_kv_heads;
    const float c = scale * 1.44269504088896340736f;
    std::vector<float> qr(static_cast<size_t>(d)), o(static_cast<size_t>(d));
    for (int64_t r = 0; r < m; ++r) {
      const int64_t len = static_cast<int64_t>(queries[r].position) + 1;
      for (int h = 0; h < num_heads; ++h) {
        for (int i = 0; i < d; ++i) qr[static_cast<size_t>(i)] = round_bf16(q[(r * num_heads + h) * d + i]);
        const int kvh = h / group;
        float mx_run = -INFINITY, l = 0.f;
        std::fill(o.begin(), o.end(), 0.f);
        // From the query's first position (its sliding window's start), then tiles at multiples of 64.
        for (int64_t t0 = queries[r].first; t0 < len; t0 = (t0 / 64 + 1) * 64) {
          const int64_t t1 = std::min(len, (t0 / 64 + 1) * 64);
          std::vector<float> s(static_cast<size_t>(t1 - t0));
          float mx = -INFINITY;
          for (int64_t j = t0; j < t1; ++j) {
            const float* kj = kv.k + kv_slot_offset(kv, kv_slot_of_position(kv, queries[r].block_table, j), kvh);
            float dot = 0.f;
            for (int i = 0; i < d; ++i) dot += qr[static_cast<size_t>(i)] * kj[i];
            s[static_cast<size_t>(j - t0)] = dot;
            mx = std::max(mx, dot);
          }
          const float m_new = std::max(mx_run, mx);
          const float alpha = std::exp2((mx_run - m_new) * c);
          float sum = 0.f;
          for (float& x : s) sum += (x = std::exp2(x * c - m_new * c));
          l = l * alpha + sum;
          for (float& x : o) x *= alpha;
          for (int64_t j = t0; j < t1; ++j) {
            const float* vj = kv.v + kv_slot_offset(kv, kv_slot_of_position(kv, queries[r].block_table, j), kvh);
            const float w = round_bf16(s[static_cast<size_t>(j - t0)]);
            for (int i = 0; i < d; ++i) o[static_cast<size_t>(i)] += w * vj[i];
          }
          mx_run = m_new;
        }
        for (int i = 0; i < d; ++i) out[(r * num_heads + h) * d + i] = o[static_cast<size_t>(i)] / l;
      }
    }
  }

 private:
  std::vector<float> rounded_;
  std::vector<float> k_rounded_, v_rounded_;
};

}  // namespace vosti::cuda_test
