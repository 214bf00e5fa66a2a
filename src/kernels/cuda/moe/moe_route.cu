// moe_route (moe_kernels.h, step 1): one thread per token, its own logits row only, in the order
// of model/moe_layer.h's route_token.
#include <string>

#include "kernels/cuda/cuda_status.h"
#include "kernels/cuda/moe/moe_kernels.h"

namespace vosti {
namespace {

constexpr int kRouteThreads = 128;

struct RouteParams {
  const float* logits;
  long long ld;
  int num_tokens, num_experts, top_k, norm_topk_prob;
  int32_t* experts;
  float* weights;
  int32_t* routed;
  long long routed_stride, routed_offset;
};

__global__ void __launch_bounds__(kRouteThreads) moe_route_kernel(RouteParams p) {
  const int t = static_cast<int>(blockIdx.x) * kRouteThreads + static_cast<int>(threadIdx.x);
  if (t >= p.num_tokens) return;
  const float* l = p.logits + static_cast<long long>(t) * p.ld;
  const int E = p.num_experts, k = p.top_k;
  float probs[kMaxMoeExperts];  // [E] this token's softmax
  float m = l[0];
  for (int e = 1; e < E; ++e) m = m < l[e] ? l[e] : m;
  float s = 0.0f;
  for (int e = 0; e < E; ++e) {
    probs[e] = expf(__fsub_rn(l[e], m));
    s = __fadd_rn(s, probs[e]);
  }
  for (int e = 0; e < E; ++e) probs[e] = __fdiv_rn(probs[e], s);
  int32_t ex[kMaxMoeTopK];
  float wt[kMaxMoeTopK];
  for (int r = 0; r < k; ++r) {  // rank order; ties to the lowest index; a taken expert's p is -1
    int best = 0;
    for (int e = 1; e < E; ++e)
      if (probs[e] > probs[best]) best = e;
    ex[r] = best;
    wt[r] = probs[best];
    probs[best] = -1.0f;
  }
  if (p.norm_topk_prob) {
    float sum = 0.0f;
    for (int r = 0; r < k; ++r) sum = __fadd_rn(sum, wt[r]);
    for (int r = 0; r < k; ++r) wt[r] = __fdiv_rn(wt[r], sum);
  }
  for (int i = 1; i < k; ++i)  // ascending expert index, weights alongside
    for (int j = i; j > 0 && ex[j - 1] > ex[j]; --j) {
      const int32_t te = ex[j - 1];
      ex[j - 1] = ex[j];
      ex[j] = te;
      const float tw = wt[j - 1];
      wt[j - 1] = wt[j];
      wt[j] = tw;
    }
  for (int r = 0; r < k; ++r) {
    p.experts[static_cast<long long>(t) * k + r] = ex[r];
    p.weights[static_cast<long long>(t) * k + r] = wt[r];
    if (p.routed != nullptr) p.routed[t * p.routed_stride + p.routed_offset + r] = ex[r];
  }
}

}  // namespace

Status moe_route(const MoeRouteArgs& a, cudaStream_t stream) {
  if (a.logits == nullptr || a.experts == nullptr || a.weights == nullptr)
    return invalid_argument("moe_route: logits, experts and weights must be device pointers");
  if (a.num_experts < 1 || a.num_experts > kMaxMoeExperts || a.top_k < 1 || a.top_k > kMaxMoeTopK ||
      a.top_k > a.num_experts || a.ld < a.num_experts)
    return invalid_argument("moe_route: " + std::to_string(a.num_experts) + " experts, top_k " +
                            std::to_string(a.top_k) + ": at most " + std::to_string(kMaxMoeExperts) +
                            " experts and top_k in [1, min(experts, " + std::to_string(kMaxMoeTopK) + ")]");
  if (a.num_tokens < 1 || a.num_tokens > 0x7fffffff) return invalid_argument("moe_route: token count out of range");
  RouteParams p{};
  p.logits = a.logits;
  p.ld = a.ld;
  p.num_tokens = static_cast<int>(a.num_tokens);
  p.num_experts = a.num_experts;
  p.top_k = a.top_k;
  p.norm_topk_prob = a.norm_topk_prob ? 1 : 0;
  p.experts = a.experts;
  p.weights = a.weights;
  p.routed = a.routed;
  p.routed_stride = a.routed_stride;
  p.routed_offset = a.routed_offset;
  const auto blocks = static_cast<unsigned>((a.num_tokens + kRouteThreads - 1) / kRouteThreads);
  moe_route_kernel<<<blocks, kRouteThreads, 0, stream>>>(p);
  return cuda_launch_status("moe_route_kernel");
}

}  // namespace vosti
