// The decoder forward shared by every supported family (Llama, Qwen2, Qwen3):
// config flags select qkv bias and per-head q/k RMSNorm.
#include "model/model.h"

#include <cmath>
#include <cstring>

namespace vosti {

int64_t FloatTensor::num_elements() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return shape.empty() ? 0 : n;
}

KvStorage::KvStorage(const ModelConfig& config, int64_t num_blocks, int block_size)
    : num_blocks_(num_blocks),
      block_size_(block_size),
      num_kv_heads_(static_cast<int>(config.num_kv_heads)),
      head_dim_(static_cast<int>(config.head_dim)) {
  const size_t per_layer = static_cast<size_t>(num_blocks) * static_cast<size_t>(block_size) *
                           static_cast<size_t>(num_kv_heads_) * static_cast<size_t>(head_dim_);
  k_.assign(static_cast<size_t>(config.num_layers), std::vector<float>(per_layer, 0.0f));
  v_.assign(static_cast<size_t>(config.num_layers), std::vector<float>(per_layer, 0.0f));
}

PagedKvView KvStorage::layer(int64_t index) {
  PagedKvView view;
  view.k = k_[static_cast<size_t>(index)].data();
  view.v = v_[static_cast<size_t>(index)].data();
  view.num_blocks = num_blocks_;
  view.block_size = block_size_;
  view.num_kv_heads = num_kv_heads_;
  view.head_dim = head_dim_;
  return view;
}

Model::Model(std::string path, ModelConfig config, ModelWeights weights, int64_t num_copied_bytes)
    : path_(std::move(path)),
      config_(std::move(config)),
      weights_(std::move(weights)),
      inv_freq_(config_.rope_inv_freq()),
      num_copied_bytes_(num_copied_bytes) {}

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
  VOSTI_CHECK(batch.positions.size() == static_cast<size_t>(T) && batch.slot_mapping.size() == static_cast<size_t>(T) &&
                  batch.block_tables.size() == static_cast<size_t>(T),
              "ForwardBatch arrays disagree in length");
  if (T == 0) return;

  auto sized = [](std::vector<float>& buf, int64_t n) -> std::vector<float>& {
    buf.resize(static_cast<size_t>(n));
    return buf;
  };
  std::vector<float>& x = sized(scratch.x, T * H);                  // [T, H] residual stream
  std::vector<float>& h = sized(scratch.h, T * H);                  // [T, H] normed input
  std::vector<float>& qkv = sized(scratch.qkv, T * qkv_width);      // [T, (nh + 2 nkv) hd]
  std::vector<float>& q = sized(scratch.q, T * nh * hd);            // [T, nh, hd]
  std::vector<float>& k = sized(scratch.k, T * nkv * hd);           // [T, nkv, hd]
  std::vector<float>& v = sized(scratch.v, T * nkv * hd);           // [T, nkv, hd]
  std::vector<float>& attn = sized(scratch.attn, T * nh * hd);      // [T, nh, hd]
  std::vector<float>& proj = sized(scratch.proj, T * H);            // [T, H]
  std::vector<float>& gate_up = sized(scratch.gate_up, T * 2 * I);  // [T, 2I]
  std::vector<float>& act = sized(scratch.act, T * I);              // [T, I]

  for (int64_t t = 0; t < T; ++t) {
    const int32_t id = batch.token_ids[static_cast<size_t>(t)];
    VOSTI_CHECK(id >= 0 && id < c.vocab_size, "token id out of range reached the forward");
    std::memcpy(&x[static_cast<size_t>(t * H)], weights_.embed.data + id * H, static_cast<size_t>(H) * sizeof(float));
  }
  std::vector<AttentionQuery> queries(static_cast<size_t>(T));  // [T]
  for (int64_t t = 0; t < T; ++t)
    queries[static_cast<size_t>(t)] = {batch.block_tables[static_cast<size_t>(t)],
                                       batch.positions[static_cast<size_t>(t)]};
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  const float eps = static_cast<float>(c.rms_norm_eps);

  for (int64_t li = 0; li < c.num_layers; ++li) {
    const LayerWeights& L = weights_.layers[static_cast<size_t>(li)];
    kernels.rms_norm(x.data(), T, H, L.attn_norm.data, eps, h.data());
    kernels.matmul(h.data(), T, H, L.wqkv.data, qkv_width, L.bqkv.data, qkv.data());
    copy_columns(qkv.data(), T, qkv_width, 0, nh * hd, q.data());
    copy_columns(qkv.data(), T, qkv_width, nh * hd, nkv * hd, k.data());
    copy_columns(qkv.data(), T, qkv_width, (nh + nkv) * hd, nkv * hd, v.data());
    if (c.qk_norm) {
      kernels.rms_norm(q.data(), T * nh, hd, L.q_norm.data, eps, q.data());
      kernels.rms_norm(k.data(), T * nkv, hd, L.k_norm.data, eps, k.data());
    }
    kernels.rope(q.data(), T, static_cast<int>(nh), static_cast<int>(hd), batch.positions.data(), inv_freq_.data(),
                 c.rope_layout);
    kernels.rope(k.data(), T, static_cast<int>(nkv), static_cast<int>(hd), batch.positions.data(), inv_freq_.data(),
                 c.rope_layout);
    PagedKvView layer_kv = kv.layer(li);
    // Rule 4: write this step's K/V first, then every query reads through the cache.
    kernels.kv_write(k.data(), v.data(), T, batch.slot_mapping.data(), layer_kv);
    kernels.attention(q.data(), T, static_cast<int>(nh), queries.data(), layer_kv, scale, attn.data());
    kernels.matmul(attn.data(), T, nh * hd, L.wo.data, H, nullptr, proj.data());
    for (size_t i = 0; i < x.size(); ++i) x[i] += proj[i];
    kernels.rms_norm(x.data(), T, H, L.ffn_norm.data, eps, h.data());
    kernels.matmul(h.data(), T, H, L.w_gate_up.data, 2 * I, nullptr, gate_up.data());
    kernels.silu_mul(gate_up.data(), T, I, act.data());
    kernels.matmul(act.data(), T, I, L.w_down.data, H, nullptr, proj.data());
    for (size_t i = 0; i < x.size(); ++i) x[i] += proj[i];
  }

  const int64_t R = static_cast<int64_t>(batch.logit_rows.size());
  if (R == 0) return;
  std::vector<float>& rows = sized(scratch.rows, R * H);  // [R, H]
  for (int64_t r = 0; r < R; ++r) {
    const int64_t t = batch.logit_rows[static_cast<size_t>(r)];
    VOSTI_CHECK(t >= 0 && t < T, "logit row out of range");
    std::memcpy(&rows[static_cast<size_t>(r * H)], &x[static_cast<size_t>(t * H)],
                static_cast<size_t>(H) * sizeof(float));
  }
  kernels.rms_norm(rows.data(), R, H, weights_.final_norm.data, eps, rows.data());
  kernels.matmul(rows.data(), R, H, weights_.lm_head.data, c.vocab_size, nullptr, logits);
}

}  // namespace vosti
