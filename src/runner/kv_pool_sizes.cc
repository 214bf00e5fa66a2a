#include "runner/kv_pool_sizes.h"

#include <algorithm>

namespace vosti {
namespace {

int64_t cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Blocks a window table holds at decode, at most (scheduler.h: first_window_block .. the block
// of the next position).
int64_t window_blocks_at_decode(int32_t window, int32_t block_size, int64_t num_tokens) {
  return std::min(cdiv(num_tokens, block_size), cdiv(block_size + window - 1, block_size));
}

}  // namespace

int64_t kv_block_layer_bytes(const ModelConfig& model, int32_t block_size, int64_t element_bytes) {
  return 2 * int64_t{block_size} * model.num_kv_heads * model.head_dim * element_bytes;
}

int64_t kv_bytes_per_sequence(const ModelConfig& model, int32_t block_size, int64_t element_bytes, int64_t num_tokens,
                              bool window_local) {
  const int64_t per = kv_block_layer_bytes(model, block_size, element_bytes);
  const KvLayerGroups g = model.kv_layer_groups();
  if (!window_local || g.num_window_layers == 0) return model.num_layers * cdiv(num_tokens, block_size) * per;
  return (g.num_full_layers * cdiv(num_tokens, block_size) +
          g.num_window_layers * window_blocks_at_decode(g.window, block_size, num_tokens)) *
         per;
}

KvPoolSizes kv_pool_sizes(const ModelConfig& model, const EngineConfig& config, int64_t element_bytes) {
  const int32_t bs = config.block_size;
  const int64_t per = kv_block_layer_bytes(model, bs, element_bytes);
  const int64_t max_blocks = (int64_t{1} << 31) / bs - 1;  // int32 slots
  const KvLayerGroups g = model.kv_layer_groups();
  KvPoolSizes out;
  if (!config.window_local_kv || g.num_window_layers == 0) {
    out.num_blocks = config.num_blocks > 0 ? config.num_blocks : config.kv_cache_bytes / (model.num_layers * per);
    out.num_blocks = std::min(out.num_blocks, max_blocks);
    out.bytes = out.num_blocks * model.num_layers * per;
    return out;
  }
  out.window = g.window;
  out.full_layers = g.num_full_layers > 0;
  if (config.num_blocks > 0) {
    out.num_blocks = out.num_window_blocks = std::min(config.num_blocks, max_blocks);
  } else {
    const int64_t len = config.max_model_len > 0 ? config.max_model_len : model.max_position_embeddings;
    const int64_t full = g.num_full_layers * cdiv(len, bs);                                   // layer-blocks a sequence
    const int64_t window = g.num_window_layers * window_blocks_at_decode(g.window, bs, len);  // holds in each pool
    const int64_t layer_blocks = config.kv_cache_bytes / per;                                 // what the memory holds
    out.num_blocks = g.num_full_layers > 0 ? layer_blocks * full / (full + window) / g.num_full_layers : 0;
    out.num_window_blocks = (layer_blocks - out.num_blocks * g.num_full_layers) / g.num_window_layers;
    out.num_blocks = std::min(out.num_blocks, max_blocks);
    out.num_window_blocks = std::min(out.num_window_blocks, max_blocks);
  }
  out.bytes = (out.num_blocks * g.num_full_layers + out.num_window_blocks * g.num_window_layers) * per;
  // The scheduler keeps a pool for the full layers' tables; without full layers it is bookkeeping only.
  if (!out.full_layers) out.num_blocks = std::max<int64_t>(out.num_window_blocks, 1);
  return out;
}

}  // namespace vosti
