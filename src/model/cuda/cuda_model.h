// CudaModel: one model's weights on the GPU, uploaded once, with the GEMM schedule of every
// weight shape fixed at upload (DESIGN.md rule 1), and the decoder forward over a batch of
// many sequences that reads and writes the paged device KV pool. The runner
// (runner/cuda/cuda_runner.h) owns the batch buffers (CudaActivationBuffers among them), the pool
// and the graphs; forward() only enqueues kernels: no allocation, no synchronisation, no driver
// query (the device is described once, at upload: CudaDevice, AttentionKernels).
//
// Numeric policy of the CUDA deployment (part of D): the projection matrices (wqkv, wo,
// w_gate_up, w_down, lm_head) and the embedding table are bf16 (a bf16 file's values as they
// are; otherwise the loaded f32 rounded to nearest even, once); norm weights and biases f32.
// GEMM inputs are bf16 activations, accumulation and the residual stream f32; the KV pool
// holds bf16 (default) or f32 (EngineConfig::kv_cache_dtype), rounded once when written.
//
// Forward of one step of T tokens (rows in the runner's order; widths in CudaModelDims), each
// layer as its LayerSpec (ModelConfig::layers) describes it:
//   x = embedding rows (f32, times embed_scale); per layer: h = rms_norm(x) (bf16; layers > 0
//   first add the previous down projection to x: add_rms_norm); qkv = h wqkv^T (+ bias) (f32);
//   qk_norm (Qwen3, Gemma 3): head_rms_norm of the q and k heads in place; rope on the q and k
//   heads in place with the layer's rotary table; kv_write of the k, v heads into their slots;
//   attention of every row over its own sequence's cache under the layer's sliding window, with
//   the window's plan (CudaBatch::attention), scores scaled by attention_scale -> bf16;
//   proj = attn wo^T (f32); post_attn_norm: proj = rms_norm(proj) (f32, in place);
//   h = add_rms_norm(x += proj) (bf16); gate_up = h w_gate_up^T (f32); act = silu_mul or
//   gelu_tanh_mul by the layer's activation (bf16); proj = act w_down^T (f32); post_ffn_norm:
//   proj = rms_norm(proj) (f32, in place). A mixture-of-experts layer (LayerSpec::moe) runs, in
//   place of gate_up .. down, the MoE MLP of kernels/cuda/moe/moe_kernels.h (its order there):
//   router logits = h router^T (f32), moe_route (its experts also into acts.moe.routed where set),
//   moe_permute, moe_gather, gate_up = moe_grouped_gemm (f32), the layer's activation (bf16),
//   down = moe_grouped_gemm (f32), proj = moe_combine (f32).
//   Then, for the logit rows only: x += proj and the final rms_norm (add_rms_norm_rows),
//   logits = h lm_head^T (f32, [rows, vocab_rows]); final_logit_softcap: logits = cap *
//   tanh(logits / cap) in place. The same op order as Model::forward (model/model.h).
// Every kernel is batch-invariant by construction (row_kernels.h, gemm_bf16.h, attention.h):
// a row's bits depend on its own token, position and its sequence's cache only.
//
// Padding (zeros, exact: a zero weight column times a zero activation column adds +0):
// the GEMM needs k % 64 == 0 and n % 8 == 0, so
//   qkv rows    (num_heads + 2 num_kv_heads) * head_dim -> qkv_rows, a multiple of 8;
//   attention width num_heads * head_dim -> attn_width, a multiple of 64 (wo's columns);
//   intermediate I -> ffn_width, a multiple of 64: w_gate_up is [gate rows I, zero rows,
//     up rows I, zero rows], so silu(0) * 0 = 0 fills the padded activations of w_down;
//   vocab -> vocab_rows, a multiple of 8 (lm_head rows);
//   an expert's intermediate -> moe_width, a multiple of 64, as ffn_width (each expert's gate_up
//     [gate rows, zero rows, up rows, zero rows]); the router's experts -> router_rows, a multiple
//     of 8 (zero rows; moe_route reads the first num_experts logits only).
// hidden_size must itself be a multiple of 64; head_dim a multiple of 4, at most kMaxCudaHeadDim;
// at most kMaxAttentionWindows distinct sliding windows.
// Invariants: every buffer is on the device that was current at upload; the schedules are a
// pure function of (weight shape, device kind).
// Thread safety: immutable after upload; any number of runners may share it (one stream each).
#pragma once

#include <cuda_runtime.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "kernels/cuda/attention/attention.h"
#include "kernels/cuda/attention/attention_kernels.h"
#include "kernels/cuda/cuda_device.h"
#include "kernels/cuda/gemm/gemm_bf16.h"
#include "kernels/cuda/gemm/gemm_schedule.h"
#include "kernels/cuda/device_memory.h"
#include "kernels/cuda/moe/moe_kernels.h"
#include "model/model.h"
#include "model/model_file.h"

namespace vosti {

// One projection on the device: y[m, n_rows] = x[m, k_cols] * w^T (+ bias).
struct CudaGemmWeight {
  DeviceMemory w;     // [n_rows, k_cols] bf16, zero-padded
  DeviceMemory bias;  // [n_rows] f32, zero-padded, or empty
  GemmSchedule schedule;
};

// A mixture-of-experts layer's weights: the router and every expert's matrices stacked in expert
// order (bf16, zero-padded), with the grouped GEMM's schedules.
struct CudaMoeWeights {
  CudaGemmWeight router;  // [router_rows, hidden]
  DeviceMemory gate_up;   // [num_experts, 2 * moe_width, hidden]
  DeviceMemory down;      // [num_experts, hidden, moe_width]
  MoeGemmSchedule gate_up_schedule;
  MoeGemmSchedule down_schedule;
};

struct CudaLayerWeights {
  DeviceMemory attn_norm;       // [hidden] f32
  CudaGemmWeight qkv;           // [qkv_rows, hidden]: q, k, v stacked, zero rows after (+ bias for Qwen2)
  DeviceMemory q_norm;          // [head_dim] f32 or empty (Qwen3)
  DeviceMemory k_norm;          // [head_dim] f32 or empty (Qwen3)
  CudaGemmWeight o;             // [hidden, attn_width]
  DeviceMemory post_attn_norm;  // [hidden] f32 or empty (LayerSpec::post_attn_norm)
  DeviceMemory ffn_norm;        // [hidden] f32
  CudaGemmWeight gate_up;       // [2 * ffn_width, hidden]: gate rows [0, I), up rows [ffn_width, ffn_width + I)
  CudaGemmWeight down;          // [hidden, ffn_width]
  CudaMoeWeights moe;           // an MoE layer's (its gate_up and down are empty)
  DeviceMemory post_ffn_norm;   // [hidden] f32 or empty (LayerSpec::post_ffn_norm)
};

// The padded widths of the device buffers (see the header comment).
struct CudaModelDims {
  int64_t qkv_rows = 0;     // >= (num_heads + 2 * num_kv_heads) * head_dim, % 8 == 0
  int64_t attn_width = 0;   // >= num_heads * head_dim, % 64 == 0
  int64_t ffn_width = 0;    // >= intermediate_size, % 64 == 0
  int64_t vocab_rows = 0;   // >= vocab_size, % 8 == 0
  int64_t moe_width = 0;    // >= the experts' intermediate size, % 64 == 0 (0: no MoE layer)
  int64_t router_rows = 0;  // >= num_experts, % 8 == 0 (0: no MoE layer)
};

// The MoE layers' buffers of one forward (empty for a dense model): `entries` = row_capacity *
// top_k permuted rows, `perm_rows` = moe_rows_with_scratch(entries, block_m) (the grouped GEMM's
// scratch rows after them). Written by each MoE layer before it reads them.
struct CudaMoeActivations {
  float* logits = nullptr;       // [row_capacity, router_rows] f32 router logits
  int32_t* experts = nullptr;    // [row_capacity, top_k] chosen experts, ascending per token
  float* weights = nullptr;      // [row_capacity, top_k] their combine weights
  int32_t* pos = nullptr;        // [entries] each (token, slot)'s permuted row
  int32_t* src_token = nullptr;  // [entries] each permuted row's token
  MoeTile* tiles = nullptr;      // [max_tiles] the grouped GEMM's tile list
  int32_t* num_tiles = nullptr;  // [1]
  uint16_t* x = nullptr;         // [perm_rows, hidden] bf16 permuted rows
  float* gate_up = nullptr;      // [perm_rows, 2 * moe_width] f32
  uint16_t* act = nullptr;       // [perm_rows, moe_width] bf16
  float* y = nullptr;            // [perm_rows, hidden] f32 expert outputs
  // [row_capacity, num MoE layers, top_k]: each row's experts per MoE layer (layer order), written
  // by the forward where non-null (the runner copies the wanted rows back: StepResult::routed).
  int32_t* routed = nullptr;
  int64_t max_tiles = 0;
};

// The activation buffers of one forward (the runner's), row_capacity rows each; rows past the
// step's are scratch the GEMMs may overwrite (GemmArgs::row_capacity).
struct CudaActivations {
  float* x = nullptr;            // [row_capacity, hidden] f32 residual stream
  uint16_t* h = nullptr;         // [row_capacity, hidden] bf16 normed activations (GEMM input)
  float* qkv = nullptr;          // [row_capacity, qkv_rows] f32: q heads, k heads, v heads, padding
  uint16_t* attn = nullptr;      // [row_capacity, attn_width] bf16 attention output; padding columns zero
  float* proj = nullptr;         // [row_capacity, hidden] f32 o / down projection output
  float* gate_up = nullptr;      // [row_capacity, 2 * ffn_width] f32
  uint16_t* act = nullptr;       // [row_capacity, ffn_width] bf16 silu(gate) * up
  uint16_t* h_logits = nullptr;  // [logit_capacity, hidden] bf16 final-normed logit rows
  int64_t row_capacity = 0;
  int64_t logit_capacity = 0;
  GemmWorkspace workspace;  // counters zeroed once by the owner
  CudaMoeActivations moe;   // MoE models only
};

// The distinct sliding windows a model's layers may have (Gemma 3: local and global; every
// other family: one), each planned once per step.
inline constexpr int kMaxAttentionWindows = 4;

// The batch of one step on the device (the runner's step buffer, runner/cuda/step_buffer.h), see
// attention.h.
struct CudaBatch {
  int64_t num_tokens = 0;                       // T (host value: grid sizes)
  const int32_t* token_ids = nullptr;           // [T]
  const int32_t* positions = nullptr;           // [T] (negative: a padding row)
  const int32_t* slots = nullptr;               // [T] cache slots (negative: skipped)
  const int32_t* row_seq = nullptr;             // [T] sequence of each row
  const int32_t* block_tables = nullptr;        // [num_seqs, *block_table_stride]
  const int32_t* block_table_stride = nullptr;  // device scalar
  // Window-local KV (null without it): the sliding-window layers' slots and tables, read by those
  // layers instead of slots and block_tables (their KV views point into the window pool).
  const int32_t* window_slots = nullptr;               // [T]
  const int32_t* window_block_tables = nullptr;        // [num_seqs, *window_block_table_stride]
  const int32_t* window_block_table_stride = nullptr;  // device scalar
  int64_t num_logit_rows = 0;                          // R (host value)
  const int32_t* logit_rows = nullptr;                 // [R] distinct rows < T whose logits are wanted
  // The tensor-core attention's plans of these rows (attention_eager_view or attention_graph_view),
  // one per window of CudaModel::windows(), in that order; unused where the deployment runs the
  // per-query attention (tensor_core_attention()).
  std::array<AttentionWorkView, kMaxAttentionWindows> attention;
};

class CudaModel {
 public:
  // Loads the model at `file` straight to the current CUDA device, one tensor at a time
  // (bf16 tensors copied as stored; no f32 copy of the model on the host).
  // Errors: kFailedPrecondition "no CUDA device" without a usable GPU; kUnimplemented for a
  // shape the CUDA kernels do not support (named); kResourceExhausted when the weights do
  // not fit in GPU memory; the file's errors; kInternal for other CUDA failures.
  static Result<std::shared_ptr<const CudaModel>> load(const ModelFile& file);
  // Uploads an already loaded (f32) Model; the same values as load() of its file.
  static Result<std::shared_ptr<const CudaModel>> upload(const Model& model);

  const ModelConfig& config() const { return config_; }
  const std::string& path() const { return path_; }
  const CudaModelDims& dims() const { return dims_; }
  const CudaDevice& device() const { return device_; }  // read once, at upload
  // The attention kernels of this model's head_dim on its device, prepared at upload.
  const AttentionKernels& attention_kernels() const { return attention_kernels_; }
  const CudaLayerWeights& layer(int64_t index) const { return layers_[static_cast<size_t>(index)]; }
  const uint16_t* embedding() const { return embed_; }                 // [vocab, hidden] bf16
  const float* final_norm() const { return final_norm_.as<float>(); }  // [hidden] f32
  const CudaGemmWeight& lm_head() const { return lm_head_; }           // [vocab_rows, hidden]
  // The distinct sliding windows of the layers (0: none), in first-layer order; a CudaBatch carries
  // one attention plan per entry. layer_window(li): layer li's index in it.
  const std::vector<int>& windows() const { return windows_; }
  int layer_window(int64_t li) const { return layer_window_[static_cast<size_t>(li)]; }
  // The MoE layers (ModelConfig::moe(); disabled for a dense model) and how many there are.
  MoeSpec moe() const { return config_.moe(); }
  int64_t num_moe_layers() const { return num_moe_layers_; }
  // GEMM workspace bytes that every projection call with 1..max_m rows fits in.
  size_t gemm_workspace_bytes(int64_t max_m) const;
  // Total bytes of weights on the device.
  size_t num_weight_bytes() const { return num_weight_bytes_; }

  // Enqueues the forward of `batch` on `stream` (header comment): writes the step's K/V into
  // `kv` (one CudaKvLayer per layer) and the logits of batch.logit_rows into
  // logits [num_logit_rows, vocab_rows] (f32). No allocation, no synchronisation.
  // REQUIRES: num_tokens <= acts.row_capacity, num_logit_rows <= acts.logit_capacity, every
  // slot and table entry inside the pool. Errors: a kernel's kInvalidArgument / kInternal.
  Status forward(const CudaBatch& batch, const CudaActivations& acts, const CudaKvLayer* kv, float* logits,
                 cudaStream_t stream) const;
  // The two halves of forward(): every layer (K/V written, residual stream in acts.x and the
  // last down projection in acts.proj), then the final norm and lm_head of `num_rows` rows
  // `rows` (device, distinct, < the step's tokens) into logits [num_rows, vocab_rows]; a step
  // whose logit rows exceed acts.logit_capacity runs logits() once per chunk of them.
  Status forward_layers(const CudaBatch& batch, const CudaActivations& acts, const CudaKvLayer* kv,
                        cudaStream_t stream) const;
  Status logits(const int32_t* rows, int64_t num_rows, const CudaActivations& acts, float* logits,
                cudaStream_t stream) const;

  CudaModel(const CudaModel&) = delete;
  CudaModel& operator=(const CudaModel&) = delete;

 private:
  struct Source;  // where the weights come from (a ModelFile or a loaded Model)
  CudaModel() = default;
  static Result<std::shared_ptr<const CudaModel>> build(const Source& source);
  Status upload_weights(const Source& source);
  Status upload_layer(const Source& source, int64_t li);
  Status upload_moe_layer(const Source& source, int64_t li);  // cuda_moe.cc
  Status upload_rotaries();
  Result<CudaGemmWeight> upload_gemm(const std::vector<uint16_t>& w, const float* bias, int64_t n_rows, int64_t k_cols,
                                     const std::string& what);
  Result<DeviceMemory> upload_f32(const float* data, size_t count, const std::string& what);
  Status run_layer(int64_t li, const CudaBatch& batch, const CudaActivations& acts, const CudaKvLayer& kv,
                   cudaStream_t stream) const;
  Status run_mlp(int64_t li, int64_t T, const CudaActivations& acts, cudaStream_t stream) const;
  Status run_moe(int64_t li, int64_t T, const CudaActivations& acts, cudaStream_t stream) const;  // cuda_moe.cc
  Status gemm(const CudaGemmWeight& w, const uint16_t* x, int64_t m, float* y, int64_t row_capacity,
              const CudaActivations& acts, cudaStream_t stream) const;

  ModelConfig config_;
  std::string path_;
  CudaModelDims dims_;
  CudaDevice device_;
  AttentionKernels attention_kernels_;
  std::vector<CudaLayerWeights> layers_;
  DeviceMemory embed_own_;  // [vocab, hidden] bf16, empty when the embedding is tied to lm_head
  const uint16_t* embed_ = nullptr;
  DeviceMemory final_norm_;
  CudaGemmWeight lm_head_;
  std::vector<DeviceMemory> inv_freqs_;  // [distinct rotaries][head_dim / 2] f32
  std::vector<int> layer_rope_;          // [num_layers] index into inv_freqs_
  std::vector<int> windows_;
  std::vector<int> layer_window_;  // [num_layers] index into windows_
  std::vector<int> layer_moe_;     // [num_layers]: the layer's ordinal among the MoE layers, or -1
  int64_t num_moe_layers_ = 0;
  size_t num_weight_bytes_ = 0;
};

// The CUDA deployment's support check for a config (also used before loading any weight).
Status check_cuda_supported(const ModelConfig& config);

}  // namespace vosti
