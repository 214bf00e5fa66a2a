// kv_write (attention.h): a step's K/V rows into their cache slots, rounded once to the pool dtype.
#include <cuda_bf16.h>

#include <string>

#include "kernels/cuda/attention/attention.h"
#include "kernels/cuda/attention/attention_device.cuh"
#include "kernels/cuda/attention/attention_kernels.h"
#include "kernels/cuda/cuda_status.h"

namespace vosti {
namespace {

using namespace attention_detail;

constexpr int kKvWriteThreads = 128;

// One block per token row: copies its K and V heads into their slot, rounded to KvT.
template <typename KvT>
__global__ void kv_write_kernel(const float* __restrict__ k_new, const float* __restrict__ v_new, int64_t row_stride,
                                const int32_t* __restrict__ slots, CudaKvLayer kv) {
  const int64_t r = blockIdx.x;
  const int64_t slot = slots[r];
  if (slot < 0 || slot >= kv.num_blocks * kv.block_size) return;
  const int64_t block = slot / kv.block_size;
  const int offset = static_cast<int>(slot % kv.block_size);
  const int hd = kv.head_dim;
  const float* ks = k_new + r * row_stride;
  const float* vs = v_new + r * row_stride;
  KvT* kd = static_cast<KvT*>(kv.k);
  KvT* vd = static_cast<KvT*>(kv.v);
  for (int i = threadIdx.x; i < kv.num_kv_heads * hd; i += blockDim.x) {
    const int h = i / hd, d = i % hd;
    const int64_t at = kv_offset(kv, block, h, offset) + d;
    store_kv(kd + at, ks[i]);
    store_kv(vd + at, vs[i]);
  }
}

}  // namespace

Status kv_write(const float* k_new, const float* v_new, int64_t row_stride, int64_t m, const int32_t* slots,
                CudaKvLayer kv, cudaStream_t stream) {
  VOSTI_RETURN_IF_ERROR(check_kv_layer("kv_write", kv));
  if (m < 0 || m > 0x7fffffff) return invalid_argument("kv_write: row count m=" + std::to_string(m) + " out of range");
  if (k_new == nullptr || v_new == nullptr || slots == nullptr)
    return invalid_argument("kv_write: null device pointer");
  if (row_stride < static_cast<int64_t>(kv.num_kv_heads) * kv.head_dim) {
    return invalid_argument("kv_write: row_stride " + std::to_string(row_stride) + " < num_kv_heads * head_dim");
  }
  if (m == 0) return Status();
  if (kv.dtype == DType::kF32) {
    kv_write_kernel<float>
        <<<static_cast<unsigned>(m), kKvWriteThreads, 0, stream>>>(k_new, v_new, row_stride, slots, kv);
  } else {
    kv_write_kernel<__nv_bfloat16>
        <<<static_cast<unsigned>(m), kKvWriteThreads, 0, stream>>>(k_new, v_new, row_stride, slots, kv);
  }
  return cuda_launch_status("kv_write");
}

}  // namespace vosti
