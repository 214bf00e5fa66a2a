// The deterministic all-reduce's arithmetic, written once for host and device (__host__
// __device__ under nvcc, plain inline C++ under g++): the sum of N ranks' copies of a message
// in rank order, and the share of it one thread of rank_order_sum's kernel (allreduce.h)
// computes. tests/kernels/rank_order_sum_test.cc runs the kernel's decomposition on the host
// (every thread of several grids) against the scalar reference; the GPU tests compare the
// device's bits with the same reference.
//
// The order (DESIGN.md rule 7), for element i of a message of `count` f32 values whose copy
// from rank r is copies[r * stride + i]:
//   s_0 = copy_0[i];  s_r = s_{r-1} + copy_r[i] (one IEEE f32 add, rounded to nearest even,
//   never fused);  out[i] = s_{N-1}.
// That is ((c_0 + c_1) + c_2) + ... + c_{N-1}: one left-to-right association, whatever the
// message size, the element's index, the grid or NCCL's tuning (NCCL only moves the copies).
// Thread decomposition: thread t of T threads computes the 4-element groups g = t, t + T, ...
// below num_groups (elements 4g .. 4g + 3, loaded as float4 on the device; num_groups = count / 4
// where every copy is 16-byte aligned, else 0), then the tail elements 4 * num_groups + t, + T,
// ...; which thread computes an element, and how it is loaded, never changes its chain.
// Thread safety: pure functions.
#pragma once

#include <cstdint>

#include "core/host_device.h"

namespace vosti::rank_order {

// a + b in IEEE f32, rounded to nearest even, never contracted.
VOSTI_HD float add(float a, float b) {
#ifdef __CUDA_ARCH__
  return __fadd_rn(a, b);
#else
  return a + b;
#endif
}

// The rank-order sum of element i: ((copies[i] + copies[stride + i]) + ...) over num_ranks copies.
VOSTI_HD float element(const float* copies, int64_t stride, int num_ranks, int64_t i) {
  float s = copies[i];
  for (int r = 1; r < num_ranks; ++r) s = add(s, copies[r * stride + i]);
  return s;
}

// Whether a message can be summed in float4 groups: every copy and out 16-byte aligned.
VOSTI_HD bool float4_aligned(const float* copies, int64_t stride, const float* out) {
  return stride % 4 == 0 && reinterpret_cast<uintptr_t>(copies) % 16 == 0 && reinterpret_cast<uintptr_t>(out) % 16 == 0;
}

// Thread t's share of out[count] = the rank-order sum of copies [num_ranks, stride] (see the
// header comment). REQUIRES: stride >= count; num_groups is count / 4 only where float4_aligned,
// else 0.
VOSTI_HD void thread_share(const float* copies, int64_t stride, int num_ranks, int64_t count, int64_t num_groups,
                           float* out, int64_t t, int64_t num_threads) {
  for (int64_t g = t; g < num_groups; g += num_threads) {
#ifdef __CUDA_ARCH__
    float4 s = reinterpret_cast<const float4*>(copies)[g];
    for (int r = 1; r < num_ranks; ++r) {
      const float4 c = reinterpret_cast<const float4*>(copies + r * stride)[g];
      s.x = add(s.x, c.x);
      s.y = add(s.y, c.y);
      s.z = add(s.z, c.z);
      s.w = add(s.w, c.w);
    }
    reinterpret_cast<float4*>(out)[g] = s;
#else
    for (int64_t i = 4 * g; i < 4 * g + 4; ++i) out[i] = element(copies, stride, num_ranks, i);
#endif
  }
  for (int64_t i = 4 * num_groups + t; i < count; i += num_threads) out[i] = element(copies, stride, num_ranks, i);
}

}  // namespace vosti::rank_order
