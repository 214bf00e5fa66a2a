// moe_combine (moe_kernels.h, step 6): per token and column, the k expert rows weighted and added
// in slot order (ascending expert) from +0.0, a rounded multiply then a rounded add each.
#include <string>

#include "kernels/cuda/cuda_status.h"
#include "kernels/cuda/moe/moe_kernels.h"

namespace vosti {
namespace {

constexpr int kCombineThreads = 256;

// blockIdx.x: the token; threads over its columns.
__global__ void __launch_bounds__(kCombineThreads)
    moe_combine_kernel(const float* y_perm, const int32_t* pos, const float* weights, int top_k, int hidden,
                       float* out) {
  const long long t = blockIdx.x;
  const int32_t* tp = pos + t * top_k;
  const float* tw = weights + t * top_k;
  for (int c = static_cast<int>(threadIdx.x); c < hidden; c += kCombineThreads) {
    float o = 0.0f;
    for (int r = 0; r < top_k; ++r)
      o = __fadd_rn(o, __fmul_rn(y_perm[static_cast<long long>(tp[r]) * hidden + c], tw[r]));
    out[t * hidden + c] = o;
  }
}

}  // namespace

Status moe_combine(const float* y_perm, const int32_t* pos, const float* weights, int64_t num_tokens, int top_k,
                   int64_t hidden, float* out, cudaStream_t stream) {
  if (y_perm == nullptr || pos == nullptr || weights == nullptr || out == nullptr)
    return invalid_argument("moe_combine: y_perm, pos, weights and out must be device pointers");
  if (num_tokens < 1 || num_tokens > 0x7fffffff || top_k < 1 || hidden < 1 || hidden > 0x7fffffff)
    return invalid_argument("moe_combine: " + std::to_string(num_tokens) + " tokens, top_k " + std::to_string(top_k) +
                            ", hidden " + std::to_string(hidden) + " out of range");
  moe_combine_kernel<<<static_cast<unsigned>(num_tokens), kCombineThreads, 0, stream>>>(y_perm, pos, weights, top_k,
                                                                                        static_cast<int>(hidden), out);
  return cuda_launch_status("moe_combine_kernel");
}

}  // namespace vosti
