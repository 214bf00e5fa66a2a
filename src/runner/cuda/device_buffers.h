// The CUDA runner's memory, allocated once when the runner is made and fixed in place for its life
// (a CUDA graph captured once reads every later step's data from the same addresses):
//   - the step buffer: pinned host memory the runner lays each step out in (step_buffer.h) and its
//     device copy, filled by one transfer a step;
//   - the activations of the forward (CudaActivationBuffers), the logits, the sampler's scratch and
//     results, the device digests and the whole rows that come back to the host;
//   - the KV pool: per layer K and V [num_blocks, num_kv_heads, block_size, head_dim] in the
//     deployment's KV dtype, sized from what the memory fraction leaves (or EngineConfig::num_blocks);
//     with window-local KV, a second pool for the sliding-window layers (allocate_kv);
//   - the tensor-core attention's split states (partials).
// Thread safety: one owner (the runner); the memory is used on the runner's stream.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

#include "core/dtype.h"
#include "core/engine_config.h"
#include "core/status.h"
#include "kernels/cuda/attention/attention.h"
#include "kernels/cuda/device_memory.h"
#include "kernels/cuda/sampler/sampler_kernels.h"
#include "model/cuda/cuda_model.h"
#include "runner/kv_pool_sizes.h"

namespace vosti {

// The device memory behind a CudaActivations view: every buffer for `rows` token rows (rounded up
// by the caller to whole GEMM tiles) and `logit_rows` logit rows, the GEMM workspace with its
// counters zeroed and attn's padding columns zeroed (wo's padding columns read them; attention
// never writes them). Also the tests' forward fixture's.
class CudaActivationBuffers {
 public:
  // Errors: kResourceExhausted naming the buffer that does not fit; kInternal for CUDA failures.
  static Result<CudaActivationBuffers> allocate(const CudaModel& model, int64_t rows, int64_t logit_rows,
                                                cudaStream_t stream);
  const CudaActivations& view() const { return view_; }

 private:
  // The MoE layers' buffers (CudaMoeActivations), for MoE models only.
  Status allocate_moe(const CudaModel& model, int64_t rows);

  DeviceMemory x_, h_, qkv_, attn_, proj_, gate_up_, act_, h_logits_, workspace_;
  DeviceMemory moe_logits_, moe_experts_, moe_weights_, moe_pos_, moe_src_, moe_tiles_, moe_num_tiles_, moe_x_,
      moe_gate_up_, moe_act_, moe_y_, moe_routed_;
  CudaActivations view_;
};

// What one runner's steps may hold, from its EngineConfig and the model.
struct RunnerCapacity {
  int64_t tokens = 0;      // token rows a step (max_num_batched_tokens)
  int64_t seqs = 0;        // sequences a step (max_num_seqs)
  int64_t sampled = 0;     // sampled rows a step: one a sequence, 1 + k under speculation (<= tokens)
  int64_t stride = 0;      // block-table entries a sequence (max_model_len / block_size)
  int64_t logit_rows = 0;  // logits rows computed at once (a step's score rows run in chunks of it)
  int64_t adjusts = 0;     // sampler adjustment entries a step
  int64_t step_bytes = 0;  // the step buffer (StepLayout at capacity)
};

class CudaRunnerBuffers {
 public:
  // Everything but the KV pool and the partials, for `cap` on `model`'s device.
  // Errors: kResourceExhausted naming the buffer; kInternal for CUDA failures.
  static Result<CudaRunnerBuffers> allocate(const CudaModel& model, const RunnerCapacity& cap, cudaStream_t stream);

  // The KV pool of EngineConfig::num_blocks blocks (0: what gpu_memory_utilization leaves of the
  // device's memory now, less a headroom). With window-local KV (EngineConfig::window_local_kv on
  // a model with sliding-window layers) the memory splits as runner/kv_pool_sizes.h says for
  // sequences of max_len tokens: the full layers' pool and the window layers' pool, each layer's
  // view into its own; the window pool is zeroed once (a released window-table entry is read as
  // block 0, whose finite values the attention's mask zeroes exactly: step_buffer.h).
  // Errors: kResourceExhausted naming the pool (and how to make room), kInvalidArgument for a bad
  // memory fraction.
  Status allocate_kv(const CudaModel& model, const EngineConfig& config, DType kv_dtype, int64_t max_len);
  // `slots` split states of the tensor-core attention. Errors: kResourceExhausted.
  Status allocate_partials(const CudaModel& model, int32_t slots);

  const CudaKvLayer* kv() const { return kv_.data(); }  // [num_layers]
  const KvPoolSizes& kv_pools() const { return pools_; }
  int64_t num_blocks() const { return pools_.num_blocks; }
  int64_t kv_bytes() const { return static_cast<int64_t>(kv_pool_.bytes() + window_pool_.bytes()); }
  char* step_host() const { return step_host_.as<char>(); }
  char* step_device() const { return step_dev_.as<char>(); }
  const CudaActivations& acts() const { return acts_.view(); }
  float* logits() const { return logits_.as<float>(); }    // [logit_rows, vocab_rows]
  float* scratch() const { return scratch_.as<float>(); }  // [logit_rows, vocab] adjusted logits
  SamplerRowResult* results_device() const { return results_dev_.as<SamplerRowResult>(); }  // [tokens]
  const SamplerRowResult* results_host() const { return results_host_.as<SamplerRowResult>(); }
  uint64_t* digests_device() const { return digests_dev_.as<uint64_t>(); }  // [sampled, 2]
  const uint64_t* digests_host() const { return digests_host_.as<uint64_t>(); }
  float* rows_host() const { return rows_host_.as<float>(); }  // [sampled, vocab] whole rows that come back
  // [tokens, MoE layers, top_k] the step's routing on the host (MoE models; else null).
  const int32_t* routed_host() const { return routed_host_.as<int32_t>(); }
  float* partials() const { return partials_.as<float>(); }
  int32_t partial_slots() const { return partial_slots_; }
  // Device-to-host copies of the results, digests and rows (enqueued on `stream`).
  Status copy_results(int64_t num_rows, int64_t num_digests, cudaStream_t stream) const;
  // Device-to-host copy of the routing of the step's num_tokens rows (an MoE model's).
  Status copy_routed(int64_t num_tokens, int64_t per_token, cudaStream_t stream) const;

 private:
  PinnedMemory step_host_;
  DeviceMemory step_dev_;
  CudaActivationBuffers acts_;
  DeviceMemory logits_, scratch_, results_dev_, digests_dev_;
  PinnedMemory results_host_, digests_host_, rows_host_, routed_host_;
  DeviceMemory kv_pool_;      // [full layers][K, V][num_blocks, num_kv_heads, block_size, head_dim]
  DeviceMemory window_pool_;  // [window layers][K, V][num_window_blocks, ...] (window-local KV)
  KvPoolSizes pools_;
  std::vector<CudaKvLayer> kv_;  // [num_layers] views into kv_pool_ or window_pool_
  DeviceMemory partials_;        // [partial_slots, num_heads, head_dim + 2] f32
  int32_t partial_slots_ = 0;
};

}  // namespace vosti
