// The mixture-of-experts MLP of a decoder layer (LayerSpec::moe: Qwen3-MoE, Mixtral) on the CPU
// backends (`cpu` and `ref`: the same code here, over either backend's kernels), called by the
// one forward (Model::forward) where a layer's spec says so.
//
// Order, fixed by the deployment (model and kernel backend) alone, never by the batch:
//   1. Router logits [T, E] = h [T, H] x router^T through the backend's matmul (row-invariant by
//      the KernelBackend contract: a row's bits do not depend on the rows beside it or their
//      number), f32.
//   2. Per token, on its own logits row only (route_token): softmax in f32 -- m = max over e
//      ascending, p_e = exp_f32(l_e - m) (scalar_math.h), s = sum of p_e over e ascending,
//      p_e = p_e / s --; top-k by repeatedly taking the largest p_e not yet taken, scanning e
//      ascending with a strict >, so ties go to the lowest expert index; where norm_topk_prob, the
//      k probabilities are divided by their sum taken in rank order (largest first). Then the
//      token's k (expert, weight) pairs are sorted by ascending expert index.
//      (transformers: softmax(logits.float()), topk, `/= sum` (Qwen3MoeTopKRouter with
//      norm_topk_prob; MixtralTopKRouter always); the same values up to its own exp and sum.)
//   3. Experts in ascending index e: the rows of the tokens routed to e, in ascending token order,
//      are gathered into x_e [n_e, H]; gate_up_e = x_e x W_gate_up[e]^T [n_e, 2I] (backend matmul),
//      act = act(gate) * up [n_e, I] (the layer's activation, the backend's kernel), y_e = act x
//      W_down[e]^T [n_e, H] (backend matmul). Every kernel is row-invariant, so a token's y_e row
//      has the same bits whatever other tokens were routed to e and however many.
//   4. Combine: out[t] starts at +0.0 and adds y_e[t] * w_{t,e} (one f32 product, then one f32
//      add, no fused multiply-add) for the token's experts in ascending expert index -- the order
//      of transformers' expert loop and index_add_.
// Nothing reads the token count, a row's index or another row to choose an order: the routing of a
// token is a function of its own hidden row, and its output of that row and its experts' weights.
// The CUDA forward runs the same order in its own kernels: kernels/cuda/moe/moe_kernels.h.
// Thread safety: the scratch belongs to one forward at a time.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/kernel_backend.h"
#include "model/model_config.h"

namespace vosti {

struct LayerWeights;

// Buffers of the MoE layers of one forward, reused across calls (fully written before read).
struct MoeScratch {
  std::vector<float> logits;              // [T, num_experts] router logits
  std::vector<int32_t> experts;           // [T, top_k] chosen experts, ascending per token
  std::vector<float> weights;             // [T, top_k] their combine weights
  std::vector<float> probs;               // [num_experts] one token's softmax
  std::vector<int32_t> rows;              // [<= T] the tokens routed to one expert
  std::vector<float> x, gate_up, act, y;  // [n_e, H], [n_e, 2I], [n_e, I], [n_e, H]
  // The last forward's routing, filled by Model::forward: [T, num MoE layers, top_k], each
  // token's chosen experts per MoE layer (in layer order), ascending. Empty for a dense model.
  std::vector<int32_t> routed;
};

// One token's routing: experts[top_k] ascending and their weights[top_k], from its router logits
// logits[num_experts], in the order of step 2 above. `probs` is [num_experts] scratch (left
// holding the softmax with the chosen experts' entries set to -1).
void route_token(const float* logits, const MoeSpec& spec, float* probs, int32_t* experts, float* weights);

// out[T, H] = the layer's mixture of experts applied to the normed rows h[T, H] (steps 1-4).
// REQUIRES: `layer` holds the router and every expert (Model::load of an MoE layer).
void moe_mlp(const MoeSpec& spec, MlpActivation activation, const LayerWeights& layer, const float* h, int64_t T,
             int64_t H, KernelBackend& kernels, MoeScratch& scratch, float* out);

}  // namespace vosti
