// Tiny Llama-shaped GGUF models whose every matrix (embedding included) is stored in one
// weight type, written byte for byte by a fixed generator (SplitMix64), so the bytes and
// hence the logits are the same on every machine. Random block bytes with small, sane
// f16 scale fields: every quant code and every scale/min field is exercised, and the
// activations stay finite. Used by the logits-digest gate (logits_digest_test.cc).
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "io/weight_view.h"
#include "tests/io/test_files.h"

namespace vosti::testing {

// Shape of every tiny quant model: K-quant rows need multiples of 256 in k.
struct TinyQuantShape {
  int64_t hidden = 256, intermediate = 512, layers = 2, heads = 4, kv_heads = 2, head_dim = 64, vocab = 320;
};

// SplitMix64: a fixed, portable generator.
class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t seed) : s_(seed) {}
  uint64_t next() {
    uint64_t z = (s_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  // Uniform in [0, 1) with 24 bits (exact in f32).
  float unit() { return static_cast<float>(next() >> 40) * (1.0f / 16777216.0f); }

 private:
  uint64_t s_;
};

// f16 bytes of +-mag * (0.5 + u): the sign random when `signed_value`.
inline void put_f16(uint8_t* p, SplitMix64& rng, float mag, bool signed_value) {
  float v = mag * (0.5f + rng.unit());
  if (signed_value && (rng.next() & 1)) v = -v;
  const uint16_t h = f32_to_f16(v);
  std::memcpy(p, &h, 2);
}

// The bytes of a [rows, cols] tensor of `type`: random codes, small scales.
inline std::string random_weight_bytes(WeightType type, int64_t rows, int64_t cols, SplitMix64& rng) {
  const WeightTypeTraits* t = weight_type_traits(static_cast<uint32_t>(type));
  const int64_t n = rows * cols;
  std::string out(static_cast<size_t>(n / t->block_elems) * t->block_bytes, '\0');
  auto* b = reinterpret_cast<uint8_t*>(out.data());
  if (type == WeightType::kF32 || type == WeightType::kF16 || type == WeightType::kBF16) {
    for (int64_t i = 0; i < n; ++i) {
      const float v = 0.08f * (rng.unit() - 0.5f);
      if (type == WeightType::kF32) {
        std::memcpy(b + 4 * i, &v, 4);
      } else {
        const uint16_t h = type == WeightType::kF16 ? f32_to_f16(v) : f32_to_bf16(v);
        std::memcpy(b + 2 * i, &h, 2);
      }
    }
    return out;
  }
  for (auto& c : out) c = static_cast<char>(rng.next() & 0xff);
  const size_t num_blocks = out.size() / t->block_bytes;
  for (size_t i = 0; i < num_blocks; ++i) {
    uint8_t* blk = b + i * t->block_bytes;
    switch (type) {
      case WeightType::kQ4_0:
      case WeightType::kQ5_0:
        put_f16(blk, rng, 0.004f, true);
        break;
      case WeightType::kQ4_1:
      case WeightType::kQ5_1:
        put_f16(blk, rng, 0.004f, false);
        put_f16(blk + 2, rng, 0.03f, true);
        break;
      case WeightType::kQ8_0:
        put_f16(blk, rng, 0.0003f, true);
        break;
      case WeightType::kQ4_K:
      case WeightType::kQ5_K:
        put_f16(blk, rng, 0.0001f, false);
        put_f16(blk + 2, rng, 0.0005f, false);
        break;
      case WeightType::kQ6_K:
        put_f16(blk + 208, rng, 0.00001f, true);
        break;
      default:
        break;
    }
  }
  return out;
}

// A tiny llama GGUF with every matrix in `type` (norms f32, tied embedding), as bytes.
inline std::string tiny_quant_model(WeightType type, uint64_t seed, const TinyQuantShape& s = {}) {
  SplitMix64 rng(seed);
  GgufBuilder g;
  g.kv_string("general.architecture", "llama");
  g.kv_u32("llama.embedding_length", static_cast<uint32_t>(s.hidden));
  g.kv_u32("llama.feed_forward_length", static_cast<uint32_t>(s.intermediate));
  g.kv_u32("llama.block_count", static_cast<uint32_t>(s.layers));
  g.kv_u32("llama.attention.head_count", static_cast<uint32_t>(s.heads));
  g.kv_u32("llama.attention.head_count_kv", static_cast<uint32_t>(s.kv_heads));
  g.kv_u32("llama.context_length", 256);
  g.kv_u32("llama.vocab_size", static_cast<uint32_t>(s.vocab));
  g.kv("llama.attention.layer_norm_rms_epsilon", GgufType::kFloat32, Bytes().put(1e-5f).data());
  const auto t = static_cast<uint32_t>(type);
  auto matrix = [&](const std::string& name, int64_t rows, int64_t cols) {
    g.tensor({name, {cols, rows}, t, random_weight_bytes(type, rows, cols, rng)});
  };
  auto norm = [&](const std::string& name) {
    Bytes b;
    for (int64_t i = 0; i < s.hidden; ++i) b.put(0.75f + 0.5f * rng.unit());
    g.tensor({name, {s.hidden}, 0, b.data()});
  };
  const int64_t q = s.heads * s.head_dim, kv = s.kv_heads * s.head_dim;
  matrix("token_embd.weight", s.vocab, s.hidden);
  norm("output_norm.weight");
  for (int64_t l = 0; l < s.layers; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    norm(p + "attn_norm.weight");
    matrix(p + "attn_q.weight", q, s.hidden);
    matrix(p + "attn_k.weight", kv, s.hidden);
    matrix(p + "attn_v.weight", kv, s.hidden);
    matrix(p + "attn_output.weight", s.hidden, q);
    norm(p + "ffn_norm.weight");
    matrix(p + "ffn_gate.weight", s.intermediate, s.hidden);
    matrix(p + "ffn_up.weight", s.intermediate, s.hidden);
    matrix(p + "ffn_down.weight", s.hidden, s.intermediate);
  }
  return g.build();
}

// Every weight type the loader computes from.
inline const std::vector<WeightType>& loadable_weight_types() {
  static const std::vector<WeightType> types = {
      WeightType::kF32,  WeightType::kF16,  WeightType::kBF16, WeightType::kQ4_0, WeightType::kQ4_1, WeightType::kQ5_0,
      WeightType::kQ5_1, WeightType::kQ8_0, WeightType::kQ4_K, WeightType::kQ5_K, WeightType::kQ6_K};
  return types;
}

}  // namespace vosti::testing
