// VOSTI_HD: a function written once for host and device (__host__ __device__ __forceinline__
// under nvcc, plain inline C++ under g++), for arithmetic that must give the same bits on both
// (sampler_core.h, xxh3_core.h, collective/rank_order_sum.h).
#pragma once

#ifdef __CUDACC__
#define VOSTI_HD __host__ __device__ __forceinline__
#else
#define VOSTI_HD inline
#endif
