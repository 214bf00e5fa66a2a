// Device helpers of the paged attention (attention.h), shared by the production kernel and the
// tests' one-warp reference (tests/model_cuda/attention_reference.h): the pool's element
// offsets, widening loads and rounding stores of the pool and output dtypes, and the warp's
// butterfly max and sum whose order attention.h documents.
// Thread safety: pure device functions.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

#include "kernels/cuda/attention/attention.h"

namespace vosti::attention_detail {

inline constexpr unsigned kFullMask = 0xffffffffu;

__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) v = fmaxf(v, __shfl_xor_sync(kFullMask, v, offset));
  return v;
}

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) v = __fadd_rn(v, __shfl_xor_sync(kFullMask, v, offset));
  return v;  // identical bits in every lane: each step adds the same two values, commuted
}

__device__ __forceinline__ void store_out(float* out, int d, float v) { out[d] = v; }
__device__ __forceinline__ void store_out(__nv_bfloat16* out, int d, float v) { out[d] = __float2bfloat16_rn(v); }

__device__ __forceinline__ void store_kv(float* dst, float v) { *dst = v; }
__device__ __forceinline__ void store_kv(__nv_bfloat16* dst, float v) { *dst = __float2bfloat16_rn(v); }
__device__ __forceinline__ float load_kv(const float* p) { return *p; }
__device__ __forceinline__ float load_kv(const __nv_bfloat16* p) { return __bfloat162float(*p); }
// Four consecutive elements widened to f32 (16-byte f32 or 8-byte bf16 loads).
__device__ __forceinline__ float4 load_kv4(const float* p) { return *reinterpret_cast<const float4*>(p); }
__device__ __forceinline__ float4 load_kv4(const __nv_bfloat16* p) {
  const uint2 raw = *reinterpret_cast<const uint2*>(p);
  const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&raw);
  const float2 a = __bfloat1622float2(h[0]), b = __bfloat1622float2(h[1]);
  return make_float4(a.x, a.y, b.x, b.y);
}

// Element offset of (slot, kv head) in one layer's K or V: [block, head, offset, d].
__device__ __forceinline__ int64_t kv_offset(const CudaKvLayer& kv, int64_t block, int head, int offset) {
  return ((block * kv.num_kv_heads + head) * kv.block_size + offset) * static_cast<int64_t>(kv.head_dim);
}

}  // namespace vosti::attention_detail
