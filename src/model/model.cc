// The decoder forward shared by every supported family (Llama, Qwen2, Qwen3, Gemma 3, Qwen3-MoE,
// Mixtral): one path, reading what differs from the config: qkv bias and per-head q/k RMSNorm
// (flags), the embedding scale, the attention scale and the final soft-cap (numbers), and each
// layer's window, rotary, activation, post norms and MLP kind, dense or a mixture of experts
// (ModelConfig::layers; the MoE MLP's order: model/moe_layer.h).
#include "model/model.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "core/quant_blocks.h"
#include "kernels/ref/scalar_math.h"
#include "model/matrix_rows.h"

namespace vosti {

int64_t FloatTensor::num_elements() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return shape.empty() ? 0 : n;
}

KvStorage::KvStorage(const ModelConfig& config, int64_t num_blocks, int block_size, int64_t num_window_blocks)
    : num_blocks_(num_blocks),
      num_window_blocks_(num_window_blocks),
      block_size_(block_size),
      num_kv_heads_(static_cast<int>(config.num_kv_heads)),
      head_dim_(static_cast<int>(config.head_dim)) {
  for (int64_t l = 0; l < config.num_layers; ++l) {
    const bool window = num_window_blocks > 0 && config.layers[static_cast<size_t>(l)].sliding_window > 0;
    layer_blocks_.push_back(window ? num_window_blocks : num_blocks);
    const size_t per_layer = static_cast<size_t>(layer_blocks_.back()) * static_cast<size_t>(block_size) *
                             static_cast<size_t>(num_kv_heads_) * static_cast<size_t>(head_dim_);
    for (auto* side : {&k_, &v_}) {
      auto* p = static_cast<float*>(std::calloc(std::max<size_t>(per_layer, 1), sizeof(float)));
      VOSTI_CHECK(p != nullptr, "KvStorage: out of memory");
      side->emplace_back(p);
    }
  }
}

void KvStorage::FreeDeleter::operator()(float* p) const { std::free(p); }

PagedKvView KvStorage::layer(int64_t index) {
  PagedKvView view;
  view.k = k_[static_cast<size_t>(index)].get();
  view.v = v_[static_cast<size_t>(index)].get();
  view.num_blocks = layer_blocks_[static_cast<size_t>(index)];
  view.block_size = block_size_;
  view.num_kv_heads = num_kv_heads_;
  view.head_dim = head_dim_;
  return view;
}

void attach_matrix(FloatTensor& t, std::shared_ptr<MatrixRowTables> tables, int64_t k) {
  MatrixRowTables& m = *tables;
  m.parts.clear();
  int64_t row0 = 0;
  for (size_t p = 0; p < m.part_types.size(); ++p) {
    m.parts.push_back(WeightRows{m.part_types[p], m.part_rows[p], m.rows.data() + row0});
    row0 += m.part_rows[p];
  }
  VOSTI_CHECK(row0 == static_cast<int64_t>(m.rows.size()), "attach_matrix: parts do not cover the rows");
  t.matrix = WeightMatrix{row0, k, m.parts.data(), static_cast<int>(m.parts.size())};
  if (t.owner) m.owners.push_back(t.owner);
  t.owner = std::move(tables);
}

namespace {

// Gives a 2-D tensor with f32 data and no row tables a matrix over its data.
void complete_matrix(FloatTensor& t) {
  if (t.shape.size() != 2 || t.matrix.parts != nullptr || t.data == nullptr) return;
  const int64_t n = t.shape[0], k = t.shape[1];
  auto tables = std::make_shared<MatrixRowTables>();
  for (int64_t r = 0; r < n; ++r) tables->rows.push_back(reinterpret_cast<const uint8_t*>(t.data + r * k));
  tables->part_types = {WeightType::kF32};
  tables->part_rows = {n};
  attach_matrix(t, std::move(tables), k);
}

// Bytes a tensor takes as the kernels read it.
int64_t held_bytes(const FloatTensor& t) {
  if (t.matrix.parts == nullptr) return t.num_elements() * static_cast<int64_t>(sizeof(float));
  int64_t bytes = 0;
  for (int p = 0; p < t.matrix.num_parts; ++p)
    bytes += t.matrix.parts[p].num_rows * row_bytes(t.matrix.parts[p].type, t.matrix.k);
  return bytes;
}

}  // namespace

Model::Model(std::string path, ModelConfig config, ModelWeights weights, int64_t num_copied_bytes)
    : path_(std::move(path)),
      config_(std::move(config)),
      weights_(std::move(weights)),
      num_copied_bytes_(num_copied_bytes) {
  if (config_.layers.empty()) config_.fill_uniform_layers();  // a config built by hand (tests)
  if (config_.attention_scale == 0.0f) config_.attention_scale = 1.0f / std::sqrt(static_cast<float>(config_.head_dim));
  VOSTI_CHECK(static_cast<int64_t>(config_.layers.size()) == config_.num_layers, "a layer spec per layer");
  // One rotary table and one window per distinct value, in first-layer order.
  std::vector<const LayerSpec*> rope_specs;  // [num rotaries]: the first layer of each
  for (const LayerSpec& l : config_.layers) {
    size_t rope = 0;
    while (rope < rope_specs.size() && !rope_specs[rope]->same_rope(l)) ++rope;
    if (rope == rope_specs.size()) {
      rope_specs.push_back(&l);
      inv_freqs_.push_back(config_.rope_inv_freq(l));
    }
    layer_rope_.push_back(static_cast<int>(rope));
    const auto window = static_cast<int32_t>(l.sliding_window);
    const auto w = std::find(windows_.begin(), windows_.end(), window);
    layer_window_.push_back(static_cast<int>(w - windows_.begin()));
    if (w == windows_.end()) windows_.push_back(window);
    layer_moe_.push_back(l.moe.enabled() ? static_cast<int>(num_moe_layers_++) : -1);
  }
  const bool tied =
      weights_.lm_head.data == weights_.embed.data && weights_.lm_head.matrix.parts == weights_.embed.matrix.parts;
  complete_matrix(weights_.embed);
  if (tied) {
    weights_.lm_head = weights_.embed;
  } else {
    complete_matrix(weights_.lm_head);
  }
  weight_bytes_ =
      held_bytes(weights_.embed) + held_bytes(weights_.final_norm) + (tied ? 0 : held_bytes(weights_.lm_head));
  for (LayerWeights& l : weights_.layers) {
    for (FloatTensor* t : {&l.wqkv, &l.wo, &l.w_gate_up, &l.w_down, &l.router}) complete_matrix(*t);
    for (const FloatTensor* t : {&l.attn_norm, &l.wqkv, &l.bqkv, &l.q_norm, &l.k_norm, &l.wo, &l.post_attn_norm,
                                 &l.ffn_norm, &l.w_gate_up, &l.w_down, &l.post_ffn_norm, &l.router})
      weight_bytes_ += held_bytes(*t);
    for (auto* experts : {&l.expert_gate_up, &l.expert_down}) {
      for (FloatTensor& t : *experts) {
        complete_matrix(t);
        weight_bytes_ += held_bytes(t);
      }
    }
  }
}

void Model::embed_row(int32_t id, float* x) const {
  const WeightMatrix& e = weights_.embed.matrix;
  int64_t row = id;
  for (int p = 0; p < e.num_parts; ++p) {
    if (row < e.parts[p].num_rows) {
      decode_values(e.parts[p].type, e.parts[p].rows[row], e.k, x);
      if (const float scale = config_.embed_scale; scale != 1.0f)
        for (int64_t i = 0; i < e.k; ++i) x[i] = x[i] * scale;
      return;
    }
    row -= e.parts[p].num_rows;
  }
  VOSTI_CHECK(false, "embedding row outside the table");
}

namespace {

// Copies columns [col, col + width) of src [m, stride] into dst [m, width].
void copy_columns(const float* src, int64_t m, int64_t stride, int64_t col, int64_t width, float* dst) {
  for (int64_t r = 0; r < m; ++r)
    std::memcpy(dst + r * width, src + r * stride + col, static_cast<size_t>(width) * sizeof(float));
}

}  // namespace

void Model::forward(const ForwardBatch& batch, KvStorage& kv, KernelBackend& kernels, float* logits,
                    ForwardScratch& scratch) const {
  const ModelConfig& c = config_;
  const int64_t T = batch.num_tokens();
  const int64_t H = c.hidden_size, hd = c.head_dim, nh = c.num_heads, nkv = c.num_kv_heads;
  const int64_t I = c.intermediate_size, qkv_width = (nh + 2 * nkv) * hd;
  VOSTI_CHECK(batch.positions.size() == static_cast<size_t>(T) && batch.slots.size() == static_cast<size_t>(T) &&
                  batch.row_seq.size() == static_cast<size_t>(T),
              "ForwardBatch arrays disagree in length");
  if (T == 0) return;

  auto sized = [](std::vector<float>& buf, int64_t n) -> std::vector<float>& {
    buf.resize(static_cast<size_t>(n));
    return buf;
  };
  std::vector<float>& x = sized(scratch.x, T * H);  // [T, H] residual stream
  sized(scratch.h, T * H);                          // [T, H] normed input
  sized(scratch.qkv, T * qkv_width);                // [T, (nh + 2 nkv) hd]
  sized(scratch.q, T * nh * hd);                    // [T, nh, hd]
  sized(scratch.k, T * nkv * hd);                   // [T, nkv, hd]
  sized(scratch.v, T * nkv * hd);                   // [T, nkv, hd]
  sized(scratch.attn, T * nh * hd);                 // [T, nh, hd]
  sized(scratch.proj, T * H);                       // [T, H]
  sized(scratch.gate_up, T * 2 * I);                // [T, 2I]
  sized(scratch.act, T * I);                        // [T, I]
  const int half = static_cast<int>(hd / 2);
  const auto num_ropes = static_cast<int64_t>(inv_freqs_.size());
  std::vector<float>& rope_cos = sized(scratch.rope_cos, num_ropes * T * half);  // [num_ropes, T, hd / 2]
  std::vector<float>& rope_sin = sized(scratch.rope_sin, num_ropes * T * half);  // [num_ropes, T, hd / 2]

  for (int64_t t = 0; t < T; ++t) {
    const int32_t id = batch.token_ids[static_cast<size_t>(t)];
    VOSTI_CHECK(id >= 0 && id < c.vocab_size, "token id out of range reached the forward");
    embed_row(id, &x[static_cast<size_t>(t * H)]);
  }
  std::vector<AttentionQuery>& queries = scratch.queries;  // [num windows, T]
  queries.resize(windows_.size() * static_cast<size_t>(T));
  for (int64_t t = 0; t < T; ++t) {
    const auto ts = static_cast<size_t>(t);
    const auto seq = static_cast<size_t>(batch.row_seq[ts]);
    for (size_t w = 0; w < windows_.size(); ++w) {
      // A window layer reads its own table under window-local KV; every other layer the full one.
      const bool local = windows_[w] > 0 && !batch.window_block_tables.empty();
      const std::span<const int32_t> tables = local ? batch.window_block_tables : batch.block_tables;
      const size_t table =
          seq * static_cast<size_t>(local ? batch.window_block_table_stride : batch.block_table_stride);
      VOSTI_CHECK(table < tables.size(), "a row's sequence has no block table");
      queries[w * static_cast<size_t>(T) + ts] = {tables.data() + table, batch.positions[ts],
                                                  attention_window_first(batch.positions[ts], windows_[w])};
    }
    // The rotary angles of each token, once per step and rotary kind (the layers share them).
    for (int64_t r = 0; r < num_ropes; ++r)
      rope_cos_sin(batch.positions[ts], inv_freqs_[static_cast<size_t>(r)].data(), half,
                   rope_cos.data() + (r * T + t) * half, rope_sin.data() + (r * T + t) * half);
  }
  scratch.moe.routed.resize(static_cast<size_t>(T * num_moe_layers_ * c.moe().top_k));  // [T, moe layers, k]
  for (int64_t li = 0; li < c.num_layers; ++li) forward_layer(li, batch, kv, kernels, scratch);

  final_logits(batch.logit_rows, x, kernels, logits, scratch);
}

void Model::forward_layer(int64_t li, const ForwardBatch& batch, KvStorage& kv, KernelBackend& kernels,
                          ForwardScratch& scratch) const {
  const ModelConfig& c = config_;
  const LayerSpec& spec = c.layers[static_cast<size_t>(li)];
  const LayerWeights& L = weights_.layers[static_cast<size_t>(li)];
  const int64_t T = batch.num_tokens();
  const int64_t H = c.hidden_size, hd = c.head_dim, nh = c.num_heads, nkv = c.num_kv_heads;
  const int64_t I = c.intermediate_size, qkv_width = (nh + 2 * nkv) * hd, half = hd / 2;
  const float eps = static_cast<float>(c.rms_norm_eps);
  std::vector<float>& x = scratch.x;  // [T, H]
  float* h = scratch.h.data();        // [T, H]
  float* q = scratch.q.data();        // [T, nh, hd]
  float* k = scratch.k.data();        // [T, nkv, hd]
  float* proj = scratch.proj.data();  // [T, H]
  const size_t rope = static_cast<size_t>(layer_rope_[static_cast<size_t>(li)]) * static_cast<size_t>(T * half);
  const float* cos = scratch.rope_cos.data() + rope;  // [T, hd / 2]
  const float* sin = scratch.rope_sin.data() + rope;  // [T, hd / 2]
  const AttentionQuery* queries =
      scratch.queries.data() + static_cast<size_t>(layer_window_[static_cast<size_t>(li)]) * static_cast<size_t>(T);

  kernels.rms_norm(x.data(), T, H, L.attn_norm.data, eps, h);
  kernels.matmul(h, T, L.wqkv.matrix, L.bqkv.data, scratch.qkv.data());
  copy_columns(scratch.qkv.data(), T, qkv_width, 0, nh * hd, q);
  copy_columns(scratch.qkv.data(), T, qkv_width, nh * hd, nkv * hd, k);
  copy_columns(scratch.qkv.data(), T, qkv_width, (nh + nkv) * hd, nkv * hd, scratch.v.data());
  if (c.qk_norm) {
    kernels.rms_norm(q, T * nh, hd, L.q_norm.data, eps, q);
    kernels.rms_norm(k, T * nkv, hd, L.k_norm.data, eps, k);
  }
  kernels.rope(q, T, static_cast<int>(nh), static_cast<int>(hd), cos, sin, c.rope_layout);
  kernels.rope(k, T, static_cast<int>(nkv), static_cast<int>(hd), cos, sin, c.rope_layout);
  PagedKvView layer_kv = kv.layer(li);
  // Rule 4: write this step's K/V first, then every query reads through the cache.
  const bool local = spec.sliding_window > 0 && !batch.window_slots.empty();
  kernels.kv_write(k, scratch.v.data(), T, (local ? batch.window_slots : batch.slots).data(), layer_kv);
  kernels.attention(q, T, static_cast<int>(nh), queries, layer_kv, c.attention_scale, scratch.attn.data());
  kernels.matmul(scratch.attn.data(), T, L.wo.matrix, nullptr, proj);
  if (spec.post_attn_norm) kernels.rms_norm(proj, T, H, L.post_attn_norm.data, eps, proj);
  for (size_t i = 0; i < x.size(); ++i) x[i] += proj[i];
  kernels.rms_norm(x.data(), T, H, L.ffn_norm.data, eps, h);
  if (spec.moe.enabled()) {
    moe_mlp(spec.moe, spec.activation, L, h, T, H, kernels, scratch.moe, proj);
    const int64_t k = spec.moe.top_k, ordinal = layer_moe_[static_cast<size_t>(li)];
    for (int64_t t = 0; t < T; ++t)
      std::copy_n(scratch.moe.experts.begin() + t * k, k,
                  scratch.moe.routed.begin() + (t * num_moe_layers_ + ordinal) * k);
  } else {
    kernels.matmul(h, T, L.w_gate_up.matrix, nullptr, scratch.gate_up.data());
    switch (spec.activation) {
      case MlpActivation::kSilu:
        kernels.silu_mul(scratch.gate_up.data(), T, I, scratch.act.data());
        break;
      case MlpActivation::kGeluTanh:
        kernels.gelu_tanh_mul(scratch.gate_up.data(), T, I, scratch.act.data());
        break;
    }
    kernels.matmul(scratch.act.data(), T, L.w_down.matrix, nullptr, proj);
  }
  if (spec.post_ffn_norm) kernels.rms_norm(proj, T, H, L.post_ffn_norm.data, eps, proj);
  for (size_t i = 0; i < x.size(); ++i) x[i] += proj[i];
}

void Model::final_logits(std::span<const int32_t> logit_rows, const std::vector<float>& x, KernelBackend& kernels,
                         float* logits, ForwardScratch& scratch) const {
  const int64_t H = config_.hidden_size, T = static_cast<int64_t>(x.size()) / H;
  const auto R = static_cast<int64_t>(logit_rows.size());
  if (R == 0) return;
  std::vector<float>& rows = scratch.rows;  // [R, H]
  rows.resize(static_cast<size_t>(R * H));
  for (int64_t r = 0; r < R; ++r) {
    const int64_t t = logit_rows[static_cast<size_t>(r)];
    VOSTI_CHECK(t >= 0 && t < T, "logit row out of range");
    std::memcpy(&rows[static_cast<size_t>(r * H)], &x[static_cast<size_t>(t * H)],
                static_cast<size_t>(H) * sizeof(float));
  }
  kernels.rms_norm(rows.data(), R, H, weights_.final_norm.data, static_cast<float>(config_.rms_norm_eps), rows.data());
  kernels.matmul(rows.data(), R, weights_.lm_head.matrix, nullptr, logits);
  if (config_.final_logit_softcap > 0) {
    // transformers: logits / cap, tanh, * cap, each in f32 (tanh by scalar_math.h's tanh_f32).
    const auto cap = static_cast<float>(config_.final_logit_softcap);
    for (int64_t i = 0; i < R * config_.vocab_size; ++i) logits[i] = tanh_f32(logits[i] / cap) * cap;
  }
}

}  // namespace vosti
