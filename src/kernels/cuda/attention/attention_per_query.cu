// The per-query paged attention (attention.h, family 2) and the KV cache write; the reduction
// order is documented in attention.h.
#include <cuda_bf16.h>

#include <string>

#include "kernels/cuda/attention/attention.h"
#include "kernels/cuda/attention/attention_device.cuh"
#include "kernels/cuda/attention/attention_kernels.h"
#include "kernels/cuda/cuda_status.h"

namespace vosti {
namespace {

using namespace attention_detail;

constexpr int kAttnThreads = 128;  // one CTA per (query, head)
constexpr int kTilesPerChunk = kAttnThreads / kKvTile;
constexpr int kDimsPerThread = kMaxCudaHeadDim / kAttnThreads;
static_assert(kKvTile == 32, "attention maps one KV tile onto the 32 lanes of a warp");
static_assert(kAttnThreads % kKvTile == 0, "a chunk holds whole KV tiles");

// Dot product of q (shared memory) with a cached key row, in increasing d, one fma at a time:
// s = fma(q[d], k[d], s) from +0. Wide loads only change how elements arrive; kHd > 0 unrolls
// the row (all its loads in flight at once), kHd == 0 reads hd at run time.
template <int kHd, typename KvT>
__device__ __forceinline__ float dot_row(const float* qs, const KvT* k, int hd) {
  const int n = kHd > 0 ? kHd : hd;
  float dot = 0.f;
  bool wide = false;  // bf16 rows in 16-byte pieces
  if constexpr (sizeof(KvT) == 2) wide = n % 8 == 0;
  if (wide) {
#pragma unroll
    for (int c = 0; c < n; c += 8) {
      const uint4 raw = *reinterpret_cast<const uint4*>(k + c);
      const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&raw);
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const float2 f = __bfloat1622float2(h[e]);
        dot = __fmaf_rn(qs[c + 2 * e], f.x, dot);
        dot = __fmaf_rn(qs[c + 2 * e + 1], f.y, dot);
      }
    }
  } else {
#pragma unroll
    for (int c = 0; c < n; c += 4) {
      const float4 kk = load_kv4(k + c);
      dot = __fmaf_rn(qs[c], kk.x, dot);
      dot = __fmaf_rn(qs[c + 1], kk.y, dot);
      dot = __fmaf_rn(qs[c + 2], kk.z, dot);
      dot = __fmaf_rn(qs[c + 3], kk.w, dot);
    }
  }
  return dot;
}

// An asynchronous copy of `bytes` (4, 8 or 16) from global to shared memory (cp.async, sm_80+).
template <int kBytes>
__device__ __forceinline__ void copy_async(void* smem, const void* global) {
  const unsigned dst = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  if constexpr (kBytes == 16) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(dst), "l"(global));
  } else {
    asm volatile("cp.async.ca.shared.global [%0], [%1], %2;\n" ::"r"(dst), "l"(global), "n"(kBytes));
  }
}
__device__ __forceinline__ void copy_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
__device__ __forceinline__ void copy_async_wait_all() { asm volatile("cp.async.wait_all;\n" ::: "memory"); }

// One CTA of kAttnThreads threads per (query row blockIdx.x, head blockIdx.y), walking the
// query's positions f..p in chunks of kAttnThreads (kTilesPerChunk KV tiles) from the chunk of f,
// skipping the tiles wholly before f:
//   0. the chunk's V rows are copied to shared memory (cp.async, every thread a piece) while
//   A. thread i scores position chunk + i (its fma chain over d, then * scale; K read directly);
//   B. warp 0 runs the tiles' online softmax in tile order, lane l holding position
//      32 t + l exactly as attention.h orders it (max, expf, the butterfly sum, alpha, L);
//   C. each thread owns output dims d = i, i + kAttnThreads: O[d] = O[d] * alpha_t, then
//      fma(p_j, v_j[d], O[d]) for j of the tile in order, v_j read from shared memory.
// Every value is computed by the same operations in the same order as attention.h states;
// the work is only spread over more threads than one warp.
// Dynamic shared memory: [kAttnThreads, hd] KvT, the chunk's V rows.
template <typename KvT, typename OutT, int kHd>
__global__ void __launch_bounds__(kAttnThreads)
    attention_kernel(const float* __restrict__ q, int64_t q_row_stride, int num_heads,
                     const int32_t* __restrict__ positions, const int32_t* __restrict__ row_seq,
                     const int32_t* __restrict__ block_tables, const int32_t* __restrict__ block_table_stride,
                     float scale, int window, OutT* __restrict__ out, int64_t out_row_stride, CudaKvLayer kv) {
  extern __shared__ __align__(16) unsigned char v_smem[];  // [kAttnThreads, hd] KvT
  __shared__ __align__(16) float qs[kMaxCudaHeadDim];      // [hd] the query head
  __shared__ float p_s[kAttnThreads];                      // the chunk's scores, then its weights p_j
  __shared__ long long off_s[kAttnThreads];                // element offsets of the chunk's positions
  __shared__ float alpha_s[kTilesPerChunk];
  __shared__ float sum_s;
  KvT* v_s = reinterpret_cast<KvT*>(v_smem);
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int64_t r = blockIdx.x;
  const int h = static_cast<int>(blockIdx.y);
  const int hd = kHd > 0 ? kHd : kv.head_dim;
  const int kv_head = h / (num_heads / kv.num_kv_heads);
  OutT* oh = out + r * out_row_stride + static_cast<int64_t>(h) * hd;  // [hd]
  const int32_t p = positions[r];
  if (p < 0) {  // a padding row: NaN, no cache read
    for (int d = tid; d < hd; d += kAttnThreads) store_out(oh, d, __int_as_float(0x7fc00000));
    return;
  }
  const int32_t f = attention_window_first(p, window);  // the first position read
  const float* qh = q + r * q_row_stride + static_cast<int64_t>(h) * hd;
  for (int d = tid; d < hd; d += kAttnThreads) qs[d] = qh[d];
  const int32_t* table = block_tables + static_cast<int64_t>(row_seq[r]) * *block_table_stride;
  const KvT* kc = static_cast<const KvT*>(kv.k);
  const KvT* vc = static_cast<const KvT*>(kv.v);
  // Pieces of a V row for the copy: 16 bytes where the row is a multiple of 16, else 8.
  constexpr int kPieceBytes = 16;
  const bool wide = (hd * static_cast<int>(sizeof(KvT))) % kPieceBytes == 0;
  const int piece_elems = (wide ? kPieceBytes : 8) / static_cast<int>(sizeof(KvT));
  const int pieces = hd / piece_elems;
  float o[kDimsPerThread];  // O[d] for d = tid + kAttnThreads * i
#pragma unroll
  for (int i = 0; i < kDimsPerThread; ++i) o[i] = 0.f;
  float run_max = -INFINITY;  // M (warp 0)
  float run_sum = 0.f;        // L (warp 0)
  for (int base = f / kAttnThreads * kAttnThreads; base <= p; base += kAttnThreads) {
    const int j = base + tid;
    const int n_valid = min(kAttnThreads, p - base + 1);
    if (j <= p) off_s[tid] = kv_offset(kv, table[j / kv.block_size], kv_head, j % kv.block_size);
    __syncthreads();  // off_s (and qs) ready; the previous chunk's reads of v_s, p_s are done
    for (int k = tid; k < n_valid * pieces; k += kAttnThreads) {
      const int row = k / pieces, piece = k % pieces;
      KvT* dst = v_s + row * hd + piece * piece_elems;
      const KvT* src = vc + off_s[row] + piece * piece_elems;
      if (wide) {
        copy_async<16>(dst, src);
      } else {
        copy_async<8>(dst, src);
      }
    }
    copy_async_commit();
    float s = -INFINITY;
    if (j >= f && j <= p) s = __fmul_rn(dot_row<kHd>(qs, kc + off_s[tid], hd), scale);
    p_s[tid] = s;
    __syncthreads();
    if (warp == 0) {
      for (int t = 0; t < kTilesPerChunk && base + t * kKvTile <= p; ++t) {
        if (base + (t + 1) * kKvTile <= f) continue;  // wholly before f
        const int j_lane = base + t * kKvTile + lane;
        const bool valid = j_lane >= f && j_lane <= p;
        const float sj = p_s[t * kKvTile + lane];
        const float new_max = fmaxf(run_max, warp_max(sj));  // finite: the tile holds a valid position
        const float pj = valid ? expf(__fsub_rn(sj, new_max)) : 0.f;
        const float tile_sum = warp_sum(pj);
        const float alpha = expf(__fsub_rn(run_max, new_max));  // expf(-inf) = 0 for the first tile
        run_sum = __fadd_rn(__fmul_rn(run_sum, alpha), tile_sum);
        p_s[t * kKvTile + lane] = pj;
        if (lane == 0) alpha_s[t] = alpha;
        run_max = new_max;
      }
    }
    copy_async_wait_all();
    __syncthreads();  // the weights, alphas and V rows are visible to every thread
    for (int t = 0; t < kTilesPerChunk && base + t * kKvTile <= p; ++t) {
      if (base + (t + 1) * kKvTile <= f) continue;
      const float alpha = alpha_s[t];
#pragma unroll
      for (int i = 0; i < kDimsPerThread; ++i) o[i] = __fmul_rn(o[i], alpha);
      const int tile_len = min(kKvTile, p - (base + t * kKvTile) + 1);
#pragma unroll 8
      for (int jj = max(0, f - (base + t * kKvTile)); jj < tile_len; ++jj) {
        const float w = p_s[t * kKvTile + jj];
        const KvT* vj = v_s + (t * kKvTile + jj) * hd;
#pragma unroll
        for (int i = 0; i < kDimsPerThread; ++i) {
          const int d = tid + kAttnThreads * i;
          if (d < hd) o[i] = __fmaf_rn(w, load_kv(vj + d), o[i]);
        }
      }
    }
  }
  if (tid == 0) sum_s = run_sum;
  __syncthreads();
#pragma unroll
  for (int i = 0; i < kDimsPerThread; ++i) {
    const int d = tid + kAttnThreads * i;
    if (d < hd) store_out(oh, d, __fdiv_rn(o[i], sum_s));
  }
}

// The dynamic shared memory of attention_kernel<KvT, ...> at head_dim hd: the chunk's V rows.
template <typename KvT>
size_t attention_smem(int hd) {
  return static_cast<size_t>(kAttnThreads) * hd * sizeof(KvT);
}

// Launches attention_kernel<KvT, OutT, kHd> (its shared-memory limit raised by
// prepare_attention_per_query, before any graph capture).
template <typename KvT, typename OutT, int kHd>
Status launch_attention(const AttentionArgs& a, const CudaKvLayer& kv, cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>(a.m), static_cast<unsigned>(a.num_heads));
  attention_kernel<KvT, OutT, kHd><<<grid, kAttnThreads, attention_smem<KvT>(kv.head_dim), stream>>>(
      a.q, a.q_row_stride, a.num_heads, a.positions, a.row_seq, a.block_tables, a.block_table_stride, a.scale, a.window,
      static_cast<OutT*>(a.out), a.out_row_stride, kv);
  return cuda_launch_status("attention");
}

// The instantiation attention_per_query launches for head_dim hd.
template <typename KvT, typename OutT>
const void* attention_kernel_for(int hd) {
  switch (hd) {
    case 64:
      return reinterpret_cast<const void*>(attention_kernel<KvT, OutT, 64>);
    case 128:
      return reinterpret_cast<const void*>(attention_kernel<KvT, OutT, 128>);
    case 256:
      return reinterpret_cast<const void*>(attention_kernel<KvT, OutT, 256>);
    default:
      return reinterpret_cast<const void*>(attention_kernel<KvT, OutT, 0>);
  }
}

template <typename KvT, typename OutT>
Status raise_smem_limit(int hd) {
  const size_t smem = attention_smem<KvT>(hd);
  if (smem <= 48 * 1024) return Status();
  VOSTI_CUDA_RETURN_IF_ERROR(cudaFuncSetAttribute(attention_kernel_for<KvT, OutT>(hd),
                                                  cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
  return Status();
}

template <typename KvT, typename OutT>
Status launch_attention_for_head_dim(const AttentionArgs& a, const CudaKvLayer& kv, cudaStream_t stream) {
  switch (kv.head_dim) {
    case 64:
      return launch_attention<KvT, OutT, 64>(a, kv, stream);
    case 128:
      return launch_attention<KvT, OutT, 128>(a, kv, stream);
    case 256:
      return launch_attention<KvT, OutT, 256>(a, kv, stream);
    default:
      return launch_attention<KvT, OutT, 0>(a, kv, stream);
  }
}

}  // namespace

Status check_kv_layer(const char* op, const CudaKvLayer& kv) {
  if (kv.k == nullptr || kv.v == nullptr) return invalid_argument(std::string(op) + ": null KV cache pointer");
  if (kv.dtype != DType::kBF16 && kv.dtype != DType::kF32)
    return invalid_argument(std::string(op) + ": the KV pool dtype must be bf16 or f32");
  if (kv.num_blocks <= 0 || kv.block_size <= 0 || kv.num_kv_heads <= 0) {
    return invalid_argument(std::string(op) + ": KV cache needs positive num_blocks, block_size and num_kv_heads");
  }
  if (kv.head_dim <= 0 || kv.head_dim % 4 != 0 || kv.head_dim > kMaxCudaHeadDim) {
    return invalid_argument(std::string(op) + ": head_dim " + std::to_string(kv.head_dim) +
                            " must be a positive multiple of 4 and at most " + std::to_string(kMaxCudaHeadDim));
  }
  return Status();
}

Status prepare_attention_per_query(int head_dim) {
  if (head_dim <= 0 || head_dim > kMaxCudaHeadDim) return Status();  // attention() refuses it
  VOSTI_RETURN_IF_ERROR((raise_smem_limit<float, float>(head_dim)));
  VOSTI_RETURN_IF_ERROR((raise_smem_limit<float, __nv_bfloat16>(head_dim)));
  VOSTI_RETURN_IF_ERROR((raise_smem_limit<__nv_bfloat16, float>(head_dim)));
  return raise_smem_limit<__nv_bfloat16, __nv_bfloat16>(head_dim);
}

bool tensor_core_attention(const CudaKvLayer& kv, int num_heads) {
  if (kv.dtype != DType::kBF16 || kv.num_kv_heads <= 0) return false;
  return check_attention_shape(AttentionShape{num_heads, kv.num_kv_heads, kv.head_dim, kAttnDefaultSplit}).ok();
}

Status attention(const AttentionArgs& a, CudaKvLayer kv, cudaStream_t stream) {
  VOSTI_RETURN_IF_ERROR(check_kv_layer("attention", kv));
  if (a.m < 0) return invalid_argument("attention: row count m=" + std::to_string(a.m) + " out of range");
  if (a.q == nullptr || a.block_tables == nullptr || a.block_table_stride == nullptr || a.out == nullptr)
    return invalid_argument("attention: null device pointer");
  if (tensor_core_attention(kv, a.num_heads)) return attention_tensor_cores(a, kv, stream);
  return attention_per_query(a, kv, stream);
}

Status attention_per_query(const AttentionArgs& a, CudaKvLayer kv, cudaStream_t stream) {
  VOSTI_RETURN_IF_ERROR(check_kv_layer("attention", kv));
  if (a.m < 0 || a.m > 0x7fffffff) {
    return invalid_argument("attention: row count m=" + std::to_string(a.m) + " out of range");
  }
  if (a.q == nullptr || a.positions == nullptr || a.row_seq == nullptr || a.block_tables == nullptr ||
      a.block_table_stride == nullptr || a.out == nullptr) {
    return invalid_argument("attention: null device pointer");
  }
  if (a.num_heads <= 0 || a.num_heads % kv.num_kv_heads != 0) {
    return invalid_argument("attention: num_heads " + std::to_string(a.num_heads) +
                            " is not a positive multiple of num_kv_heads " + std::to_string(kv.num_kv_heads));
  }
  const int64_t width = static_cast<int64_t>(a.num_heads) * kv.head_dim;
  if (a.q_row_stride < width || a.out_row_stride < width) {
    return invalid_argument("attention: q and out row strides must be >= num_heads * head_dim (" +
                            std::to_string(width) + ")");
  }
  if (a.out_dtype != DType::kF32 && a.out_dtype != DType::kBF16) {
    return invalid_argument("attention: output dtype must be f32 or bf16");
  }
  if (a.window < 0) return invalid_argument("attention: negative sliding window " + std::to_string(a.window));
  if (a.m == 0) return Status();
  const bool f32_kv = kv.dtype == DType::kF32;
  if (a.out_dtype == DType::kF32) {
    return f32_kv ? launch_attention_for_head_dim<float, float>(a, kv, stream)
                  : launch_attention_for_head_dim<__nv_bfloat16, float>(a, kv, stream);
  }
  return f32_kv ? launch_attention_for_head_dim<float, __nv_bfloat16>(a, kv, stream)
                : launch_attention_for_head_dim<__nv_bfloat16, __nv_bfloat16>(a, kv, stream);
}

}  // namespace vosti
