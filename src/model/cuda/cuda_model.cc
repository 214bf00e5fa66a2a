// CudaModel: weights -> padded bf16 matrices and f32 vectors on the device (one GEMM schedule
// per weight shape), and the batched forward; the op order is in cuda_model.h.
#include "model/cuda/cuda_model.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <string>

#include "core/dtype.h"
#include "kernels/cuda/cuda_status.h"
#include "kernels/cuda/rows/row_kernels.h"
#include "model/cuda/cuda_model_source.h"

namespace vosti {

namespace {

int64_t round_up(int64_t v, int64_t multiple) { return (v + multiple - 1) / multiple * multiple; }

// Copies src [rows, cols] (bf16) into dst [.., dst_cols] from row dst_row0.
void put_rows(const uint16_t* src, int64_t rows, int64_t cols, std::vector<uint16_t>& dst, int64_t dst_row0,
              int64_t dst_cols) {
  for (int64_t r = 0; r < rows; ++r)
    std::memcpy(dst.data() + static_cast<size_t>((dst_row0 + r) * dst_cols), src + r * cols,
                static_cast<size_t>(cols) * sizeof(uint16_t));
}

// A zero [rows, cols] bf16 matrix.
std::vector<uint16_t> zero_bf16(int64_t rows, int64_t cols) {
  return std::vector<uint16_t>(static_cast<size_t>(rows * cols), 0);
}

std::vector<uint16_t> to_bf16(const float* src, int64_t n) {
  std::vector<uint16_t> out(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) out[static_cast<size_t>(i)] = f32_to_bf16(src[i]);
  return out;
}

// Rows [row0, row0 + rows) of a [*, cols] f32 tensor.
std::vector<float> slice_rows(const FloatTensor& t, int64_t row0, int64_t rows, int64_t cols) {
  return std::vector<float>(t.data + row0 * cols, t.data + (row0 + rows) * cols);
}

}  // namespace

Status check_cuda_supported(const ModelConfig& c) {
  if (c.has_moe()) {
    const MoeSpec m = c.moe();
    for (const LayerSpec& l : c.layers)
      if (l.moe.enabled() && !(l.moe == m))
        return unimplemented("CUDA backend: MoE layers with different expert specs (" + c.name + ")");
    if (m.num_experts > kMaxMoeExperts || m.top_k < 1 || m.top_k > kMaxMoeTopK || m.top_k > m.num_experts)
      return unimplemented("CUDA backend: " + std::to_string(m.num_experts) + " experts, top_k " +
                           std::to_string(m.top_k) + "; the MoE kernels take at most " +
                           std::to_string(kMaxMoeExperts) + " experts and top_k <= " + std::to_string(kMaxMoeTopK));
  }
  std::vector<int64_t> windows;
  for (const LayerSpec& l : c.layers) {
    if (std::find(windows.begin(), windows.end(), l.sliding_window) == windows.end())
      windows.push_back(l.sliding_window);
    if (l.sliding_window > 0x7fffffff)
      return unimplemented("CUDA backend: sliding window " + std::to_string(l.sliding_window) + " beyond 2^31");
  }
  if (windows.size() > static_cast<size_t>(kMaxAttentionWindows)) {
    return unimplemented("CUDA backend: " + std::to_string(windows.size()) + " distinct sliding windows; at most " +
                         std::to_string(kMaxAttentionWindows));
  }
  if (c.hidden_size % 64 != 0) {
    return unimplemented("CUDA backend: hidden_size " + std::to_string(c.hidden_size) +
                         " is not a multiple of 64 (the GEMM's k block)");
  }
  if (c.head_dim % 4 != 0 || c.head_dim > kMaxCudaHeadDim) {
    return unimplemented("CUDA backend: head_dim " + std::to_string(c.head_dim) +
                         " must be a multiple of 4 and at most " + std::to_string(kMaxCudaHeadDim));
  }
  if (c.max_position_embeddings > 0x7fffffff || c.vocab_size > 0x7fffffff) {
    return unimplemented("CUDA backend: vocabulary or context beyond 2^31");
  }
  return Status();
}

Result<std::shared_ptr<const CudaModel>> CudaModel::load(const ModelFile& file) {
  Source s;
  s.config = file.config();
  s.path = file.path();
  s.tied = file.config().tie_word_embeddings && !file.has(WeightRole::kLmHead);
  const ModelFile* f = &file;
  s.bf16 = [f](WeightRole role, int64_t layer, int64_t expert) { return f->read_bf16(role, layer, expert); };
  s.f32 = [f](WeightRole role, int64_t layer, int64_t expert) { return f->read_f32(role, layer, expert); };
  return build(s);
}

Result<std::shared_ptr<const CudaModel>> CudaModel::upload(const Model& model) {
  Source s;
  s.config = model.config();
  s.path = model.path();
  const ModelWeights& W = model.weights();
  s.tied = W.lm_head.data == W.embed.data;
  const ModelConfig& c = s.config;
  const int64_t H = c.hidden_size, q = c.num_heads * c.head_dim, kv = c.num_kv_heads * c.head_dim;
  const int64_t I = c.intermediate_size;
  const Model* m = &model;
  // The loaded f32 tensor of a role (the stacked ones sliced back), HF row order.
  auto f32 = [m, H, q, kv, I](WeightRole role, int64_t layer, int64_t expert) -> Result<std::vector<float>> {
    const ModelWeights& w = m->weights();
    const auto whole = [](const FloatTensor& t) { return std::vector<float>(t.data, t.data + t.num_elements()); };
    if (role == WeightRole::kEmbed) return whole(w.embed);
    if (role == WeightRole::kLmHead) return whole(w.lm_head);
    if (role == WeightRole::kFinalNorm) return whole(w.final_norm);
    const LayerWeights& L = w.layers[static_cast<size_t>(layer)];
    switch (role) {
      case WeightRole::kAttnNorm:
        return whole(L.attn_norm);
      case WeightRole::kFfnNorm:
        return whole(L.ffn_norm);
      case WeightRole::kPostAttnNorm:
        return whole(L.post_attn_norm);
      case WeightRole::kPostFfnNorm:
        return whole(L.post_ffn_norm);
      case WeightRole::kQNorm:
        return whole(L.q_norm);
      case WeightRole::kKNorm:
        return whole(L.k_norm);
      case WeightRole::kO:
        return whole(L.wo);
      case WeightRole::kDown:
        return whole(L.w_down);
      case WeightRole::kQ:
        return slice_rows(L.wqkv, 0, q, H);
      case WeightRole::kK:
        return slice_rows(L.wqkv, q, kv, H);
      case WeightRole::kV:
        return slice_rows(L.wqkv, q + kv, kv, H);
      case WeightRole::kQBias:
        return slice_rows(L.bqkv, 0, q, 1);
      case WeightRole::kKBias:
        return slice_rows(L.bqkv, q, kv, 1);
      case WeightRole::kVBias:
        return slice_rows(L.bqkv, q + kv, kv, 1);
      case WeightRole::kGate:
        return slice_rows(L.w_gate_up, 0, I, H);
      case WeightRole::kUp:
        return slice_rows(L.w_gate_up, I, I, H);
      case WeightRole::kRouter:
        return whole(L.router);
      case WeightRole::kExpertGate:
      case WeightRole::kExpertUp: {
        const FloatTensor& t = L.expert_gate_up[static_cast<size_t>(expert)];  // [2 * Ie, H]
        const int64_t Ie = t.shape[0] / 2;
        return slice_rows(t, role == WeightRole::kExpertGate ? 0 : Ie, Ie, H);
      }
      case WeightRole::kExpertDown:
        return whole(L.expert_down[static_cast<size_t>(expert)]);
      default:
        return invalid_argument("CudaModel::upload: no such weight role");
    }
  };
  s.f32 = f32;
  s.bf16 = [f32](WeightRole role, int64_t layer, int64_t expert) -> Result<std::vector<uint16_t>> {
    VOSTI_ASSIGN_OR_RETURN(std::vector<float> v, f32(role, layer, expert));
    return to_bf16(v.data(), static_cast<int64_t>(v.size()));
  };
  return build(s);
}

Result<std::shared_ptr<const CudaModel>> CudaModel::build(const Source& source) {
  ModelConfig config = source.config;
  if (config.layers.empty()) config.fill_uniform_layers();  // a config built by hand (tests)
  if (config.attention_scale == 0.0f) config.attention_scale = 1.0f / std::sqrt(static_cast<float>(config.head_dim));
  VOSTI_ASSIGN_OR_RETURN(CudaDevice device, read_cuda_device());
  VOSTI_RETURN_IF_ERROR(check_cuda_supported(config));
  std::shared_ptr<CudaModel> m(new CudaModel());
  VOSTI_ASSIGN_OR_RETURN(m->attention_kernels_, prepare_attention_kernels(device, static_cast<int>(config.head_dim)));
  m->device_ = std::move(device);
  m->config_ = std::move(config);
  m->path_ = source.path;
  VOSTI_RETURN_IF_ERROR(m->upload_weights(source));
  // A pageable cudaMemcpy may return before its DMA lands; runners use their own
  // non-blocking streams, so the weights must be complete before the model is handed out.
  VOSTI_CUDA_RETURN_IF_ERROR(cudaDeviceSynchronize());
  return std::shared_ptr<const CudaModel>(std::move(m));
}

Result<DeviceMemory> CudaModel::upload_f32(const float* data, size_t count, const std::string& what) {
  VOSTI_ASSIGN_OR_RETURN(DeviceMemory d, DeviceMemory::upload(data, count * sizeof(float), what));
  num_weight_bytes_ += d.bytes();
  return d;
}

Result<CudaGemmWeight> CudaModel::upload_gemm(const std::vector<uint16_t>& w, const float* bias, int64_t n_rows,
                                              int64_t k_cols, const std::string& what) {
  CudaGemmWeight g;
  VOSTI_ASSIGN_OR_RETURN(g.schedule,
                         select_schedule(n_rows, k_cols, select_instruction(n_rows, k_cols, device_.has_wgmma)));
  VOSTI_ASSIGN_OR_RETURN(g.w, DeviceMemory::upload(w.data(), w.size() * sizeof(uint16_t), what));
  num_weight_bytes_ += g.w.bytes();
  if (bias != nullptr) {
    VOSTI_ASSIGN_OR_RETURN(g.bias, upload_f32(bias, static_cast<size_t>(n_rows), what + " bias"));
  }
  return g;
}

// Layer li's weights: norms, then q/k/v stacked (+ bias), o, gate/up, down, each zero-padded to
// the GEMM's shapes (the header's padding) and uploaded with its schedule.
Status CudaModel::upload_layer(const Source& src, int64_t li) {
  const ModelConfig& c = config_;
  const int64_t H = c.hidden_size, hd = c.head_dim, nh = c.num_heads, nkv = c.num_kv_heads;
  const int64_t I = c.intermediate_size;
  auto vec_f32 = [&](WeightRole role, int64_t layer, const std::string& what) -> Result<DeviceMemory> {
    VOSTI_ASSIGN_OR_RETURN(std::vector<float> v, src.f32(role, layer, -1));
    return upload_f32(v.data(), v.size(), what);
  };
  CudaLayerWeights& D = layers_[static_cast<size_t>(li)];
  const std::string name = "layer " + std::to_string(li) + " ";
  VOSTI_ASSIGN_OR_RETURN(D.attn_norm, vec_f32(WeightRole::kAttnNorm, li, name + "attn_norm"));
  VOSTI_ASSIGN_OR_RETURN(D.ffn_norm, vec_f32(WeightRole::kFfnNorm, li, name + "ffn_norm"));
  const LayerSpec& spec = c.layers[static_cast<size_t>(li)];
  if (spec.post_attn_norm) {
    VOSTI_ASSIGN_OR_RETURN(D.post_attn_norm, vec_f32(WeightRole::kPostAttnNorm, li, name + "post_attn_norm"));
  }
  if (spec.post_ffn_norm) {
    VOSTI_ASSIGN_OR_RETURN(D.post_ffn_norm, vec_f32(WeightRole::kPostFfnNorm, li, name + "post_ffn_norm"));
  }
  if (c.qk_norm) {
    VOSTI_ASSIGN_OR_RETURN(D.q_norm, vec_f32(WeightRole::kQNorm, li, name + "q_norm"));
    VOSTI_ASSIGN_OR_RETURN(D.k_norm, vec_f32(WeightRole::kKNorm, li, name + "k_norm"));
  }

  std::vector<uint16_t> wqkv = zero_bf16(dims_.qkv_rows, H);  // [qkv_rows, H]
  int64_t row = 0;
  for (const auto& [role, rows] :
       {std::pair{WeightRole::kQ, nh * hd}, std::pair{WeightRole::kK, nkv * hd}, std::pair{WeightRole::kV, nkv * hd}}) {
    VOSTI_ASSIGN_OR_RETURN(std::vector<uint16_t> part, src.bf16(role, li, -1));
    put_rows(part.data(), rows, H, wqkv, row, H);
    row += rows;
  }
  std::vector<float> bqkv;  // [qkv_rows]
  if (c.qkv_bias) {
    bqkv.assign(static_cast<size_t>(dims_.qkv_rows), 0.0f);
    size_t at = 0;
    for (WeightRole role : {WeightRole::kQBias, WeightRole::kKBias, WeightRole::kVBias}) {
      VOSTI_ASSIGN_OR_RETURN(std::vector<float> part, src.f32(role, li, -1));
      std::memcpy(bqkv.data() + at, part.data(), part.size() * sizeof(float));
      at += part.size();
    }
  }
  VOSTI_ASSIGN_OR_RETURN(D.qkv,
                         upload_gemm(wqkv, bqkv.empty() ? nullptr : bqkv.data(), dims_.qkv_rows, H, name + "wqkv"));
  wqkv = {};

  std::vector<uint16_t> wo = zero_bf16(H, dims_.attn_width);  // [H, attn_width]
  {
    VOSTI_ASSIGN_OR_RETURN(std::vector<uint16_t> o, src.bf16(WeightRole::kO, li, -1));
    for (int64_t r = 0; r < H; ++r) put_rows(o.data() + r * nh * hd, 1, nh * hd, wo, r, dims_.attn_width);
  }
  VOSTI_ASSIGN_OR_RETURN(D.o, upload_gemm(wo, nullptr, H, dims_.attn_width, name + "wo"));
  wo = {};
  if (spec.moe.enabled()) return upload_moe_layer(src, li);

  std::vector<uint16_t> wgu = zero_bf16(2 * dims_.ffn_width, H);  // [2 * ffn_width, H]
  {
    VOSTI_ASSIGN_OR_RETURN(std::vector<uint16_t> gate, src.bf16(WeightRole::kGate, li, -1));
    put_rows(gate.data(), I, H, wgu, 0, H);
  }
  {
    VOSTI_ASSIGN_OR_RETURN(std::vector<uint16_t> up, src.bf16(WeightRole::kUp, li, -1));
    put_rows(up.data(), I, H, wgu, dims_.ffn_width, H);
  }
  VOSTI_ASSIGN_OR_RETURN(D.gate_up, upload_gemm(wgu, nullptr, 2 * dims_.ffn_width, H, name + "w_gate_up"));
  wgu = {};

  std::vector<uint16_t> wd = zero_bf16(H, dims_.ffn_width);  // [H, ffn_width]
  {
    VOSTI_ASSIGN_OR_RETURN(std::vector<uint16_t> down, src.bf16(WeightRole::kDown, li, -1));
    for (int64_t r = 0; r < H; ++r) put_rows(down.data() + r * I, 1, I, wd, r, dims_.ffn_width);
  }
  VOSTI_ASSIGN_OR_RETURN(D.down, upload_gemm(wd, nullptr, H, dims_.ffn_width, name + "w_down"));
  return Status();
}

Status CudaModel::upload_weights(const Source& src) {
  const ModelConfig& c = config_;
  const int64_t H = c.hidden_size, hd = c.head_dim, nh = c.num_heads, nkv = c.num_kv_heads;
  dims_.qkv_rows = round_up((nh + 2 * nkv) * hd, 8);
  dims_.attn_width = round_up(nh * hd, 64);
  dims_.ffn_width = round_up(c.intermediate_size, 64);
  dims_.vocab_rows = round_up(c.vocab_size, 8);
  if (c.has_moe()) {
    dims_.moe_width = round_up(c.moe().intermediate_size, 64);
    dims_.router_rows = round_up(c.moe().num_experts, 8);
  }
  for (const LayerSpec& l : c.layers) layer_moe_.push_back(l.moe.enabled() ? static_cast<int>(num_moe_layers_++) : -1);
  layers_.resize(static_cast<size_t>(c.num_layers));
  for (int64_t li = 0; li < c.num_layers; ++li) VOSTI_RETURN_IF_ERROR(upload_layer(src, li));

  {
    std::vector<uint16_t> head = zero_bf16(dims_.vocab_rows, H);  // [vocab_rows, H]
    VOSTI_ASSIGN_OR_RETURN(std::vector<uint16_t> rows,
                           src.bf16(src.tied ? WeightRole::kEmbed : WeightRole::kLmHead, -1, -1));
    put_rows(rows.data(), c.vocab_size, H, head, 0, H);
    VOSTI_ASSIGN_OR_RETURN(lm_head_, upload_gemm(head, nullptr, dims_.vocab_rows, H, "lm_head"));
  }
  if (src.tied) {
    embed_ = lm_head_.w.as<uint16_t>();  // tied: the embedding is lm_head's first vocab rows
  } else {
    VOSTI_ASSIGN_OR_RETURN(std::vector<uint16_t> embed, src.bf16(WeightRole::kEmbed, -1, -1));  // [vocab, H]
    VOSTI_ASSIGN_OR_RETURN(embed_own_,
                           DeviceMemory::upload(embed.data(), embed.size() * sizeof(uint16_t), "embedding"));
    num_weight_bytes_ += embed_own_.bytes();
    embed_ = embed_own_.as<uint16_t>();
  }
  {
    VOSTI_ASSIGN_OR_RETURN(std::vector<float> norm, src.f32(WeightRole::kFinalNorm, -1, -1));
    VOSTI_ASSIGN_OR_RETURN(final_norm_, upload_f32(norm.data(), norm.size(), "final_norm"));
  }
  return upload_rotaries();
}

// One rotary table per distinct LayerSpec rotary and one plan slot per distinct window, in
// first-layer order (as Model does on the CPU).
Status CudaModel::upload_rotaries() {
  const ModelConfig& c = config_;
  std::vector<const LayerSpec*> ropes;  // the first layer of each rotary
  for (const LayerSpec& l : c.layers) {
    size_t r = 0;
    while (r < ropes.size() && !ropes[r]->same_rope(l)) ++r;
    if (r == ropes.size()) {
      ropes.push_back(&l);
      const std::vector<float> inv_freq = c.rope_inv_freq(l);  // [head_dim / 2]
      VOSTI_ASSIGN_OR_RETURN(DeviceMemory d, upload_f32(inv_freq.data(), inv_freq.size(), "rope inv_freq"));
      inv_freqs_.push_back(std::move(d));
    }
    layer_rope_.push_back(static_cast<int>(r));
    const auto window = static_cast<int>(l.sliding_window);
    const auto w = std::find(windows_.begin(), windows_.end(), window);
    layer_window_.push_back(static_cast<int>(w - windows_.begin()));
    if (w == windows_.end()) windows_.push_back(window);
  }
  return Status();
}

size_t CudaModel::gemm_workspace_bytes(int64_t max_m) const {
  const int sms = device_.num_sms;
  size_t bytes = vosti::gemm_workspace_bytes(lm_head_.schedule, max_m, sms);
  for (const CudaLayerWeights& L : layers_) {
    for (const CudaGemmWeight* g : {&L.qkv, &L.o, &L.gate_up, &L.down, &L.moe.router}) {
      if (!g->w.empty()) bytes = std::max(bytes, vosti::gemm_workspace_bytes(g->schedule, max_m, sms));
    }
  }
  return bytes;
}

Status CudaModel::gemm(const CudaGemmWeight& w, const uint16_t* x, int64_t m, float* y, int64_t row_capacity,
                       const CudaActivations& acts, cudaStream_t stream) const {
  GemmArgs args;
  args.x = x;
  args.w = w.w.as<uint16_t>();
  args.bias = w.bias.empty() ? nullptr : w.bias.as<float>();
  args.y = y;
  args.out_dtype = DType::kF32;
  args.m = m;
  args.row_capacity = row_capacity;
  return gemm_bf16(w.schedule, args, acts.workspace, stream, device_.gemm());
}

Status CudaModel::run_layer(int64_t li, const CudaBatch& b, const CudaActivations& a, const CudaKvLayer& kv,
                            cudaStream_t stream) const {
  const ModelConfig& c = config_;
  const CudaModelDims& d = dims_;
  const CudaLayerWeights& L = layers_[static_cast<size_t>(li)];
  const LayerSpec& spec = c.layers[static_cast<size_t>(li)];
  const float* inv_freq = inv_freqs_[static_cast<size_t>(layer_rope_[static_cast<size_t>(li)])].as<float>();
  const int window = layer_window_[static_cast<size_t>(li)];
  const int64_t T = b.num_tokens, H = c.hidden_size, hd = c.head_dim, nh = c.num_heads, nkv = c.num_kv_heads;
  const int nhi = static_cast<int>(nh), nkvi = static_cast<int>(nkv), hdi = static_cast<int>(hd);
  const float eps = static_cast<float>(c.rms_norm_eps);
  float* k = a.qkv + nh * hd;          // heads of row r at k + r * qkv_rows
  float* v = a.qkv + (nh + nkv) * hd;  // heads of row r at v + r * qkv_rows
  const int64_t cap = a.row_capacity;

  if (li == 0) {
    VOSTI_RETURN_IF_ERROR(rms_norm(a.x, T, H, L.attn_norm.as<float>(), eps, a.h, DType::kBF16, stream));
  } else {  // x += the previous layer's down projection
    VOSTI_RETURN_IF_ERROR(add_rms_norm(a.x, a.proj, T, H, L.attn_norm.as<float>(), eps, a.h, DType::kBF16, stream));
  }
  VOSTI_RETURN_IF_ERROR(gemm(L.qkv, a.h, T, a.qkv, cap, a, stream));
  if (c.qk_norm) {
    VOSTI_RETURN_IF_ERROR(head_rms_norm(a.qkv, d.qkv_rows, T, nhi, hdi, L.q_norm.as<float>(), eps, stream));
    VOSTI_RETURN_IF_ERROR(head_rms_norm(k, d.qkv_rows, T, nkvi, hdi, L.k_norm.as<float>(), eps, stream));
  }
  VOSTI_RETURN_IF_ERROR(rope(a.qkv, d.qkv_rows, T, nhi, hdi, b.positions, inv_freq, c.rope_layout, stream));
  VOSTI_RETURN_IF_ERROR(rope(k, d.qkv_rows, T, nkvi, hdi, b.positions, inv_freq, c.rope_layout, stream));
  // Rule 4: this step's K/V go into the cache first; every query then reads through it.
  // A sliding-window layer under window-local KV writes and reads through its window table.
  const bool window_table = b.window_slots != nullptr && spec.sliding_window > 0;
  VOSTI_RETURN_IF_ERROR(kv_write(k, v, d.qkv_rows, T, window_table ? b.window_slots : b.slots, kv, stream));
  AttentionArgs at;
  at.q = a.qkv;
  at.q_row_stride = d.qkv_rows;
  at.num_heads = nhi;
  at.positions = b.positions;
  at.row_seq = b.row_seq;
  at.block_tables = window_table ? b.window_block_tables : b.block_tables;
  at.block_table_stride = window_table ? b.window_block_table_stride : b.block_table_stride;
  at.scale = c.attention_scale;
  at.window = windows_[static_cast<size_t>(window)];
  at.out = a.attn;
  at.out_row_stride = d.attn_width;
  at.out_dtype = DType::kBF16;
  at.m = T;
  at.work = b.attention[static_cast<size_t>(window)];
  at.kernels = &attention_kernels_;
  VOSTI_RETURN_IF_ERROR(attention(at, kv, stream));
  VOSTI_RETURN_IF_ERROR(gemm(L.o, a.attn, T, a.proj, cap, a, stream));
  if (spec.post_attn_norm)
    VOSTI_RETURN_IF_ERROR(rms_norm(a.proj, T, H, L.post_attn_norm.as<float>(), eps, a.proj, DType::kF32, stream));
  VOSTI_RETURN_IF_ERROR(add_rms_norm(a.x, a.proj, T, H, L.ffn_norm.as<float>(), eps, a.h, DType::kBF16, stream));
  VOSTI_RETURN_IF_ERROR(run_mlp(li, T, a, stream));
  if (spec.post_ffn_norm)
    VOSTI_RETURN_IF_ERROR(rms_norm(a.proj, T, H, L.post_ffn_norm.as<float>(), eps, a.proj, DType::kF32, stream));
  return Status();
}

// proj [T, H] (f32) = the layer's MLP of the normed rows h: dense, or a mixture of experts.
Status CudaModel::run_mlp(int64_t li, int64_t T, const CudaActivations& a, cudaStream_t stream) const {
  const LayerSpec& spec = config_.layers[static_cast<size_t>(li)];
  if (spec.moe.enabled()) return run_moe(li, T, a, stream);
  const CudaLayerWeights& L = layers_[static_cast<size_t>(li)];
  const int64_t cap = a.row_capacity;
  VOSTI_RETURN_IF_ERROR(gemm(L.gate_up, a.h, T, a.gate_up, cap, a, stream));
  VOSTI_RETURN_IF_ERROR(gated_mul(spec.activation, a.gate_up, T, dims_.ffn_width, a.act, DType::kBF16, stream));
  return gemm(L.down, a.act, T, a.proj, cap, a, stream);
}

Status CudaModel::forward(const CudaBatch& b, const CudaActivations& a, const CudaKvLayer* kv, float* logits_out,
                          cudaStream_t stream) const {
  VOSTI_RETURN_IF_ERROR(forward_layers(b, a, kv, stream));
  if (b.num_logit_rows > b.num_tokens) return invalid_argument("CudaModel::forward: more logit rows than tokens");
  return logits(b.logit_rows, b.num_logit_rows, a, logits_out, stream);
}

Status CudaModel::forward_layers(const CudaBatch& b, const CudaActivations& a, const CudaKvLayer* kv,
                                 cudaStream_t stream) const {
  const ModelConfig& c = config_;
  if (b.num_tokens < 1 || b.num_tokens > a.row_capacity)
    return invalid_argument("CudaModel::forward: " + std::to_string(b.num_tokens) +
                            " tokens outside the buffers' capacity " + std::to_string(a.row_capacity));
  VOSTI_RETURN_IF_ERROR(embedding_gather(embedding(), c.vocab_size, c.hidden_size, b.token_ids, b.num_tokens,
                                         c.embed_scale, a.x, stream));
  for (int64_t li = 0; li < c.num_layers; ++li) VOSTI_RETURN_IF_ERROR(run_layer(li, b, a, kv[li], stream));
  return Status();
}

Status CudaModel::logits(const int32_t* rows, int64_t num_rows, const CudaActivations& a, float* logits_out,
                         cudaStream_t stream) const {
  if (num_rows < 0 || num_rows > a.logit_capacity)
    return invalid_argument("CudaModel::logits: " + std::to_string(num_rows) + " rows outside the capacity " +
                            std::to_string(a.logit_capacity));
  if (num_rows == 0) return Status();
  const ModelConfig& c = config_;
  const float eps = static_cast<float>(c.rms_norm_eps);
  VOSTI_RETURN_IF_ERROR(add_rms_norm_rows(a.x, c.num_layers > 0 ? a.proj : nullptr, rows, num_rows, c.hidden_size,
                                          final_norm(), eps, a.h_logits, DType::kBF16, stream));
  VOSTI_RETURN_IF_ERROR(gemm(lm_head_, a.h_logits, num_rows, logits_out, a.logit_capacity, a, stream));
  if (c.final_logit_softcap <= 0) return Status();
  return softcap(logits_out, num_rows, c.vocab_size, dims_.vocab_rows, static_cast<float>(c.final_logit_softcap),
                 stream);
}

}  // namespace vosti
