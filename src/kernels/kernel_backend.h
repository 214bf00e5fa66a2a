// KernelBackend: the ops a decoder forward needs, on host memory (f32).
// Implementations: kernels/ref (scalar oracle) and kernels/cpu (SIMD + threads).
//
// Contract every implementation keeps (DESIGN.md rules 2-4, the kernel contract of
// docs/SPEC.md): each output row is a function of that row's inputs and the
// weights only, reduced in one fixed order that does not depend on the number of
// rows, the row's index, the thread count or any other row. attention() for a token
// at position p reads the KV of positions first..p of its own sequence (first = 0, or the
// start of a sliding window: a function of p and the model alone), through the paged cache,
// in KV tiles at fixed logical positions [t*kKvTile, (t+1)*kKvTile) cut at first, merged in
// increasing t order.
// Each implementation documents its reduction orders at the kernel: kernels/ref/ref_backend.cc
// (the oracle), kernels/cpu/{simd_avx2,matmul_avx2,attention_avx2}.h (the CPU backend).
// Shapes: row-major; "[m, n]" means m rows of n contiguous floats.
// Thread safety: an instance may be used by one caller at a time.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/weight_type.h"
#include "core/host_device.h"

namespace vosti {

class ThreadPool;

// Rotary embedding layout: NeoX rotates (x[i], x[i + d/2]); GPT-J rotates (x[2i], x[2i+1]).
enum class RopeLayout : uint8_t { kNeox, kGptj };

// The MLP's gate activation: y = down(act(gate(x)) * up(x)).
enum class MlpActivation : uint8_t {
  kSilu,      // SwiGLU (Llama, Qwen): silu(g) = g / (1 + exp(-g))
  kGeluTanh,  // GeGLU (Gemma): the tanh-approximated GELU, "gelu_pytorch_tanh"
};

// Logical KV tile width of attention: part of the deployment, never of the batch.
inline constexpr int kKvTile = 32;

// One layer's paged KV cache: k and v are [num_blocks, block_size, num_kv_heads, head_dim].
struct PagedKvView {
  float* k = nullptr;
  float* v = nullptr;
  int64_t num_blocks = 0;
  int block_size = 0;
  int num_kv_heads = 0;
  int head_dim = 0;
};

// Rows of a weight matrix stored in one encoding (f32, f16, bf16 or a ggml block format of
// core/quant_blocks.h): row i's k values start at rows[i], encoded as the file stores them.
struct WeightRows {
  WeightType type = WeightType::kF32;
  int64_t num_rows = 0;
  const uint8_t* const* rows = nullptr;  // [num_rows]
};

// w[n, k] as the model file stores it, in output-row order: the rows of parts[0], then of
// parts[1], ... (e.g. q, k and v stacked, each in its own encoding). The kernels decode
// each value to exactly core/quant_blocks.h's f32 and compute as if w were that f32 matrix.
// A view: the row tables and the bytes belong to whoever built it (the Model).
struct WeightMatrix {
  int64_t n = 0;
  int64_t k = 0;
  const WeightRows* parts = nullptr;  // [num_parts], rows summing to n
  int num_parts = 0;
};

// An f32 matrix w[n, k] (rows contiguous) as a WeightMatrix; owns its row table.
struct F32Matrix {
  F32Matrix(const float* w, int64_t n, int64_t k);
  F32Matrix(const F32Matrix&) = delete;
  F32Matrix& operator=(const F32Matrix&) = delete;
  std::vector<const uint8_t*> rows;  // [n]
  WeightRows part;
  WeightMatrix matrix;
};

// Per query token: where its sequence's KV lives and how far it may look.
struct AttentionQuery {
  const int32_t* block_table = nullptr;  // [>= ceil((position+1)/block_size)] physical block ids
  int32_t position = 0;                  // attends over logical positions first..position
  int32_t first = 0;                     // 0, or max(0, position - window + 1) under a sliding window
};

// The first position a query at `position` attends to under a sliding window of `window`
// positions (0: none): positions first..position, `window` of them once the sequence is long
// enough (transformers' mask: position - j < window). One definition for the host and the
// CUDA kernels (VOSTI_HD).
VOSTI_HD int32_t attention_window_first(int32_t position, int32_t window) {
  return window > 0 && position >= window ? position - window + 1 : 0;
}

class KernelBackend {
 public:
  virtual ~KernelBackend() = default;
  virtual std::string_view name() const = 0;

  // y[m, w.n] = x[m, w.k] * w^T (+ bias[w.n] if non-null), w read in its stored encoding.
  virtual void matmul(const float* x, int64_t m, const WeightMatrix& w, const float* bias, float* y) = 0;
  // The same for an f32 w[n, k] with contiguous rows (tests and benchmarks).
  void matmul(const float* x, int64_t m, int64_t k, const float* w, int64_t n, const float* bias, float* y) {
    const F32Matrix f(w, n, k);
    matmul(x, m, f.matrix, bias, y);
  }
  // y[m, n] = x * rsqrt(mean(x^2) + eps) * weight[n]; y may alias x.
  virtual void rms_norm(const float* x, int64_t m, int64_t n, const float* weight, float eps, float* y) = 0;
  // In place on x[m, num_heads, head_dim]: rotary embedding of row r by the angles whose
  // cosines and sines are cos[r, :], sin[r, :] ([m, head_dim / 2] each; rope_cos_sin() of
  // scalar_math.h at the row's position, computed once per step by the caller).
  virtual void rope(float* x, int64_t m, int num_heads, int head_dim, const float* cos, const float* sin,
                    RopeLayout layout) = 0;
  // The same at positions[m] with inv_freq[head_dim / 2] (already scaled, e.g. llama3
  // scaling): builds the tables, then the call above (tests).
  void rope(float* x, int64_t m, int num_heads, int head_dim, const int32_t* positions, const float* inv_freq,
            RopeLayout layout);
  // y[m, n] = silu(gate[m, n]) * up[m, n], gate and up read from gate_up[m, 2n] (gate first).
  virtual void silu_mul(const float* gate_up, int64_t m, int64_t n, float* y) = 0;
  // y[m, n] = gelu_tanh(gate[m, n]) * up[m, n] (GeGLU: the tanh GELU of Gemma), gate and up read
  // from gate_up[m, 2n] (gate first); element-wise in the fixed order of scalar_math.h's
  // gelu_tanh_times.
  virtual void gelu_tanh_mul(const float* gate_up, int64_t m, int64_t n, float* y) = 0;
  // Writes k_new/v_new [m, num_kv_heads, head_dim] into slots[m] (slot = block * block_size + offset);
  // a negative slot marks a padding row, which is skipped.
  virtual void kv_write(const float* k_new, const float* v_new, int64_t m, const int32_t* slots, PagedKvView kv) = 0;
  // out[m, num_heads, head_dim] = softmax(q k^T * scale) v over each query's positions first..position,
  // with grouped-query heads (head h reads kv head h / (num_heads / num_kv_heads)).
  virtual void attention(const float* q, int64_t m, int num_heads, const AttentionQuery* queries, PagedKvView kv,
                         float scale, float* out) = 0;
};

// The scalar oracle (kernels/ref).
std::unique_ptr<KernelBackend> make_ref_backend();
// The SIMD + threaded backend (kernels/cpu); `pool` outlives the backend.
std::unique_ptr<KernelBackend> make_cpu_backend(ThreadPool* pool);

}  // namespace vosti
