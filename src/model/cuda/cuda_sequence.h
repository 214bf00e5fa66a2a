// CudaSequence: one token sequence run alone on the GPU through a private paged KV cache
// whose physical blocks are 0, 1, 2, ... in order: the CUDA counterpart of SingleSequence
// (model/single_sequence.h). Every op of the forward runs on the device, on the
// sequence's own stream; only the token ids go in and the wanted logits come out.
//
// Forward of one append of T tokens (CudaModel's numeric policy; widths in cuda_model.h):
//   x = embedding rows (f32); per layer: h = rms_norm(x) (bf16; layers > 0 first add the
//   previous down projection to x: add_rms_norm); qkv = h wqkv^T (+ bias) (f32);
//   Qwen3: head_rms_norm of the q and k heads in place; rope on the q and k heads in place;
//   kv_write of the k, v heads; attention -> bf16; proj = attn wo^T (f32);
//   h = add_rms_norm(x += proj) (bf16); gate_up = h w_gate_up^T (f32); act = silu_mul (bf16);
//   proj = act w_down^T (f32). Then x += proj and the final rms_norm (add_rms_norm) of the
//   logit rows only, and logits = h lm_head^T (f32).
// Every kernel is batch-invariant by construction (row_kernels.h, gemm_bf16.h, attention.h),
// so appending a prompt at once, token by token or in any chunks gives the same bits.
//
// Thread safety: one caller at a time. After a kInternal error (a CUDA failure) the
// sequence is unusable and every later append returns that error.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "core/status.h"
#include "model/cuda/cuda_model.h"
#include "model/cuda/device_memory.h"

namespace vosti {

class CudaSequence {
 public:
  // A sequence of up to max_tokens tokens with its KV cache and activations on the device.
  // Errors: kInvalidArgument for max_tokens < 1, max_tokens >= 2^31 or block_size < 1;
  // kResourceExhausted when the buffers do not fit in GPU memory; kInternal for CUDA failures.
  static Result<std::unique_ptr<CudaSequence>> create(std::shared_ptr<const CudaModel> model, int64_t max_tokens,
                                                      int block_size = 16);
  ~CudaSequence();
  CudaSequence(const CudaSequence&) = delete;
  CudaSequence& operator=(const CudaSequence&) = delete;

  // Appends `tokens` (computed as one batch) and returns their logits [tokens.size(), vocab]
  // if all_logits, else the last token's [vocab].
  // Errors (nothing appended): kInvalidArgument for no tokens; kOutOfRange for a token id
  // outside [0, vocab) or more tokens than max_tokens allows; kInternal for a CUDA failure.
  Result<std::vector<float>> append(std::span<const int32_t> tokens, bool all_logits = false);
  int64_t num_tokens() const { return num_tokens_; }
  int64_t max_tokens() const { return max_tokens_; }

 private:
  CudaSequence(std::shared_ptr<const CudaModel> model, int64_t max_tokens, int block_size);
  Status allocate();
  Status run_layer(int64_t li, int64_t T);
  // y[m, n] = x[m, k] w^T (+ bias) in f32. x and y have row_capacity >= m rows allocated; rows
  // [m, row_capacity) of y are scratch the GEMM may overwrite (GemmArgs::row_capacity).
  Status gemm(const CudaGemmWeight& w, const uint16_t* x, int64_t m, float* y, int64_t row_capacity);
  Status logits(int64_t T, bool all_logits, std::vector<float>& out);

  std::shared_ptr<const CudaModel> model_;
  int64_t max_tokens_;
  int block_size_;
  int64_t num_blocks_;
  int64_t num_tokens_ = 0;
  Status broken_;  // the first CUDA failure; sticky
  cudaStream_t stream_ = nullptr;

  // Rows are tokens of one append (T <= max_tokens); widths from CudaModelDims.
  DeviceMemory ids_;          // [max_tokens] int32 token ids
  DeviceMemory positions_;    // [max_tokens] int32 logical positions
  DeviceMemory slots_;        // [max_tokens] int64 cache slots (= positions: block b is physical block b)
  DeviceMemory block_table_;  // [num_blocks] int32: 0, 1, 2, ...
  DeviceMemory x_;            // [max_tokens, hidden] f32 residual stream
  DeviceMemory h_;            // [max_tokens, hidden] bf16 normed activations (GEMM input)
  DeviceMemory qkv_;          // [max_tokens, qkv_rows] f32: q heads, k heads, v heads, padding
  DeviceMemory attn_;         // [max_tokens, attn_width] bf16 attention output; padding columns zero
  DeviceMemory proj_;         // [max_tokens, hidden] f32 o / down projection output
  DeviceMemory gate_up_;      // [max_tokens, 2 * ffn_width] f32
  DeviceMemory act_;          // [max_tokens, ffn_width] bf16 silu(gate) * up
  DeviceMemory logits_;       // [logit_chunk_rows, vocab_rows] f32
  DeviceMemory k_cache_;      // [num_layers, num_blocks, block_size, num_kv_heads, head_dim] f32
  DeviceMemory v_cache_;      // [num_layers, num_blocks, block_size, num_kv_heads, head_dim] f32
  DeviceMemory workspace_;    // GEMM workspace (counters zeroed once)
  int64_t logit_chunk_rows_ = 0;
};

}  // namespace vosti
