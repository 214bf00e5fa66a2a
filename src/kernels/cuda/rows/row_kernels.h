// Row-wise CUDA kernels of a decoder layer: embedding gather, RMSNorm (with fused
// residual add), per-head q/k RMSNorm, rotary embedding, SwiGLU / GeGLU, bias add, logit soft-cap.
//
// Every kernel computes each output row from that row's inputs and the weights only;
// the row index and the row count m choose which row a block or warp works on and
// nothing else. Element-wise formulas follow kernels/ref/scalar_math.h with explicitly
// rounded operations (no contraction), so results differ from the CPU backend only
// where the math library does (cosf, sinf, expf).
// Reduction orders (fixed by the row width n and the constants below, never by m):
//   rms_norm / add_rms_norm: one block of kRowThreads threads per row. Thread t owns the
//     float4 groups t, t + kRowThreads, ... in increasing order and accumulates
//     fma(x, x, acc) over them, elements of a group in order; then a butterfly
//     __shfl_xor tree with offsets 16, 8, 4, 2, 1 in each warp; then the warp sums
//     added in warp order 0..7 (a sequential chain) by every thread.
//   head_rms_norm: one warp per (row, head); lane l accumulates elements l, l + 32, ...
//     in increasing order, then the same butterfly tree.
// rope has no reduction: each pair is rotated with the cos/sin of float(position) * inv_freq
// (one block per row with the table in shared memory when head_dim % 8 == 0, else one
// thread per pair; the same operations per element either way).
// Shapes: row-major device buffers; "[m, n]" is m rows of n contiguous elements.
// Thread safety: stateless; calls are enqueued on the given stream.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "core/dtype.h"
#include "core/status.h"
#include "kernels/kernel_backend.h"

namespace vosti {

inline constexpr int kRowThreads = 256;

// out[m, hidden] (f32) = table[ids[r], :] (bf16) widened, times scale (one f32 multiply; none
// when scale is 1: Gemma's scaled embedding). An id outside [0, vocab) gives a row of NaN.
Status embedding_gather(const uint16_t* table, int64_t vocab, int64_t hidden, const int32_t* ids, int64_t m,
                        float scale, float* out, cudaStream_t stream);

// y[m, n] (y_dtype: f32 or bf16) = x * (1 / sqrt(mean(x^2) + eps)) * weight[n]. REQUIRES: n % 4 == 0.
Status rms_norm(const float* x, int64_t m, int64_t n, const float* weight, float eps, void* y, DType y_dtype,
                cudaStream_t stream);

// residual[m, n] += delta[m, n] (f32), then y = rms_norm(residual). REQUIRES: n % 4 == 0.
Status add_rms_norm(float* residual, const float* delta, int64_t m, int64_t n, const float* weight, float eps, void* y,
                    DType y_dtype, cudaStream_t stream);

// The same for gathered rows, leaving the residual unchanged: for r < m,
// y[r] = rms_norm(residual[rows[r]] + delta[rows[r]]) (no add when delta is null), the same bits
// add_rms_norm gives that row: the final norm of the rows that need logits. REQUIRES: n % 4 == 0.
Status add_rms_norm_rows(float* residual, const float* delta, const int32_t* rows, int64_t m, int64_t n,
                         const float* weight, float eps, void* y, DType y_dtype, cudaStream_t stream);

// In place on heads h < num_heads of each row r: x[r * row_stride + h * head_dim + i], i < head_dim,
// scaled by rms_norm with weight[head_dim] (Qwen3 q/k norm).
Status head_rms_norm(float* x, int64_t row_stride, int64_t m, int num_heads, int head_dim, const float* weight,
                     float eps, cudaStream_t stream);

// In place on heads h < num_heads of each row r (base x + r * row_stride): rotary embedding at
// positions[r] with inv_freq[head_dim / 2]; angle = float(position) * inv_freq[i] in f32.
Status rope(float* x, int64_t row_stride, int64_t m, int num_heads, int head_dim, const int32_t* positions,
            const float* inv_freq, RopeLayout layout, cudaStream_t stream);

// y[m, n] (y_dtype) = act(gate) * up with gate_up[m, 2n] (f32, gate first), act by
// scalar_math.h's silu_times or gelu_tanh_times, operation for operation (expf for exp_f32).
// REQUIRES: n % 4 == 0.
Status gated_mul(MlpActivation act, const float* gate_up, int64_t m, int64_t n, void* y, DType y_dtype,
                 cudaStream_t stream);
// gated_mul with SwiGLU's silu.
Status silu_mul(const float* gate_up, int64_t m, int64_t n, void* y, DType y_dtype, cudaStream_t stream);

// In place on rows r < m of y (row r at y + r * row_stride): y[i] = cap * tanh(y[i] / cap) for
// i < n, tanh by scalar_math.h's tanh_f32 (expf for exp_f32): the final logit soft-cap. cap > 0.
Status softcap(float* y, int64_t m, int64_t n, int64_t row_stride, float cap, cudaStream_t stream);

// y[m, n] += bias[n] (f32). REQUIRES: n % 4 == 0.
Status bias_add(float* y, int64_t m, int64_t n, const float* bias, cudaStream_t stream);

}  // namespace vosti
