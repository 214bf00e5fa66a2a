// The device token masks; the order of work is documented in token_mask_kernels.h.
#include <math_constants.h>
#include <string>

#include "kernels/cuda/cuda_status.h"
#include "kernels/cuda/sampler/token_mask_kernels.h"

namespace vosti {
namespace {

constexpr int kMaskThreads = 256;

// blockIdx.y: the masked row i; blockIdx.x * kMaskThreads + threadIdx.x: the token.
__global__ void __launch_bounds__(kMaskThreads)
    token_mask_kernel(float* logits, int64_t row_stride, int64_t vocab, const int32_t* rows, const uint32_t* masks,
                      int64_t mask_words) {
  const int64_t t = static_cast<int64_t>(blockIdx.x) * kMaskThreads + threadIdx.x;
  if (t >= vocab) return;
  const uint32_t word = masks[static_cast<int64_t>(blockIdx.y) * mask_words + (t >> 5)];
  if (((word >> (t & 31)) & 1u) == 0) logits[static_cast<int64_t>(rows[blockIdx.y]) * row_stride + t] = -CUDART_INF_F;
}

}  // namespace

Status apply_token_masks(float* logits, int64_t row_stride, int64_t vocab, const int32_t* rows, const uint32_t* masks,
                         int64_t mask_words, int64_t num, cudaStream_t stream) {
  if (num == 0) return Status();
  if (vocab <= 0 || row_stride < vocab || mask_words < (vocab + 31) / 32 || num < 0 || num > 65535)
    return invalid_argument("apply_token_masks: bad sizes (vocab " + std::to_string(vocab) + ", row stride " +
                            std::to_string(row_stride) + ", mask words " + std::to_string(mask_words) + ", rows " +
                            std::to_string(num) + ")");
  const dim3 grid(static_cast<unsigned>((vocab + kMaskThreads - 1) / kMaskThreads), static_cast<unsigned>(num));
  token_mask_kernel<<<grid, kMaskThreads, 0, stream>>>(logits, row_stride, vocab, rows, masks, mask_words);
  return cuda_status(cudaGetLastError(), "token_mask_kernel launch");
}

}  // namespace vosti
