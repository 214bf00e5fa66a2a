// The device XXH3-128 of logits rows; the order of work is documented in digest_kernels.h.
#include <string>

#include "kernels/cuda/cuda_status.h"
#include "kernels/cuda/sampler/digest_kernels.h"
#include "sample/xxh3.h"

namespace vosti {
namespace {

constexpr int kDigestThreads = 256;
__constant__ uint8_t kSecret[xxh3::kSecretBytes] = VOSTI_XXH3_SECRET_BYTES;

__global__ void __launch_bounds__(kDigestThreads) digest_kernel(const float* __restrict__ logits, int64_t row_stride,
                                                                int64_t vocab, const int32_t* rows, uint64_t* digests) {
  __shared__ uint64_t contrib[kDigestThreads][xxh3::kLanes];  // [blocks of one round][lane]
  __shared__ xxh3::SecretWords sw;
  __shared__ uint64_t acc_s[xxh3::kLanes];
  if (threadIdx.x == 0) sw = xxh3::secret_words(kSecret);
  __syncthreads();
  const uint8_t* input = reinterpret_cast<const uint8_t*>(logits + static_cast<int64_t>(rows[blockIdx.x]) * row_stride);
  const size_t len = static_cast<size_t>(vocab) * sizeof(float);
  const size_t nb = xxh3::num_full_blocks(len);
  uint64_t acc = 0;  // lane threadIdx.x's accumulator (threads < kLanes)
  if (threadIdx.x < xxh3::kLanes) {
    uint64_t init[xxh3::kLanes];
    xxh3::init_acc(init);
    acc = init[threadIdx.x];
  }
  for (size_t round = 0; round < nb; round += kDigestThreads) {
    const size_t b = round + threadIdx.x;
    if (b < nb) {
      for (int i = 0; i < xxh3::kLanes; ++i)
        contrib[threadIdx.x][i] = xxh3::block_contrib(input + b * xxh3::kBlockBytes, xxh3::kStripesPerBlock, sw, i);
    }
    __syncthreads();
    if (threadIdx.x < xxh3::kLanes) {
      const size_t n = nb - round < kDigestThreads ? nb - round : kDigestThreads;
      for (size_t k = 0; k < n; ++k) acc = xxh3::scramble(acc + contrib[k][threadIdx.x], sw, threadIdx.x);
    }
    __syncthreads();
  }
  if (threadIdx.x < xxh3::kLanes) acc_s[threadIdx.x] = acc;
  __syncthreads();
  if (threadIdx.x == 0) {
    uint64_t a[xxh3::kLanes];
    for (int i = 0; i < xxh3::kLanes; ++i) a[i] = acc_s[i];
    uint64_t lo = 0, hi = 0;
    xxh3::finish(a, input, len, kSecret, sw, &lo, &hi);
    digests[2 * blockIdx.x] = lo;
    digests[2 * blockIdx.x + 1] = hi;
  }
}

}  // namespace

Status digest_rows(const float* logits, int64_t row_stride, int64_t vocab, const int32_t* rows, int64_t num,
                   uint64_t* digests, cudaStream_t stream) {
  if (vocab < kMinDeviceDigestVocab || vocab > (int64_t{1} << 28))
    return invalid_argument("digest_rows: vocabulary " + std::to_string(vocab) + " outside [" +
                            std::to_string(kMinDeviceDigestVocab) + ", 2^28]");
  if (row_stride < vocab || num < 0 || num > 0x7fffffff) return invalid_argument("digest_rows: bad sizes");
  if (num == 0) return Status();
  if (logits == nullptr || rows == nullptr || digests == nullptr) return invalid_argument("digest_rows: null pointer");
  digest_kernel<<<static_cast<unsigned>(num), kDigestThreads, 0, stream>>>(logits, row_stride, vocab, rows, digests);
  return cuda_launch_status("digest_kernel");
}

}  // namespace vosti
