// Model: a decoder-only transformer's config and weights, loaded from a GGUF file or a
// Hugging Face safetensors directory, and its forward pass over a flattened batch of
// tokens that reads and writes a paged KV cache.
//
// Numeric policy on the CPU backends (part of the deployment; docs/ARCHITECTURE.md): a
// weight's value is its f32 decoding (core/quant_blocks.h: f32, f16, bf16 or a ggml block
// format); activations and accumulators f32, KV cache f32. The projection matrices and the
// embedding stay in the file's encoding, mapped, and the kernels decode them as they
// compute (kernels/cpu/matmul_avx2.h): no f32 copy of a matrix is made, and the logits are
// bit for bit those of computing with the f32 values. Norm weights and biases are f32
// (mapped, or widened once at load).
// Invariants: weight shapes match the config (checked at load).
// Thread safety: a loaded Model is immutable; concurrent forward() calls each need
// their own ForwardScratch and KvStorage.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/status.h"
#include "kernels/kernel_backend.h"
#include "model/model_config.h"
#include "model/moe_layer.h"

namespace vosti {

// A read-only weight tensor. `data` holds its f32 values when the model has them as f32
// (owned, or mapped when the file stores aligned f32 in HF order); a matrix kept in the
// file's encoding has data == nullptr. Every 2-D tensor of a loaded Model also has
// `matrix`: its rows as the kernels read them (for f32 data, rows into data). `owner`
// keeps the bytes and the row tables alive.
struct FloatTensor {
  std::vector<int64_t> shape;  // PyTorch order
  const float* data = nullptr;
  std::shared_ptr<const void> owner;
  WeightMatrix matrix;
  int64_t num_elements() const;
};

struct LayerWeights {
  FloatTensor attn_norm;       // [hidden]
  FloatTensor wqkv;            // [(num_heads + 2 * num_kv_heads) * head_dim, hidden]: q, k, v stacked
  FloatTensor bqkv;            // [(num_heads + 2 * num_kv_heads) * head_dim] or empty (Qwen2 only)
  FloatTensor q_norm;          // [head_dim] or empty (Qwen3, Gemma 3)
  FloatTensor k_norm;          // [head_dim] or empty (Qwen3, Gemma 3)
  FloatTensor wo;              // [hidden, num_heads * head_dim]
  FloatTensor post_attn_norm;  // [hidden] or empty (LayerSpec::post_attn_norm)
  FloatTensor ffn_norm;        // [hidden]
  FloatTensor w_gate_up;       // [2 * intermediate, hidden]: gate then up (empty in an MoE layer)
  FloatTensor w_down;          // [hidden, intermediate] (empty in an MoE layer)
  FloatTensor post_ffn_norm;   // [hidden] or empty (LayerSpec::post_ffn_norm)
  // A mixture-of-experts layer (LayerSpec::moe enabled) has these instead of w_gate_up/w_down:
  FloatTensor router;                       // [num_experts, hidden]
  std::vector<FloatTensor> expert_gate_up;  // [num_experts] x [2 * expert intermediate, hidden]: gate then up
  std::vector<FloatTensor> expert_down;     // [num_experts] x [hidden, expert intermediate]
};
// Every norm weight of a loaded model is the multiplier itself (Gemma's 1 + w included:
// ModelFile::read_f32).

struct ModelWeights {
  FloatTensor embed;  // [vocab, hidden]
  std::vector<LayerWeights> layers;
  FloatTensor final_norm;  // [hidden]
  FloatTensor lm_head;     // [vocab, hidden] (the embedding when tied)
};

// How a step's token rows map onto sequences and cache slots: a view of the runner's StepBatch
// (runner/step_batch.h, which holds the slot formula), valid for one forward() call.
struct ForwardBatch {
  std::span<const int32_t> token_ids;     // [T]
  std::span<const int32_t> positions;     // [T]
  std::span<const int32_t> slots;         // [T] cache slot of each row's K/V
  std::span<const int32_t> row_seq;       // [T] the row's sequence
  std::span<const int32_t> block_tables;  // [num_seqs, block_table_stride] physical blocks of each sequence
  int32_t block_table_stride = 0;
  std::span<const int32_t> logit_rows;  // [R] token rows whose logits are wanted
  // Window-local KV (empty without): the window layers' slots and tables (released leading
  // entries kNoBlock), which those layers read and write instead of slots / block_tables.
  std::span<const int32_t> window_slots;         // [T]
  std::span<const int32_t> window_block_tables;  // [num_seqs, window_block_table_stride]
  int32_t window_block_table_stride = 0;
  int64_t num_tokens() const { return static_cast<int64_t>(token_ids.size()); }
};

// The KV cache tensors of all layers: [num_layers] x {k, v} [num_blocks, block_size, num_kv_heads, head_dim];
// with window-local KV (num_window_blocks > 0) the window layers' (sliding_window > 0) hold
// num_window_blocks blocks instead: they are addressed through the window tables.
// Zero-filled pages the OS maps on first write (calloc): memory is resident as the cache fills,
// not all at start. A slot is always written before it is read (rule 4).
class KvStorage {
 public:
  KvStorage(const ModelConfig& config, int64_t num_blocks, int block_size, int64_t num_window_blocks = 0);
  PagedKvView layer(int64_t index);
  int64_t num_blocks() const { return num_blocks_; }
  int64_t num_window_blocks() const { return num_window_blocks_; }
  int block_size() const { return block_size_; }

 private:
  int64_t num_blocks_;
  int64_t num_window_blocks_;
  std::vector<int64_t> layer_blocks_;  // [num_layers] blocks of each layer's tensors
  int block_size_;
  int num_kv_heads_;
  int head_dim_;
  struct FreeDeleter {
    void operator()(float* p) const;
  };
  using Buffer = std::unique_ptr<float[], FreeDeleter>;
  std::vector<Buffer> k_;  // [num_layers][num_blocks * block_size * num_kv_heads * head_dim]
  std::vector<Buffer> v_;
};

// Activation buffers of one forward, reused across calls so a step does not page-fault
// fresh memory. Contents never carry over between calls (every buffer is fully written
// before it is read), so reuse cannot change a result.
struct ForwardScratch {
  std::vector<float> x, h, qkv, q, k, v, attn, proj, gate_up, act, rows, rope_cos, rope_sin;
  std::vector<AttentionQuery> queries;  // [num distinct windows, T]
  MoeScratch moe;                       // the mixture-of-experts layers' buffers
};

struct LoadOptions {
  // Called after each layer's weights are ready: (layers done, total layers). May be empty.
  std::function<void(int64_t, int64_t)> on_progress;
  // Give every tensor f32 `data` (dequantised or widened copies where the file stores
  // another encoding), as the engine did before issue 22: for consumers that read f32
  // values (CudaModel::upload, the CUDA tests' emulation). Same logits either way.
  bool f32_weights = false;
};

// LoadOptions with f32_weights set.
inline LoadOptions f32_load_options() {
  LoadOptions o;
  o.f32_weights = true;
  return o;
}

class ModelFile;

class Model {
 public:
  // Loads a .gguf file or a directory with config.json + safetensors.
  static Result<std::shared_ptr<const Model>> load(const std::string& path, const LoadOptions& options = {});
  // Loads from an opened file; the model keeps what it maps alive (the file object may go).
  static Result<std::shared_ptr<const Model>> load(const ModelFile& file, const LoadOptions& options = {});

  const ModelConfig& config() const { return config_; }
  const ModelWeights& weights() const { return weights_; }
  const std::string& path() const { return path_; }
  // Bytes of f32 weights that were copied (dequantised or widened) rather than mapped.
  int64_t num_copied_bytes() const { return num_copied_bytes_; }
  // Bytes the weights take as the kernels read them (stored encodings and f32 data; a tied
  // lm_head counted once).
  int64_t weight_bytes() const { return weight_bytes_; }

  // Runs the batch: writes every token's K/V into `kv`, then computes hidden states and
  // the logits of batch.logit_rows into logits [num_logit_rows, vocab].
  // REQUIRES: every slot and block table entry is < kv.num_blocks() * block_size.
  void forward(const ForwardBatch& batch, KvStorage& kv, KernelBackend& kernels, float* logits,
               ForwardScratch& scratch) const;

  // Builds from parts (tests, random-weight models): a 2-D tensor without `matrix` gets one
  // over its f32 data.
  Model(std::string path, ModelConfig config, ModelWeights weights, int64_t num_copied_bytes);

 private:
  // x[H] = row `id` of the embedding, decoded, times config().embed_scale.
  void embed_row(int32_t id, float* x) const;
  // One decoder layer on the residual rows x [T, H] (scratch holds the step's rotary tables
  // and queries, filled by forward()).
  void forward_layer(int64_t li, const ForwardBatch& batch, KvStorage& kv, KernelBackend& kernels,
                     ForwardScratch& scratch) const;
  // logits [R, vocab] of the residual rows x[logit_rows[r]] ([T, H]): final norm, lm_head.
  void final_logits(std::span<const int32_t> logit_rows, const std::vector<float>& x, KernelBackend& kernels,
                    float* logits, ForwardScratch& scratch) const;

  std::string path_;
  ModelConfig config_;
  ModelWeights weights_;
  // The step's rotary tables and attention windows, one per distinct value over the layers
  // (Gemma 3: the sliding and the global layers'; other families: one each).
  std::vector<std::vector<float>> inv_freqs_;  // [num rotaries][head_dim / 2]
  std::vector<int32_t> windows_;               // [num windows]: sliding window (0: none)
  std::vector<int> layer_rope_;                // [num_layers]: index into inv_freqs_
  std::vector<int> layer_window_;              // [num_layers]: index into windows_
  std::vector<int> layer_moe_;                 // [num_layers]: the layer's ordinal among MoE layers, or -1
  int64_t num_moe_layers_ = 0;
  int64_t num_copied_bytes_ = 0;
  int64_t weight_bytes_ = 0;
};

}  // namespace vosti
