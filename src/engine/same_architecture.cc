#include "engine/same_architecture.h"

#include <string>

namespace vosti {

Status same_architecture(const ModelConfig& a, const ModelConfig& b) {
  const auto differ = [](const char* field, const auto& x, const auto& y) {
    return invalid_argument(std::string("the new weights' model differs in ") + field + " (" + std::to_string(x) +
                            " vs " + std::to_string(y) +
                            "): weights can only be replaced by weights of the same "
                            "architecture");
  };
  if (a.arch != b.arch) return differ("architecture", static_cast<int>(a.arch), static_cast<int>(b.arch));
  if (a.vocab_size != b.vocab_size) return differ("vocab_size", a.vocab_size, b.vocab_size);
  if (a.hidden_size != b.hidden_size) return differ("hidden_size", a.hidden_size, b.hidden_size);
  if (a.intermediate_size != b.intermediate_size)
    return differ("intermediate_size", a.intermediate_size, b.intermediate_size);
  if (a.num_layers != b.num_layers) return differ("num_layers", a.num_layers, b.num_layers);
  if (a.num_heads != b.num_heads) return differ("num_heads", a.num_heads, b.num_heads);
  if (a.num_kv_heads != b.num_kv_heads) return differ("num_kv_heads", a.num_kv_heads, b.num_kv_heads);
  if (a.head_dim != b.head_dim) return differ("head_dim", a.head_dim, b.head_dim);
  if (a.max_position_embeddings != b.max_position_embeddings)
    return differ("max_position_embeddings", a.max_position_embeddings, b.max_position_embeddings);
  if (a.tie_word_embeddings != b.tie_word_embeddings)
    return differ("tie_word_embeddings", a.tie_word_embeddings, b.tie_word_embeddings);
  if (a.qkv_bias != b.qkv_bias) return differ("qkv_bias", a.qkv_bias, b.qkv_bias);
  if (a.qk_norm != b.qk_norm) return differ("qk_norm", a.qk_norm, b.qk_norm);
  return Status();
}

}  // namespace vosti
