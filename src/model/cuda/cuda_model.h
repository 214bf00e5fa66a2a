// CudaModel: a loaded Model's weights on the GPU, uploaded once, with the GEMM schedule of
// every weight shape fixed at upload (DESIGN.md rule 1). CudaSequence (cuda_sequence.h)
// runs the forward with it.
//
// Numeric policy of the CUDA deployment (part of D): the projection matrices (wqkv, wo,
// w_gate_up, w_down, lm_head) and the embedding table are bf16, rounded to nearest even
// from the loaded f32 once; norm weights and biases stay f32. GEMM inputs are bf16
// activations, accumulation and the residual stream f32, KV cache f32.
//
// Padding (zeros, exact: a zero weight column times a zero activation column adds +0):
// the GEMM needs k % 64 == 0 and n % 8 == 0, so
//   qkv rows    (num_heads + 2 num_kv_heads) * head_dim -> qkv_rows, a multiple of 8;
//   attention width num_heads * head_dim -> attn_width, a multiple of 64 (wo's columns);
//   intermediate I -> ffn_width, a multiple of 64: w_gate_up is [gate rows I, zero rows,
//     up rows I, zero rows], so silu(0) * 0 = 0 fills the padded activations of w_down;
//   vocab -> vocab_rows, a multiple of 8 (lm_head rows).
// hidden_size must itself be a multiple of 64 (it is k of three GEMMs and the width of
// the normed activations); head_dim a multiple of 4, at most kMaxCudaHeadDim.
// Invariants: every buffer is on the device that was current at upload; the schedules are a
// pure function of (weight shape, device kind).
// Thread safety: immutable after upload; any number of CudaSequences may share it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "core/status.h"
#include "kernels/cuda/gemm_schedule.h"
#include "model/cuda/device_memory.h"
#include "model/model.h"

namespace vosti {

// One projection on the device: y[m, n_rows] = x[m, k_cols] * w^T (+ bias).
struct CudaGemmWeight {
  DeviceMemory w;     // [n_rows, k_cols] bf16, zero-padded
  DeviceMemory bias;  // [n_rows] f32, zero-padded, or empty
  GemmSchedule schedule;
};

struct CudaLayerWeights {
  DeviceMemory attn_norm;  // [hidden] f32
  CudaGemmWeight qkv;      // [qkv_rows, hidden]: q, k, v stacked, zero rows after (+ bias for Qwen2)
  DeviceMemory q_norm;     // [head_dim] f32 or empty (Qwen3)
  DeviceMemory k_norm;     // [head_dim] f32 or empty (Qwen3)
  CudaGemmWeight o;        // [hidden, attn_width]
  DeviceMemory ffn_norm;   // [hidden] f32
  CudaGemmWeight gate_up;  // [2 * ffn_width, hidden]: gate rows [0, I), up rows [ffn_width, ffn_width + I)
  CudaGemmWeight down;     // [hidden, ffn_width]
};

// The padded widths of the device buffers (see the header comment).
struct CudaModelDims {
  int64_t qkv_rows = 0;    // >= (num_heads + 2 * num_kv_heads) * head_dim, % 8 == 0
  int64_t attn_width = 0;  // >= num_heads * head_dim, % 64 == 0
  int64_t ffn_width = 0;   // >= intermediate_size, % 64 == 0
  int64_t vocab_rows = 0;  // >= vocab_size, % 8 == 0
};

class CudaModel {
 public:
  // Uploads `model`'s weights to the current CUDA device. `model` may be released afterwards.
  // Errors: kFailedPrecondition "no CUDA device" without a usable GPU; kUnimplemented for a
  // shape the CUDA kernels do not support (named); kResourceExhausted when the weights do
  // not fit in GPU memory; kInternal for other CUDA failures.
  static Result<std::shared_ptr<const CudaModel>> upload(const Model& model);

  const ModelConfig& config() const { return config_; }
  const CudaModelDims& dims() const { return dims_; }
  const CudaLayerWeights& layer(int64_t index) const { return layers_[static_cast<size_t>(index)]; }
  const uint16_t* embedding() const { return embed_; }                 // [vocab, hidden] bf16
  const float* final_norm() const { return final_norm_.as<float>(); }  // [hidden] f32
  const CudaGemmWeight& lm_head() const { return lm_head_; }           // [vocab_rows, hidden]
  const float* inv_freq() const { return inv_freq_.as<float>(); }      // [head_dim / 2] f32
  // GEMM workspace bytes that every projection call with 1..max_m rows fits in.
  size_t gemm_workspace_bytes(int64_t max_m) const;
  // Total bytes of weights on the device.
  size_t num_weight_bytes() const { return num_weight_bytes_; }

  CudaModel(const CudaModel&) = delete;
  CudaModel& operator=(const CudaModel&) = delete;

 private:
  CudaModel() = default;
  Status upload_weights(const Model& model, bool has_wgmma);
  Result<CudaGemmWeight> upload_gemm(const std::vector<uint16_t>& w, const float* bias, int64_t n_rows, int64_t k_cols,
                                     bool has_wgmma, const std::string& what);
  Result<DeviceMemory> upload_f32(const float* data, size_t count, const std::string& what);

  ModelConfig config_;
  CudaModelDims dims_;
  std::vector<CudaLayerWeights> layers_;
  DeviceMemory embed_own_;  // [vocab, hidden] bf16, empty when the embedding is tied to lm_head
  const uint16_t* embed_ = nullptr;
  DeviceMemory final_norm_;
  CudaGemmWeight lm_head_;
  DeviceMemory inv_freq_;
  int num_sms_ = 0;
  size_t num_weight_bytes_ = 0;
};

}  // namespace vosti
