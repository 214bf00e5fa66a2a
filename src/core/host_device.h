// VOSTI_HD: a function written once for host and device (__host__ __device__ __forceinline__
// under nvcc, plain inline C++ under g++), for arithmetic that must give the same bits on both
// (sample/sampler_scalar.h, sample/philox.h, sample/xxh3.h, the attention window rule of
// kernels/kernel_backend.h; dev/tensor_parallel/collective/rank_order_sum.h, parked).
#pragma once

#ifdef __CUDACC__
#define VOSTI_HD __host__ __device__ __forceinline__
#else
#define VOSTI_HD inline
#endif
