// KvPoolSizes: how a runner divides its KV memory into block pools (docs/SPEC.md section 4).
// Without window-local KV every layer's KV sits in one pool of num_blocks blocks. With it (a
// model with sliding-window layers and EngineConfig::window_local_kv), the full layers keep
// num_blocks blocks and the window layers a pool of their own, sized so that both pools run out
// together for sequences of max_model_len tokens: a full-layer table then needs
// cdiv(len, block_size) blocks, a window table at most cdiv(block_size + window - 1, block_size)
// at decode. The same rule gives the memory a sequence takes (kv_bytes_per_sequence), which
// tools/kv_memory reports for real shapes.
// Thread safety: pure functions.
#pragma once

#include <cstdint>

#include "core/engine_config.h"
#include "model/model_config.h"

namespace vosti {

struct KvPoolSizes {
  int64_t num_blocks = 0;         // the full layers' pool (every layer's without window-local KV)
  int64_t num_window_blocks = 0;  // the window layers' pool; 0 without window-local KV
  int32_t window = 0;             // positions a window layer reads back; 0 without window-local KV
  bool full_layers = true;        // false: every layer is a window layer (num_blocks holds nothing)
  int64_t bytes = 0;              // KV memory of both pools
};

// KV bytes of one block of one layer: K and V of block_size positions.
int64_t kv_block_layer_bytes(const ModelConfig& model, int32_t block_size, int64_t element_bytes);

// The pools of `config` (num_blocks if set, else kv_cache_bytes split as above, for sequences of
// config.max_model_len tokens, or the model's max_position_embeddings when that is 0), KV elements
// of element_bytes each.
KvPoolSizes kv_pool_sizes(const ModelConfig& model, const EngineConfig& config, int64_t element_bytes);

// KV bytes one sequence of num_tokens tokens holds at decode, with or without window-local KV.
int64_t kv_bytes_per_sequence(const ModelConfig& model, int32_t block_size, int64_t element_bytes, int64_t num_tokens,
                              bool window_local);

}  // namespace vosti
