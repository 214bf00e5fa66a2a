// Row-wise kernels; reduction orders are documented in row_kernels.h.
#include <cuda_bf16.h>

#include <algorithm>
#include <string>

#include "kernels/cuda/cuda_status.h"
#include "kernels/cuda/rows/row_kernels.h"
#include "kernels/ref/scalar_math.h"

namespace vosti {
namespace {

constexpr int kWarpsPerRowBlock = kRowThreads / 32;
constexpr int kHeadWarpsPerBlock = 8;
constexpr int kElementThreads = 256;

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) v = __fadd_rn(v, __shfl_xor_sync(0xffffffffu, v, offset));
  return v;  // identical bits in every lane: each step adds the same two values, commuted
}

__device__ __forceinline__ void store4(float* y, size_t i, float4 v) { *reinterpret_cast<float4*>(y + i) = v; }
__device__ __forceinline__ void store4(__nv_bfloat16* y, size_t i, float4 v) {
  __nv_bfloat162 lo = __floats2bfloat162_rn(v.x, v.y);
  __nv_bfloat162 hi = __floats2bfloat162_rn(v.z, v.w);
  uint2 packed;
  packed.x = *reinterpret_cast<unsigned*>(&lo);
  packed.y = *reinterpret_cast<unsigned*>(&hi);
  *reinterpret_cast<uint2*>(y + i) = packed;
}

__global__ void embedding_kernel(const __nv_bfloat16* __restrict__ table, int64_t vocab, int64_t hidden,
                                 const int32_t* __restrict__ ids, float scale, float* __restrict__ out) {
  const int64_t r = blockIdx.x;
  const int32_t id = ids[r];
  float* dst = out + r * hidden;
  if (id < 0 || id >= vocab) {
    for (int64_t i = threadIdx.x; i < hidden; i += blockDim.x) dst[i] = __int_as_float(0x7fc00000);
    return;
  }
  const __nv_bfloat16* src = table + static_cast<int64_t>(id) * hidden;
  // 4 elements a thread: one 8-byte load, one 16-byte store, so that every store instruction
  // of a warp covers whole 32-byte sectors (no partial-sector writes).
#pragma unroll 4
  for (int64_t i = threadIdx.x * 4; i < hidden; i += blockDim.x * 4) {  // hidden % 8 == 0
    const uint2 raw = *reinterpret_cast<const uint2*>(src + i);
    const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&raw);
    const float2 a = __bfloat1622float2(h[0]), b = __bfloat1622float2(h[1]);
    if (scale == 1.0f) {
      store4(dst, i, make_float4(a.x, a.y, b.x, b.y));
    } else {
      store4(dst, i,
             make_float4(__fmul_rn(a.x, scale), __fmul_rn(a.y, scale), __fmul_rn(b.x, scale), __fmul_rn(b.y, scale)));
    }
  }
}

// One block per output row r, reading input row rows[r] (r itself when rows is null).
// kAdd: residual + delta is the normalised row; it is stored back into the residual only when
// rows is null (the gathered form leaves the residual as it is, so calling it twice is harmless).
template <typename OutT, bool kAdd>
__global__ void __launch_bounds__(kRowThreads) rms_norm_kernel(float* x, const float* delta, const int32_t* rows,
                                                               int64_t n, const float* weight, float eps, OutT* y) {
  __shared__ float warp_sums[kWarpsPerRowBlock];
  const int64_t r = blockIdx.x;
  const int64_t src = rows != nullptr ? rows[r] : r;
  const bool write_back = rows == nullptr;
  float* xr = x + src * n;
  const int64_t groups = n / 4;
  const auto row_value = [&](int64_t gi) {
    float4 v = *reinterpret_cast<const float4*>(xr + gi * 4);
    if constexpr (kAdd) {
      const float4 d = *reinterpret_cast<const float4*>(delta + src * n + gi * 4);
      v = make_float4(__fadd_rn(v.x, d.x), __fadd_rn(v.y, d.y), __fadd_rn(v.z, d.z), __fadd_rn(v.w, d.w));
    }
    return v;
  };
  float acc = 0.f;
  for (int64_t gi = threadIdx.x; gi < groups; gi += kRowThreads) {
    const float4 v = row_value(gi);
    acc = __fmaf_rn(v.x, v.x, acc);
    acc = __fmaf_rn(v.y, v.y, acc);
    acc = __fmaf_rn(v.z, v.z, acc);
    acc = __fmaf_rn(v.w, v.w, acc);
  }
  acc = warp_sum(acc);
  if ((threadIdx.x & 31) == 0) warp_sums[threadIdx.x >> 5] = acc;
  __syncthreads();
  float ss = warp_sums[0];
#pragma unroll
  for (int w = 1; w < kWarpsPerRowBlock; ++w) ss = __fadd_rn(ss, warp_sums[w]);
  const float inv = __frcp_rn(__fsqrt_rn(__fadd_rn(__fdiv_rn(ss, static_cast<float>(n)), eps)));
  for (int64_t gi = threadIdx.x; gi < groups; gi += kRowThreads) {
    const float4 v = row_value(gi);  // the same adds as above, so the same bits
    if (kAdd && write_back) store4(xr, gi * 4, v);
    const float4 w = *reinterpret_cast<const float4*>(weight + gi * 4);
    store4(y + r * n, gi * 4,
           make_float4(__fmul_rn(__fmul_rn(v.x, inv), w.x), __fmul_rn(__fmul_rn(v.y, inv), w.y),
                       __fmul_rn(__fmul_rn(v.z, inv), w.z), __fmul_rn(__fmul_rn(v.w, inv), w.w)));
  }
}

// One warp per (row, head).
__global__ void head_rms_norm_kernel(float* x, int64_t row_stride, int64_t num_items, int num_heads, int head_dim,
                                     const float* weight, float eps) {
  const int64_t item = static_cast<int64_t>(blockIdx.x) * kHeadWarpsPerBlock + (threadIdx.x >> 5);
  if (item >= num_items) return;
  const int lane = threadIdx.x & 31;
  float* xh = x + (item / num_heads) * row_stride + (item % num_heads) * head_dim;
  float acc = 0.f;
  for (int i = lane; i < head_dim; i += 32) acc = __fmaf_rn(xh[i], xh[i], acc);
  acc = warp_sum(acc);
  const float inv = __frcp_rn(__fsqrt_rn(__fadd_rn(__fdiv_rn(acc, static_cast<float>(head_dim)), eps)));
  for (int i = lane; i < head_dim; i += 32) xh[i] = __fmul_rn(__fmul_rn(xh[i], inv), weight[i]);
}

// One thread per rotated pair (row, head, i < head_dim / 2).
__global__ void rope_kernel(float* x, int64_t row_stride, int64_t num_pairs, int num_heads, int head_dim,
                            const int32_t* positions, const float* inv_freq, int gptj) {
  const int64_t t = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (t >= num_pairs) return;
  const int half = head_dim / 2;
  const int i = static_cast<int>(t % half);
  const int64_t rh = t / half;
  const int64_t r = rh / num_heads;
  float* xh = x + r * row_stride + (rh % num_heads) * head_dim;
  const float angle = __fmul_rn(static_cast<float>(positions[r]), inv_freq[i]);
  const float c = cosf(angle);
  const float s = sinf(angle);
  const int i0 = gptj ? 2 * i : i;
  const int i1 = gptj ? 2 * i + 1 : i + half;
  const float x0 = xh[i0], x1 = xh[i1];
  xh[i0] = __fsub_rn(__fmul_rn(x0, c), __fmul_rn(x1, s));
  xh[i1] = __fadd_rn(__fmul_rn(x1, c), __fmul_rn(x0, s));
}

// One block per row: cos/sin of the row's position computed once into shared memory, then
// each thread rotates 4 pairs at a time with 16-byte accesses. REQUIRES: head_dim % 8 == 0,
// half <= kMaxRopeHalf, 16-byte aligned rows.
constexpr int kMaxRopeHalf = 256;
template <bool kGptj>
__global__ void rope_row_kernel(float* __restrict__ x, int64_t row_stride, int num_heads, int head_dim,
                                const int32_t* __restrict__ positions, const float* __restrict__ inv_freq) {
  __shared__ float cos_t[kMaxRopeHalf];
  __shared__ float sin_t[kMaxRopeHalf];
  const int half = head_dim / 2;
  const int64_t r = blockIdx.x;
  const float pos = static_cast<float>(positions[r]);
  for (int i = threadIdx.x; i < half; i += blockDim.x) {
    const float angle = __fmul_rn(pos, inv_freq[i]);
    cos_t[i] = cosf(angle);
    sin_t[i] = sinf(angle);
  }
  __syncthreads();
  float* xr = x + r * row_stride;
  const int quads = half / 4;  // groups of 4 pairs per head
  for (int t = threadIdx.x; t < num_heads * quads; t += blockDim.x) {
    float* xh = xr + (t / quads) * head_dim;
    const int i = (t % quads) * 4;
    if constexpr (kGptj) {  // pairs (2i, 2i+1): two float4 hold pairs i..i+3
      float4 a = *reinterpret_cast<const float4*>(xh + 2 * i);
      float4 b = *reinterpret_cast<const float4*>(xh + 2 * i + 4);
      const float4 na = make_float4(__fsub_rn(__fmul_rn(a.x, cos_t[i]), __fmul_rn(a.y, sin_t[i])),
                                    __fadd_rn(__fmul_rn(a.y, cos_t[i]), __fmul_rn(a.x, sin_t[i])),
                                    __fsub_rn(__fmul_rn(a.z, cos_t[i + 1]), __fmul_rn(a.w, sin_t[i + 1])),
                                    __fadd_rn(__fmul_rn(a.w, cos_t[i + 1]), __fmul_rn(a.z, sin_t[i + 1])));
      const float4 nb = make_float4(__fsub_rn(__fmul_rn(b.x, cos_t[i + 2]), __fmul_rn(b.y, sin_t[i + 2])),
                                    __fadd_rn(__fmul_rn(b.y, cos_t[i + 2]), __fmul_rn(b.x, sin_t[i + 2])),
                                    __fsub_rn(__fmul_rn(b.z, cos_t[i + 3]), __fmul_rn(b.w, sin_t[i + 3])),
                                    __fadd_rn(__fmul_rn(b.w, cos_t[i + 3]), __fmul_rn(b.z, sin_t[i + 3])));
      *reinterpret_cast<float4*>(xh + 2 * i) = na;
      *reinterpret_cast<float4*>(xh + 2 * i + 4) = nb;
    } else {  // pairs (i, i + half)
      const float4 a = *reinterpret_cast<const float4*>(xh + i);
      const float4 b = *reinterpret_cast<const float4*>(xh + half + i);
      const float c[4] = {cos_t[i], cos_t[i + 1], cos_t[i + 2], cos_t[i + 3]};
      const float sn[4] = {sin_t[i], sin_t[i + 1], sin_t[i + 2], sin_t[i + 3]};
      const float av[4] = {a.x, a.y, a.z, a.w};
      const float bv[4] = {b.x, b.y, b.z, b.w};
      float na[4], nb[4];
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        na[j] = __fsub_rn(__fmul_rn(av[j], c[j]), __fmul_rn(bv[j], sn[j]));
        nb[j] = __fadd_rn(__fmul_rn(bv[j], c[j]), __fmul_rn(av[j], sn[j]));
      }
      *reinterpret_cast<float4*>(xh + i) = make_float4(na[0], na[1], na[2], na[3]);
      *reinterpret_cast<float4*>(xh + half + i) = make_float4(nb[0], nb[1], nb[2], nb[3]);
    }
  }
}

__device__ __forceinline__ float silu_times(float g, float u) {
  return __fmul_rn(__fdiv_rn(g, __fadd_rn(1.0f, expf(-g))), u);
}

// scalar_math.h's gelu_tanh_times, operation for operation (expf for exp_f32).
__device__ __forceinline__ float gelu_tanh_times(float g, float u) {
  const float c = __fmul_rn(__fmul_rn(g, g), g);
  const float s = __fadd_rn(g, __fmul_rn(kGeluKappa, c));
  const float e = expf(-__fmul_rn(kGeluTwoBeta, s));
  return __fmul_rn(__fdiv_rn(g, __fadd_rn(1.0f, e)), u);
}

template <MlpActivation kAct>
__device__ __forceinline__ float gated(float g, float u) {
  if constexpr (kAct == MlpActivation::kSilu) {
    return silu_times(g, u);
  } else {
    return gelu_tanh_times(g, u);
  }
}

// Rows along blockIdx.y (a grid-stride loop past 65535 rows), four-column groups along x: each
// thread loads kGatedGroups groups of gate and of up before it computes (128 bytes in flight), and
// no 64-bit division locates a row. Elementwise: no reduction, nothing depends on m but the loop.
constexpr int kGatedGroups = 2;
template <MlpActivation kAct, typename OutT>
__global__ void __launch_bounds__(kElementThreads)
    gated_mul_kernel(const float* __restrict__ gate_up, int64_t m, int64_t n, OutT* __restrict__ y) {
  const int64_t groups = n / 4;
  const int64_t g0 = static_cast<int64_t>(blockIdx.x) * (kElementThreads * kGatedGroups) + threadIdx.x;
  for (int64_t r = blockIdx.y; r < m; r += gridDim.y) {
    const float* gate = gate_up + r * 2 * n;
    float4 g[kGatedGroups], u[kGatedGroups];
#pragma unroll
    for (int i = 0; i < kGatedGroups; ++i) {
      const int64_t gi = g0 + i * kElementThreads;
      if (gi < groups) {
        g[i] = __ldcs(reinterpret_cast<const float4*>(gate) + gi);
        u[i] = __ldcs(reinterpret_cast<const float4*>(gate + n) + gi);
      }
    }
#pragma unroll
    for (int i = 0; i < kGatedGroups; ++i) {
      const int64_t gi = g0 + i * kElementThreads;
      if (gi < groups) {
        store4(y, static_cast<size_t>(r * n + gi * 4),
               make_float4(gated<kAct>(g[i].x, u[i].x), gated<kAct>(g[i].y, u[i].y), gated<kAct>(g[i].z, u[i].z),
                           gated<kAct>(g[i].w, u[i].w)));
      }
    }
  }
}

// scalar_math.h's tanh_f32 (expf for exp_f32), then the soft-cap cap * tanh(v / cap).
__device__ __forceinline__ float softcap_value(float v, float cap) {
  const float x = __fdiv_rn(v, cap);
  if (isnan(x)) return __fmul_rn(x, cap);
  const float a = fabsf(x);
  const float t = __fsub_rn(1.0f, __fdiv_rn(2.0f, __fadd_rn(expf(__fmul_rn(2.0f, a)), 1.0f)));
  return __fmul_rn(copysignf(t, x), cap);
}

__global__ void softcap_kernel(float* y, int64_t m, int64_t n, int64_t row_stride, float cap) {
  for (int64_t r = blockIdx.y; r < m; r += gridDim.y) {
    float* row = y + r * row_stride;
    for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
         i += static_cast<int64_t>(gridDim.x) * blockDim.x)
      row[i] = softcap_value(row[i], cap);
  }
}

__global__ void bias_add_kernel(float* y, int64_t m, int64_t n, const float* bias) {
  const int64_t t = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t groups = n / 4;
  if (t >= m * groups) return;
  const int64_t c = (t % groups) * 4;
  float4 v = *reinterpret_cast<const float4*>(y + t * 4);
  const float4 b = *reinterpret_cast<const float4*>(bias + c);
  v = make_float4(__fadd_rn(v.x, b.x), __fadd_rn(v.y, b.y), __fadd_rn(v.z, b.z), __fadd_rn(v.w, b.w));
  store4(y, static_cast<size_t>(t * 4), v);
}

Status check_rows(const char* op, int64_t m, int64_t n, int64_t n_multiple) {
  if (m < 0 || m > 0x7fffffff)
    return invalid_argument(std::string(op) + ": row count m=" + std::to_string(m) + " out of range");
  if (n <= 0 || n % n_multiple != 0) {
    return invalid_argument(std::string(op) + ": row width " + std::to_string(n) + " must be a positive multiple of " +
                            std::to_string(n_multiple));
  }
  return Status();
}

Status check_out_dtype(const char* op, DType t) {
  if (t == DType::kF32 || t == DType::kBF16) return Status();
  return invalid_argument(std::string(op) + ": output dtype must be f32 or bf16");
}

unsigned grid_for(int64_t threads, int block) { return static_cast<unsigned>((threads + block - 1) / block); }

template <bool kAdd>
Status launch_rms_norm(const char* op, float* x, const float* delta, const int32_t* rows, int64_t m, int64_t n,
                       const float* weight, float eps, void* y, DType y_dtype, cudaStream_t stream) {
  const Status rows_ok = check_rows(op, m, n, 4);
  if (!rows_ok.ok()) return rows_ok;
  const Status dtype_ok = check_out_dtype(op, y_dtype);
  if (!dtype_ok.ok()) return dtype_ok;
  if (x == nullptr || weight == nullptr || y == nullptr || (kAdd && delta == nullptr)) {
    return invalid_argument(std::string(op) + ": null device pointer");
  }
  if (m == 0) return Status();
  if (y_dtype == DType::kF32) {
    rms_norm_kernel<float, kAdd>
        <<<static_cast<unsigned>(m), kRowThreads, 0, stream>>>(x, delta, rows, n, weight, eps, static_cast<float*>(y));
  } else {
    rms_norm_kernel<__nv_bfloat16, kAdd><<<static_cast<unsigned>(m), kRowThreads, 0, stream>>>(
        x, delta, rows, n, weight, eps, static_cast<__nv_bfloat16*>(y));
  }
  return cuda_launch_status(op);
}

template <MlpActivation kAct>
void launch_gated_mul(dim3 grid, const float* gate_up, int64_t m, int64_t n, void* y, DType y_dtype,
                      cudaStream_t stream) {
  if (y_dtype == DType::kF32) {
    gated_mul_kernel<kAct, float><<<grid, kElementThreads, 0, stream>>>(gate_up, m, n, static_cast<float*>(y));
  } else {
    gated_mul_kernel<kAct, __nv_bfloat16>
        <<<grid, kElementThreads, 0, stream>>>(gate_up, m, n, static_cast<__nv_bfloat16*>(y));
  }
}

}  // namespace

Status embedding_gather(const uint16_t* table, int64_t vocab, int64_t hidden, const int32_t* ids, int64_t m,
                        float scale, float* out, cudaStream_t stream) {
  Status s = check_rows("embedding_gather", m, hidden, 8);
  if (!s.ok()) return s;
  if (table == nullptr || ids == nullptr || out == nullptr)
    return invalid_argument("embedding_gather: null device pointer");
  if (vocab <= 0) return invalid_argument("embedding_gather: vocab must be positive");
  if (m == 0) return Status();
  embedding_kernel<<<static_cast<unsigned>(m), 128, 0, stream>>>(reinterpret_cast<const __nv_bfloat16*>(table), vocab,
                                                                 hidden, ids, scale, out);
  return cuda_launch_status("embedding_gather");
}

Status rms_norm(const float* x, int64_t m, int64_t n, const float* weight, float eps, void* y, DType y_dtype,
                cudaStream_t stream) {
  return launch_rms_norm<false>("rms_norm", const_cast<float*>(x), nullptr, nullptr, m, n, weight, eps, y, y_dtype,
                                stream);
}

Status add_rms_norm(float* residual, const float* delta, int64_t m, int64_t n, const float* weight, float eps, void* y,
                    DType y_dtype, cudaStream_t stream) {
  return launch_rms_norm<true>("add_rms_norm", residual, delta, nullptr, m, n, weight, eps, y, y_dtype, stream);
}

Status add_rms_norm_rows(float* residual, const float* delta, const int32_t* rows, int64_t m, int64_t n,
                         const float* weight, float eps, void* y, DType y_dtype, cudaStream_t stream) {
  if (rows == nullptr) return invalid_argument("add_rms_norm_rows: null row indices");
  if (delta == nullptr)
    return launch_rms_norm<false>("rms_norm_rows", residual, nullptr, rows, m, n, weight, eps, y, y_dtype, stream);
  return launch_rms_norm<true>("add_rms_norm_rows", residual, delta, rows, m, n, weight, eps, y, y_dtype, stream);
}

Status head_rms_norm(float* x, int64_t row_stride, int64_t m, int num_heads, int head_dim, const float* weight,
                     float eps, cudaStream_t stream) {
  Status s = check_rows("head_rms_norm", m, head_dim, 1);
  if (!s.ok()) return s;
  if (num_heads <= 0 || row_stride < static_cast<int64_t>(num_heads) * head_dim) {
    return invalid_argument("head_rms_norm: need num_heads > 0 and row_stride >= num_heads * head_dim");
  }
  if (x == nullptr || weight == nullptr) return invalid_argument("head_rms_norm: null device pointer");
  const int64_t items = m * num_heads;
  if (items == 0) return Status();
  head_rms_norm_kernel<<<grid_for(items, kHeadWarpsPerBlock), kHeadWarpsPerBlock * 32, 0, stream>>>(
      x, row_stride, items, num_heads, head_dim, weight, eps);
  return cuda_launch_status("head_rms_norm");
}

Status rope(float* x, int64_t row_stride, int64_t m, int num_heads, int head_dim, const int32_t* positions,
            const float* inv_freq, RopeLayout layout, cudaStream_t stream) {
  Status s = check_rows("rope", m, head_dim, 2);
  if (!s.ok()) return s;
  if (num_heads <= 0 || row_stride < static_cast<int64_t>(num_heads) * head_dim) {
    return invalid_argument("rope: need num_heads > 0 and row_stride >= num_heads * head_dim");
  }
  if (x == nullptr || positions == nullptr || inv_freq == nullptr) return invalid_argument("rope: null device pointer");
  const int64_t pairs = m * num_heads * (head_dim / 2);
  if (pairs == 0) return Status();
  const bool aligned = reinterpret_cast<uintptr_t>(x) % 16 == 0 && row_stride % 4 == 0;
  if (head_dim % 8 == 0 && head_dim / 2 <= kMaxRopeHalf && aligned) {
    if (layout == RopeLayout::kGptj) {
      rope_row_kernel<true>
          <<<static_cast<unsigned>(m), 128, 0, stream>>>(x, row_stride, num_heads, head_dim, positions, inv_freq);
    } else {
      rope_row_kernel<false>
          <<<static_cast<unsigned>(m), 128, 0, stream>>>(x, row_stride, num_heads, head_dim, positions, inv_freq);
    }
    return cuda_launch_status("rope");
  }
  rope_kernel<<<grid_for(pairs, kElementThreads), kElementThreads, 0, stream>>>(
      x, row_stride, pairs, num_heads, head_dim, positions, inv_freq, layout == RopeLayout::kGptj ? 1 : 0);
  return cuda_launch_status("rope");
}

Status gated_mul(MlpActivation act, const float* gate_up, int64_t m, int64_t n, void* y, DType y_dtype,
                 cudaStream_t stream) {
  const char* op = act == MlpActivation::kSilu ? "silu_mul" : "gelu_tanh_mul";
  const Status rows_ok = check_rows(op, m, n, 4);
  if (!rows_ok.ok()) return rows_ok;
  const Status dtype_ok = check_out_dtype(op, y_dtype);
  if (!dtype_ok.ok()) return dtype_ok;
  if (gate_up == nullptr || y == nullptr) return invalid_argument(std::string(op) + ": null device pointer");
  if (m == 0) return Status();
  const dim3 grid(grid_for(n / 4, kElementThreads * kGatedGroups), static_cast<unsigned>(std::min<int64_t>(m, 65535)));
  if (act == MlpActivation::kSilu) {
    launch_gated_mul<MlpActivation::kSilu>(grid, gate_up, m, n, y, y_dtype, stream);
  } else {
    launch_gated_mul<MlpActivation::kGeluTanh>(grid, gate_up, m, n, y, y_dtype, stream);
  }
  return cuda_launch_status(op);
}

Status silu_mul(const float* gate_up, int64_t m, int64_t n, void* y, DType y_dtype, cudaStream_t stream) {
  return gated_mul(MlpActivation::kSilu, gate_up, m, n, y, y_dtype, stream);
}

Status softcap(float* y, int64_t m, int64_t n, int64_t row_stride, float cap, cudaStream_t stream) {
  Status s = check_rows("softcap", m, n, 1);
  if (!s.ok()) return s;
  if (y == nullptr) return invalid_argument("softcap: null device pointer");
  if (row_stride < n) return invalid_argument("softcap: row_stride below the row width");
  if (!(cap > 0.0f)) return invalid_argument("softcap: the cap must be positive");
  if (m == 0) return Status();
  const dim3 grid(grid_for(n, kElementThreads), static_cast<unsigned>(std::min<int64_t>(m, 65535)));
  softcap_kernel<<<grid, kElementThreads, 0, stream>>>(y, m, n, row_stride, cap);
  return cuda_launch_status("softcap");
}

Status bias_add(float* y, int64_t m, int64_t n, const float* bias, cudaStream_t stream) {
  Status s = check_rows("bias_add", m, n, 4);
  if (!s.ok()) return s;
  if (y == nullptr || bias == nullptr) return invalid_argument("bias_add: null device pointer");
  const int64_t threads = m * (n / 4);
  if (threads == 0) return Status();
  bias_add_kernel<<<grid_for(threads, kElementThreads), kElementThreads, 0, stream>>>(y, m, n, bias);
  return cuda_launch_status("bias_add");
}

}  // namespace vosti
