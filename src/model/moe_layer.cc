#include "model/moe_layer.h"

#include <algorithm>
#include <cstring>

#include "core/check.h"
#include "kernels/ref/scalar_math.h"
#include "model/model.h"

namespace vosti {

void route_token(const float* logits, const MoeSpec& spec, float* probs, int32_t* experts, float* weights) {
  const auto E = static_cast<int32_t>(spec.num_experts);
  const auto k = static_cast<int32_t>(spec.top_k);
  float m = logits[0];
  for (int32_t e = 1; e < E; ++e) m = std::max(m, logits[e]);
  float s = 0.0f;
  for (int32_t e = 0; e < E; ++e) {
    probs[e] = exp_f32(logits[e] - m);
    s += probs[e];
  }
  for (int32_t e = 0; e < E; ++e) probs[e] = probs[e] / s;
  // Top-k in rank order: the largest remaining probability, the lowest index on ties. A taken
  // expert's probability is set to -1, below every probability (>= 0), so it is never taken again.
  for (int32_t r = 0; r < k; ++r) {
    int32_t best = 0;
    for (int32_t e = 1; e < E; ++e)
      if (probs[e] > probs[best]) best = e;
    experts[r] = best;
    weights[r] = probs[best];
    probs[best] = -1.0f;
  }
  if (spec.norm_topk_prob) {
    float sum = 0.0f;
    for (int32_t r = 0; r < k; ++r) sum += weights[r];
    for (int32_t r = 0; r < k; ++r) weights[r] = weights[r] / sum;
  }
  // Ascending expert index (insertion sort: k is small), weights alongside.
  for (int32_t i = 1; i < k; ++i)
    for (int32_t j = i; j > 0 && experts[j - 1] > experts[j]; --j) {
      std::swap(experts[j - 1], experts[j]);
      std::swap(weights[j - 1], weights[j]);
    }
}

void moe_mlp(const MoeSpec& spec, MlpActivation activation, const LayerWeights& layer, const float* h, int64_t T,
             int64_t H, KernelBackend& kernels, MoeScratch& s, float* out) {
  const int64_t E = spec.num_experts, k = spec.top_k, I = spec.intermediate_size;
  VOSTI_CHECK(
      static_cast<int64_t>(layer.expert_gate_up.size()) == E && static_cast<int64_t>(layer.expert_down.size()) == E,
      "an MoE layer without its experts reached the forward");
  auto sized = [](auto& buf, int64_t n) -> auto& {
    buf.resize(static_cast<size_t>(n));
    return buf;
  };
  float* logits = sized(s.logits, T * E).data();      // [T, E]
  int32_t* experts = sized(s.experts, T * k).data();  // [T, k]
  float* weights = sized(s.weights, T * k).data();    // [T, k]
  float* probs = sized(s.probs, E).data();            // [E]
  kernels.matmul(h, T, layer.router.matrix, nullptr, logits);
  for (int64_t t = 0; t < T; ++t) route_token(logits + t * E, spec, probs, experts + t * k, weights + t * k);

  std::fill(out, out + T * H, 0.0f);
  std::vector<int32_t>& rows = s.rows;
  for (int64_t e = 0; e < E; ++e) {
    rows.clear();
    for (int64_t t = 0; t < T; ++t)
      for (int64_t r = 0; r < k; ++r)
        if (experts[t * k + r] == e) rows.push_back(static_cast<int32_t>(t));
    if (rows.empty()) continue;
    const auto n = static_cast<int64_t>(rows.size());
    float* x = sized(s.x, n * H).data();                  // [n, H]
    float* gate_up = sized(s.gate_up, n * 2 * I).data();  // [n, 2I]
    float* act = sized(s.act, n * I).data();              // [n, I]
    float* y = sized(s.y, n * H).data();                  // [n, H]
    for (int64_t j = 0; j < n; ++j)
      std::memcpy(x + j * H, h + static_cast<int64_t>(rows[static_cast<size_t>(j)]) * H,
                  static_cast<size_t>(H) * sizeof(float));
    kernels.matmul(x, n, layer.expert_gate_up[static_cast<size_t>(e)].matrix, nullptr, gate_up);
    switch (activation) {
      case MlpActivation::kSilu:
        kernels.silu_mul(gate_up, n, I, act);
        break;
      case MlpActivation::kGeluTanh:
        kernels.gelu_tanh_mul(gate_up, n, I, act);
        break;
    }
    kernels.matmul(act, n, layer.expert_down[static_cast<size_t>(e)].matrix, nullptr, y);
    for (int64_t j = 0; j < n; ++j) {
      const int64_t t = rows[static_cast<size_t>(j)];
      float w = 0.0f;
      for (int64_t r = 0; r < k; ++r)
        if (experts[t * k + r] == e) w = weights[t * k + r];
      float* o = out + t * H;
      const float* yr = y + j * H;
      for (int64_t i = 0; i < H; ++i) o[i] = o[i] + yr[i] * w;
    }
  }
}

}  // namespace vosti
