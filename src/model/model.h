// Model: a decoder-only transformer's config and f32 weights, loaded from a GGUF
// file or a Hugging Face safetensors directory, and its forward pass over a
// flattened batch of tokens that reads and writes a paged KV cache.
//
// Numeric policy on the CPU backends (part of the deployment; docs/ARCHITECTURE.md):
// weights are f32 (mapped from the file when stored as f32, dequantised or widened
// once at load otherwise), activations and accumulators f32, KV cache f32.
// Invariants: weight shapes match the config (checked at load).
// Thread safety: a loaded Model is immutable; concurrent forward() calls each need
// their own ForwardScratch and KvStorage.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "kernels/kernel_backend.h"
#include "model/model_config.h"

namespace vosti {

class ModelFile;

// A read-only f32 tensor: either owned or a view into a mapped file.
struct FloatTensor {
  std::vector<int64_t> shape;  // PyTorch order
  const float* data = nullptr;
  std::shared_ptr<const void> owner;
  int64_t num_elements() const;
};

struct LayerWeights {
  FloatTensor attn_norm;  // [hidden]
  FloatTensor wqkv;       // [(num_heads + 2 * num_kv_heads) * head_dim, hidden]: q, k, v stacked
  FloatTensor bqkv;       // [(num_heads + 2 * num_kv_heads) * head_dim] or empty (Qwen2 only)
  FloatTensor q_norm;     // [head_dim] or empty (Qwen3 only)
  FloatTensor k_norm;     // [head_dim] or empty (Qwen3 only)
  FloatTensor wo;         // [hidden, num_heads * head_dim]
  FloatTensor ffn_norm;   // [hidden]
  FloatTensor w_gate_up;  // [2 * intermediate, hidden]: gate then up
  FloatTensor w_down;     // [hidden, intermediate]
};

struct ModelWeights {
  FloatTensor embed;  // [vocab, hidden]
  std::vector<LayerWeights> layers;
  FloatTensor final_norm;  // [hidden]
  FloatTensor lm_head;     // [vocab, hidden] (the embedding when tied)
};

// How the batch's tokens map onto sequences and cache slots; built by the runner.
struct ForwardBatch {
  std::vector<int32_t> token_ids;            // [num_tokens]
  std::vector<int32_t> positions;            // [num_tokens]
  std::vector<int64_t> slot_mapping;         // [num_tokens] block * block_size + offset
  std::vector<const int32_t*> block_tables;  // [num_tokens] the token's sequence's block table
  std::vector<int32_t> logit_rows;           // [num_logit_rows] indices into the tokens whose logits are wanted
  int64_t num_tokens() const { return static_cast<int64_t>(token_ids.size()); }
};

// The KV cache tensors of all layers: [num_layers] x {k, v} [num_blocks, block_size, num_kv_heads, head_dim].
class KvStorage {
 public:
  KvStorage(const ModelConfig& config, int64_t num_blocks, int block_size);
  PagedKvView layer(int64_t index);
  int64_t num_blocks() const { return num_blocks_; }
  int block_size() const { return block_size_; }

 private:
  int64_t num_blocks_;
  int block_size_;
  int num_kv_heads_;
  int head_dim_;
  std::vector<std::vector<float>> k_;  // [num_layers][num_blocks * block_size * num_kv_heads * head_dim]
  std::vector<std::vector<float>> v_;
};

// Activation buffers of one forward, reused across calls so a step does not page-fault
// fresh memory. Contents never carry over between calls (every buffer is fully written
// before it is read), so reuse cannot change a result.
struct ForwardScratch {
  std::vector<float> x, h, qkv, q, k, v, attn, proj, gate_up, act, rows;
};

struct LoadOptions {
  // Called after each layer's weights are ready: (layers done, total layers). May be empty.
  std::function<void(int64_t, int64_t)> on_progress;
};

class Model {
 public:
  // Loads a .gguf file or a directory with config.json + safetensors.
  static Result<std::shared_ptr<const Model>> load(const std::string& path, const LoadOptions& options = {});
  // Loads an opened model file (e.g. one with tensors replaced by a weight update).
  static Result<std::shared_ptr<const Model>> load(const ModelFile& file, const LoadOptions& options = {});

  const ModelConfig& config() const { return config_; }
  const ModelWeights& weights() const { return weights_; }
  const std::string& path() const { return path_; }
  // Bytes of f32 weights that were copied (dequantised or widened) rather than mapped.
  int64_t num_copied_bytes() const { return num_copied_bytes_; }

  // Runs the batch: writes every token's K/V into `kv`, then computes hidden states and
  // the logits of batch.logit_rows into logits [num_logit_rows, vocab].
  // REQUIRES: every slot and block table entry is < kv.num_blocks() * block_size.
  void forward(const ForwardBatch& batch, KvStorage& kv, KernelBackend& kernels, float* logits,
               ForwardScratch& scratch) const;

  // Builds from parts (tests, random-weight models).
  Model(std::string path, ModelConfig config, ModelWeights weights, int64_t num_copied_bytes);

 private:
  std::string path_;
  ModelConfig config_;
  ModelWeights weights_;
  std::vector<float> inv_freq_;  // [head_dim / 2]
  int64_t num_copied_bytes_ = 0;
};

}  // namespace vosti
