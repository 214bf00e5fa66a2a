// KV pool sizing (runner/kv_pool_sizes.h), and the report of docs/BENCHMARKS.md: the KV memory a
// Gemma3-4B sequence holds at 32K context with and without window-local KV, and the largest batch
// of such sequences that fits in 80 GB beside the bf16 weights.
#include "runner/kv_pool_sizes.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "core/check.h"

namespace vosti {
namespace {

// Gemma3-4B's text config (google/gemma-3-4b-it, the numbers of `vosti make-model gemma3-4b`).
ModelConfig gemma3_4b() {
  const nlohmann::json j = {{"architectures", {"Gemma3ForCausalLM"}},
                            {"model_type", "gemma3_text"},
                            {"hidden_size", 2560},
                            {"intermediate_size", 10240},
                            {"num_hidden_layers", 34},
                            {"num_attention_heads", 8},
                            {"num_key_value_heads", 4},
                            {"head_dim", 256},
                            {"vocab_size", 262208},
                            {"max_position_embeddings", 131072},
                            {"rms_norm_eps", 1e-6},
                            {"rope_theta", 1000000.0},
                            {"rope_scaling", {{"factor", 8.0}, {"rope_type", "linear"}}},
                            {"rope_local_base_freq", 10000.0},
                            {"hidden_activation", "gelu_pytorch_tanh"},
                            {"query_pre_attn_scalar", 256},
                            {"sliding_window", 1024},
                            {"sliding_window_pattern", 6},
                            {"tie_word_embeddings", true},
                            {"bos_token_id", 2},
                            {"eos_token_id", {1, 106}}};
  Result<ModelConfig> c = ModelConfig::from_hf_config(j, "gemma3-4b");
  VOSTI_CHECK(c.ok(), c.status().to_string());
  return std::move(c).value();
}

// bf16 weights of the text model: embedding (tied lm_head), per layer q/k/v/o, gate/up/down and
// the norms, the final norm.
int64_t bf16_weight_bytes(const ModelConfig& c) {
  const int64_t q = c.num_heads * c.head_dim, kv = c.num_kv_heads * c.head_dim;
  const int64_t per_layer = c.hidden_size * (q + 2 * kv) + q * c.hidden_size + 3 * c.hidden_size * c.intermediate_size +
                            4 * c.hidden_size + 2 * c.head_dim;
  return 2 * (c.vocab_size * c.hidden_size + c.num_layers * per_layer + c.hidden_size);
}

TEST(KvPoolSizes, Gemma3_4bAt32kHoldsUnderAFifthOfItsKvWithWindowLocalKv) {
  const ModelConfig c = gemma3_4b();
  const KvLayerGroups g = c.kv_layer_groups();
  ASSERT_EQ(g.num_full_layers, 5);  // layers 5, 11, 17, 23, 29
  ASSERT_EQ(g.num_window_layers, 29);
  ASSERT_EQ(g.window, 1024);
  constexpr int64_t kContext = 32768, kBf16 = 2, kGpu = 80'000'000'000;
  constexpr int32_t kBlock = 16;
  const int64_t per_block_layer = kv_block_layer_bytes(c, kBlock, kBf16);  // 2 * 16 * 4 * 256 * 2
  EXPECT_EQ(per_block_layer, 65536);
  const int64_t full = kv_bytes_per_sequence(c, kBlock, kBf16, kContext, false);
  const int64_t local = kv_bytes_per_sequence(c, kBlock, kBf16, kContext, true);
  EXPECT_EQ(full, 34 * 2048 * per_block_layer);
  EXPECT_EQ(local, (5 * 2048 + 29 * 65) * per_block_layer);  // a window table: cdiv(16 + 1023, 16) blocks
  const int64_t weights = bf16_weight_bytes(c);
  const int64_t kv_budget = kGpu - weights;
  const int64_t batch_full = kv_budget / full, batch_local = kv_budget / local;
  std::printf("Gemma3-4B (text), bf16 KV, block %d, %lld-token context:\n", kBlock, static_cast<long long>(kContext));
  std::printf("  KV per sequence: %.3f GiB without window-local KV, %.3f GiB with (%.2fx less)\n",
              static_cast<double>(full) / (1 << 30), static_cast<double>(local) / (1 << 30),
              static_cast<double>(full) / static_cast<double>(local));
  std::printf("  bf16 weights %.2f GB; KV budget in 80 GB: %.2f GB\n", static_cast<double>(weights) / 1e9,
              static_cast<double>(kv_budget) / 1e9);
  std::printf("  largest batch at %lld tokens: %lld without, %lld with window-local KV\n",
              static_cast<long long>(kContext), static_cast<long long>(batch_full),
              static_cast<long long>(batch_local));
  EXPECT_LT(5 * local, full);
  EXPECT_GT(batch_local, 5 * batch_full);

  // The pools kv_pool_sizes gives that budget hold that many sequences of max_model_len too.
  EngineConfig e;
  e.block_size = kBlock;
  e.max_model_len = kContext;
  e.kv_cache_bytes = kv_budget;
  e.window_local_kv = true;
  const KvPoolSizes pools = kv_pool_sizes(c, e, kBf16);
  EXPECT_EQ(pools.window, 1024);
  EXPECT_TRUE(pools.full_layers);
  EXPECT_LE(pools.bytes, kv_budget);
  EXPECT_EQ(std::min(pools.num_blocks / 2048, pools.num_window_blocks / 65), batch_local);
  e.window_local_kv = false;
  EXPECT_EQ(kv_pool_sizes(c, e, kBf16).num_blocks / 2048, batch_full);
}

TEST(KvPoolSizes, WithoutWindowLayersNothingChanges) {
  ModelConfig c = gemma3_4b();
  for (LayerSpec& l : c.layers) l.sliding_window = 0;
  EngineConfig e;
  e.window_local_kv = true;
  const KvPoolSizes pools = kv_pool_sizes(c, e, 4);
  EXPECT_EQ(pools.window, 0);
  EXPECT_EQ(pools.num_window_blocks, 0);
  EXPECT_EQ(kv_bytes_per_sequence(c, 16, 2, 32768, true), kv_bytes_per_sequence(c, 16, 2, 32768, false));
}

}  // namespace
}  // namespace vosti
