// vosti make-model: writes a random-weight model with the exact config of a real one (a
// Hugging Face directory: config.json, bf16 safetensors shards with
// model.safetensors.index.json, and a byte-level tokenizer), for GPU work on shapes whose
// weights are not downloaded: nothing comes from a model hub, nothing large is committed.
// Three shapes are no real model's: tiny-llama (3 layers of 64, 512 tokens), a model with a
// tokenizer small enough for `vosti serve` in the CPU tests (the paper protocol over HTTP), and
// tiny-qwen3-moe / tiny-mixtral, the mixture-of-experts layouts at that size. The MoE shapes
// (qwen3-30b-a3b, qwen3-235b-a22b, mixtral-8x7b, mixtral-8x22b) write the Hub's per-expert tensors.
//
// Weights: every matrix uniform in [-a, a] with a = sqrt(3) * 0.02 (the std HF initialises
// with), the embedding with std 0.1 (tied lm_heads give logits of std ~2), norms 1, biases 0; each element
// a pure function of (seed, tensor name, index) (SplitMix64), so a model is reproducible from
// its seed. The tokenizer: the 256 byte tokens, the shape's special tokens at their real ids,
// unreachable filler tokens up to the vocabulary, and a ChatML template (Llama 3's and Gemma 3's
// own for those shapes). Gemma's norm weights are 0 (it multiplies by 1 + w).
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "core/dtype.h"
#include "io/safetensors_writer.h"
#include "tools/commands.h"
#include "tools/make_model_shapes.h"

namespace vosti::tools {
namespace {

using nlohmann::ordered_json;

uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

uint64_t name_key(const std::string& name, uint64_t seed) {
  uint64_t h = splitmix64(seed);
  for (unsigned char ch : name) h = splitmix64(h ^ ch);
  return h;
}

// Fills bf16 values uniform in [-a, a] for elements [first, first + count) of a tensor.
void fill_uniform_bf16(uint16_t* out, size_t first, size_t count, uint64_t key, float a) {
  for (size_t j = 0; j < count; ++j) {
    const size_t i = first + j;
    const uint64_t r = splitmix64(key ^ (i * 0xD1B54A32D192ED03ull));
    const float u = static_cast<float>(r >> 40) * (1.0f / 16777216.0f);  // [0, 1)
    out[j] = f32_to_bf16((2.0f * u - 1.0f) * a);
  }
}

void fill_const_bf16(uint16_t* out, size_t count, float v) { std::fill(out, out + count, f32_to_bf16(v)); }

ordered_json config_json(const Shape& s) {
  const std::string type = s.model_type;
  const char* arch = type == "qwen3"         ? "Qwen3ForCausalLM"
                     : type == "qwen2"       ? "Qwen2ForCausalLM"
                     : type == "gemma3_text" ? "Gemma3ForCausalLM"
                     : type == "qwen3_moe"   ? "Qwen3MoeForCausalLM"
                     : type == "mixtral"     ? "MixtralForCausalLM"
                                             : "LlamaForCausalLM";
  ordered_json c = {{"architectures", {arch}},
                    {"model_type", s.model_type},
                    {"hidden_size", s.hidden},
                    {"intermediate_size", s.intermediate},
                    {"num_hidden_layers", s.layers},
                    {"num_attention_heads", s.heads},
                    {"num_key_value_heads", s.kv_heads},
                    {"head_dim", s.head_dim},
                    {"vocab_size", s.vocab},
                    {"max_position_embeddings", s.max_positions},
                    {"rms_norm_eps", s.rms_eps},
                    {"rope_theta", s.rope_theta},
                    {"tie_word_embeddings", s.tied},
                    {"bos_token_id", s.bos},
                    {"eos_token_id", s.eos.size() == 1 ? ordered_json(s.eos[0]) : ordered_json(s.eos)},
                    {"torch_dtype", "bfloat16"},
                    {"attention_bias", s.qkv_bias}};
  if (s.extra.is_null()) c["hidden_act"] = "silu";
  if (!s.rope_scaling.is_null()) c["rope_scaling"] = s.rope_scaling;
  if (!s.extra.is_null())
    for (const auto& [key, value] : s.extra.items()) c[key] = value;
  c["vosti_random_weights"] = true;
  return c;
}

// GPT-2's byte-to-unicode map: the printable form of each byte in byte-level BPE vocabularies.
std::string byte_token(int b) {
  int cp = b;
  const bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
  if (!printable) {
    int n = 0;
    for (int x = 0; x < b; ++x) {
      const bool p = (x >= 33 && x <= 126) || (x >= 161 && x <= 172) || (x >= 174 && x <= 255);
      if (!p) ++n;
    }
    cp = 256 + n;
  }
  std::string out;
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
  return out;
}

Status write_tokenizer(const Shape& s, const std::filesystem::path& dir) {
  std::vector<std::string> vocab(static_cast<size_t>(s.vocab));
  std::vector<bool> taken(static_cast<size_t>(s.vocab), false);
  for (const Special& sp : s.specials) taken[static_cast<size_t>(sp.id)] = true;
  int64_t next = 0;
  for (int b = 0; b < 256; ++b) {
    while (taken[static_cast<size_t>(next)]) ++next;
    vocab[static_cast<size_t>(next)] = byte_token(b);
    taken[static_cast<size_t>(next)] = true;
  }
  // A std::map-backed object: ordered_json looks keys up linearly (quadratic for 152k tokens).
  nlohmann::json model_vocab = nlohmann::json::object();
  for (int64_t i = 0; i < s.vocab; ++i) {
    std::string t = vocab[static_cast<size_t>(i)];
    bool special = false;
    for (const Special& sp : s.specials) special |= sp.id == i;
    if (special) continue;
    if (t.empty()) t = "<|vosti_filler_" + std::to_string(i) + "|>";
    model_vocab[t] = i;
  }
  ordered_json added = ordered_json::array();
  for (const Special& sp : s.specials)
    added.push_back({{"id", sp.id},
                     {"content", sp.text},
                     {"single_word", false},
                     {"lstrip", false},
                     {"rstrip", false},
                     {"normalized", false},
                     {"special", true}});
  const ordered_json byte_level = {
      {"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true}, {"use_regex", true}};
  ordered_json tok = {{"version", "1.0"},
                      {"truncation", nullptr},
                      {"padding", nullptr},
                      {"added_tokens", added},
                      {"normalizer", nullptr},
                      {"pre_tokenizer", byte_level},
                      {"post_processor", nullptr},
                      {"decoder", byte_level},
                      {"model",
                       {{"type", "BPE"},
                        {"dropout", nullptr},
                        {"unk_token", nullptr},
                        {"continuing_subword_prefix", nullptr},
                        {"end_of_word_suffix", nullptr},
                        {"fuse_unk", false},
                        {"byte_fallback", false},
                        {"vocab", model_vocab},
                        {"merges", ordered_json::array()}}}};
  const auto text_of = [&](int64_t id) -> std::string {
    for (const Special& sp : s.specials)
      if (sp.id == id) return sp.text;
    return "";
  };
  // A ChatML template (every shape here has <|im_start|>-style or Llama 3 headers; ChatML is
  // what the random models speak, whatever their real model's template).
  const std::string chatml =
      "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + "
      "'<|im_end|>' + '\\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";
  const std::string llama3 =
      "{{ bos_token }}{% for message in messages %}{{ '<|start_header_id|>' + message['role'] + "
      "'<|end_header_id|>\\n\\n' + message['content'] + '<|eot_id|>' }}{% endfor %}{% if add_generation_prompt %}"
      "{{ '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{% endif %}";
  const bool is_llama3 = s.vocab == 128256;
  const bool is_gemma = std::string(s.model_type) == "gemma3_text";
  ordered_json config = {{"chat_template", is_llama3  ? llama3
                                           : is_gemma ? std::string(kGemma3ChatTemplate)
                                                      : chatml},
                         {"bos_token", text_of(s.bos)},
                         {"eos_token", text_of(s.eos[0])},
                         {"add_bos_token", false},  // the templates write the BOS
                         {"model_max_length", s.max_positions}};
  std::ofstream(dir / "tokenizer.json") << tok.dump();
  std::ofstream(dir / "tokenizer_config.json") << config.dump(2);
  return Status();
}

struct Tensor {
  std::string name;
  std::vector<int64_t> shape;
  enum Kind { kMatrix, kEmbedding, kOnes, kZeros } kind;
};

std::vector<Tensor> tensors_of(const Shape& s) {
  const bool gemma = std::string(s.model_type) == "gemma3_text";
  // Gemma's norms multiply by (1 + w): w = 0 is the unit norm the other families store as 1.
  const Tensor::Kind unit_norm = gemma ? Tensor::kZeros : Tensor::kOnes;
  std::vector<Tensor> t;
  t.push_back({"model.embed_tokens.weight", {s.vocab, s.hidden}, Tensor::kEmbedding});
  const int64_t q = s.heads * s.head_dim, kv = s.kv_heads * s.head_dim;
  for (int64_t l = 0; l < s.layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    t.push_back({p + "input_layernorm.weight", {s.hidden}, unit_norm});
    t.push_back({p + "self_attn.q_proj.weight", {q, s.hidden}, Tensor::kMatrix});
    t.push_back({p + "self_attn.k_proj.weight", {kv, s.hidden}, Tensor::kMatrix});
    t.push_back({p + "self_attn.v_proj.weight", {kv, s.hidden}, Tensor::kMatrix});
    if (s.qkv_bias) {
      t.push_back({p + "self_attn.q_proj.bias", {q}, Tensor::kZeros});
      t.push_back({p + "self_attn.k_proj.bias", {kv}, Tensor::kZeros});
      t.push_back({p + "self_attn.v_proj.bias", {kv}, Tensor::kZeros});
    }
    const std::string type = s.model_type;
    if (type == "qwen3" || type == "qwen3_moe" || gemma) {
      t.push_back({p + "self_attn.q_norm.weight", {s.head_dim}, unit_norm});
      t.push_back({p + "self_attn.k_norm.weight", {s.head_dim}, unit_norm});
    }
    t.push_back({p + "self_attn.o_proj.weight", {s.hidden, q}, Tensor::kMatrix});
    t.push_back({p + "post_attention_layernorm.weight", {s.hidden}, unit_norm});
    if (gemma) t.push_back({p + "pre_feedforward_layernorm.weight", {s.hidden}, unit_norm});
    if (s.experts > 0) {
      // The Hub's layout: the router, then one gate/up/down triple an expert (Mixtral: w1 w3 w2).
      const bool mixtral = type == "mixtral";
      const std::string moe = p + (mixtral ? "block_sparse_moe." : "mlp.");
      const int64_t ei = s.expert_intermediate;
      t.push_back({moe + "gate.weight", {s.experts, s.hidden}, Tensor::kMatrix});
      for (int64_t e = 0; e < s.experts; ++e) {
        const std::string x = moe + "experts." + std::to_string(e) + ".";
        t.push_back({x + (mixtral ? "w1" : "gate_proj") + ".weight", {ei, s.hidden}, Tensor::kMatrix});
        t.push_back({x + (mixtral ? "w3" : "up_proj") + ".weight", {ei, s.hidden}, Tensor::kMatrix});
        t.push_back({x + (mixtral ? "w2" : "down_proj") + ".weight", {s.hidden, ei}, Tensor::kMatrix});
      }
    } else {
      t.push_back({p + "mlp.gate_proj.weight", {s.intermediate, s.hidden}, Tensor::kMatrix});
      t.push_back({p + "mlp.up_proj.weight", {s.intermediate, s.hidden}, Tensor::kMatrix});
      t.push_back({p + "mlp.down_proj.weight", {s.hidden, s.intermediate}, Tensor::kMatrix});
    }
    if (gemma) t.push_back({p + "post_feedforward_layernorm.weight", {s.hidden}, unit_norm});
  }
  t.push_back({"model.norm.weight", {s.hidden}, unit_norm});
  if (!s.tied) t.push_back({"lm_head.weight", {s.vocab, s.hidden}, Tensor::kMatrix});
  return t;
}

}  // namespace

int cmd_make_model(int argc, char** argv) {
  std::string shape_name, out;
  uint64_t seed = 1;
  int threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  double shard_gb = 5.0;
  CLI::App app{"Writes a random-weight bf16 model with the exact config of a real one (safetensors + tokenizer)",
               "vosti make-model"};
  std::string names;
  for (const Shape& s : make_model_shapes()) names += std::string(names.empty() ? "" : ", ") + s.name;
  app.add_option("--shape", shape_name, "the real model's config: " + names)->required();
  app.add_option("--out", out, "output directory (created; files in it replaced)")->required();
  app.add_option("--seed", seed, "weights seed")->capture_default_str();
  app.add_option("--threads", threads, "threads filling the weights")->check(CLI::PositiveNumber);
  app.add_option("--shard-gb", shard_gb, "largest shard, GB")->check(CLI::PositiveNumber)->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  const std::vector<Shape> all = make_model_shapes();
  const auto it = std::find_if(all.begin(), all.end(), [&](const Shape& s) { return shape_name == s.name; });
  if (it == all.end()) {
    std::fprintf(stderr, "vosti make-model: unknown shape \"%s\" (choose one of %s)\n", shape_name.c_str(),
                 names.c_str());
    return 2;
  }
  const Shape& s = *it;
  const auto t0 = std::chrono::steady_clock::now();
  std::error_code ec;
  std::filesystem::create_directories(out, ec);
  if (ec) {
    std::fprintf(stderr, "vosti make-model: cannot create %s: %s\n", out.c_str(), ec.message().c_str());
    return 1;
  }
  const std::filesystem::path dir(out);
  std::ofstream(dir / "config.json") << config_json(s).dump(2);
  if (Status st = write_tokenizer(s, dir); !st.ok()) {
    std::fprintf(stderr, "vosti make-model: %s\n", st.to_string().c_str());
    return 1;
  }
  // Shards of at most shard_gb, tensors in order.
  const std::vector<Tensor> tensors = tensors_of(s);
  std::vector<std::vector<const Tensor*>> shards(1);
  size_t shard_bytes = 0, total = 0;
  const auto limit = static_cast<size_t>(shard_gb * 1e9);
  for (const Tensor& t : tensors) {
    size_t n = 2;
    for (int64_t d : t.shape) n *= static_cast<size_t>(d);
    if (shard_bytes > 0 && shard_bytes + n > limit) {
      shards.emplace_back();
      shard_bytes = 0;
    }
    shards.back().push_back(&t);
    shard_bytes += n;
    total += n;
  }
  ordered_json weight_map = ordered_json::object();
  const float matrix_a = std::sqrt(3.0f) * 0.02f, embed_a = std::sqrt(3.0f) * 0.1f;
  for (size_t i = 0; i < shards.size(); ++i) {
    char file[64];
    std::snprintf(file, sizeof file, "model-%05zu-of-%05zu.safetensors", i + 1, shards.size());
    std::vector<SafetensorsEntry> entries;
    for (const Tensor* t : shards[i]) {
      weight_map[t->name] = file;
      SafetensorsEntry e;
      e.name = t->name;
      e.dtype = "BF16";
      e.shape = t->shape;
      const uint64_t key = name_key(t->name, seed);
      const Tensor::Kind kind = t->kind;
      e.fill = [=](uint8_t* dst, size_t offset, size_t bytes) {
        auto* out = reinterpret_cast<uint16_t*>(dst);
        if (kind == Tensor::kOnes) return fill_const_bf16(out, bytes / 2, 1.0f);
        if (kind == Tensor::kZeros) return fill_const_bf16(out, bytes / 2, 0.0f);
        fill_uniform_bf16(out, offset / 2, bytes / 2, key, kind == Tensor::kEmbedding ? embed_a : matrix_a);
      };
      entries.push_back(std::move(e));
    }
    if (Status st = write_safetensors((dir / file).string(), entries, threads); !st.ok()) {
      std::fprintf(stderr, "vosti make-model: %s\n", st.to_string().c_str());
      return 1;
    }
  }
  const ordered_json index = {{"metadata", {{"total_size", total}}}, {"weight_map", weight_map}};
  std::ofstream(dir / "model.safetensors.index.json") << index.dump(2);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("wrote %s: %s-shaped random bf16 model, %.2f GB in %zu shard(s), seed %llu, %.1f s\n", out.c_str(),
              s.name, static_cast<double>(total) / 1e9, shards.size(), static_cast<unsigned long long>(seed), secs);
  return 0;
}

}  // namespace vosti::tools
