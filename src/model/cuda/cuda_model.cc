// CudaModel::upload: f32 weights -> padded bf16 matrices and f32 vectors on the device,
// one GEMM schedule per weight shape.
#include "model/cuda/cuda_model.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "core/dtype.h"
#include "kernels/cuda/attention.h"
#include "kernels/cuda/cuda_status.h"
#include "kernels/cuda/gemm_bf16.h"

namespace vosti {
namespace {

int64_t round_up(int64_t v, int64_t multiple) { return (v + multiple - 1) / multiple * multiple; }

// Copies src [rows, cols] (f32) rounded to bf16 into dst [.., dst_cols] from row dst_row0.
void put_bf16(const float* src, int64_t rows, int64_t cols, std::vector<uint16_t>& dst, int64_t dst_row0,
              int64_t dst_cols) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* s = src + r * cols;                                            // [cols]
    uint16_t* d = dst.data() + static_cast<size_t>((dst_row0 + r) * dst_cols);  // [dst_cols]
    for (int64_t c = 0; c < cols; ++c) d[c] = f32_to_bf16(s[c]);
  }
}

// A zero [rows, cols] bf16 matrix.
std::vector<uint16_t> zero_bf16(int64_t rows, int64_t cols) {
  return std::vector<uint16_t>(static_cast<size_t>(rows * cols), 0);
}

Status check_supported(const ModelConfig& c) {
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

}  // namespace

Result<std::shared_ptr<const CudaModel>> CudaModel::upload(const Model& model) {
  int num_devices = 0;
  const cudaError_t count_err = cudaGetDeviceCount(&num_devices);
  if (count_err != cudaSuccess || num_devices == 0) {
    (void)cudaGetLastError();
    return failed_precondition(std::string("no CUDA device: cudaGetDeviceCount: ") +
                               (count_err == cudaSuccess ? "0 devices" : cudaGetErrorString(count_err)));
  }
  VOSTI_RETURN_IF_ERROR(check_supported(model.config()));
  VOSTI_ASSIGN_OR_RETURN(const bool has_wgmma, device_has_wgmma());
  std::shared_ptr<CudaModel> m(new CudaModel());
  VOSTI_ASSIGN_OR_RETURN(m->num_sms_, current_device_sm_count());
  VOSTI_RETURN_IF_ERROR(m->upload_weights(model, has_wgmma));
  // A pageable cudaMemcpy may return before its DMA lands; sequences run on their own
  // non-blocking streams, so the weights must be complete before upload() returns.
  VOSTI_CUDA_RETURN_IF_ERROR(cudaDeviceSynchronize());
  return std::shared_ptr<const CudaModel>(std::move(m));
}

Result<DeviceMemory> CudaModel::upload_f32(const float* data, size_t count, const std::string& what) {
  VOSTI_ASSIGN_OR_RETURN(DeviceMemory d, DeviceMemory::upload(data, count * sizeof(float), what));
  num_weight_bytes_ += d.bytes();
  return d;
}

Result<CudaGemmWeight> CudaModel::upload_gemm(const std::vector<uint16_t>& w, const float* bias, int64_t n_rows,
                                              int64_t k_cols, bool has_wgmma, const std::string& what) {
  CudaGemmWeight g;
  VOSTI_ASSIGN_OR_RETURN(g.schedule, select_schedule(n_rows, k_cols, select_instruction(n_rows, k_cols, has_wgmma)));
  VOSTI_ASSIGN_OR_RETURN(g.w, DeviceMemory::upload(w.data(), w.size() * sizeof(uint16_t), what));
  num_weight_bytes_ += g.w.bytes();
  if (bias != nullptr) {
    VOSTI_ASSIGN_OR_RETURN(g.bias, upload_f32(bias, static_cast<size_t>(n_rows), what + " bias"));
  }
  return g;
}

Status CudaModel::upload_weights(const Model& model, bool has_wgmma) {
  config_ = model.config();
  const ModelConfig& c = config_;
  const ModelWeights& W = model.weights();
  const int64_t H = c.hidden_size, hd = c.head_dim, nh = c.num_heads, nkv = c.num_kv_heads;
  const int64_t I = c.intermediate_size, qkv_width = (nh + 2 * nkv) * hd;
  dims_.qkv_rows = round_up(qkv_width, 8);
  dims_.attn_width = round_up(nh * hd, 64);
  dims_.ffn_width = round_up(I, 64);
  dims_.vocab_rows = round_up(c.vocab_size, 8);

  layers_.resize(static_cast<size_t>(c.num_layers));
  for (int64_t li = 0; li < c.num_layers; ++li) {
    const LayerWeights& L = W.layers[static_cast<size_t>(li)];
    CudaLayerWeights& D = layers_[static_cast<size_t>(li)];
    const std::string name = "layer " + std::to_string(li) + " ";
    VOSTI_ASSIGN_OR_RETURN(D.attn_norm, upload_f32(L.attn_norm.data, static_cast<size_t>(H), name + "attn_norm"));
    VOSTI_ASSIGN_OR_RETURN(D.ffn_norm, upload_f32(L.ffn_norm.data, static_cast<size_t>(H), name + "ffn_norm"));
    if (c.qk_norm) {
      VOSTI_ASSIGN_OR_RETURN(D.q_norm, upload_f32(L.q_norm.data, static_cast<size_t>(hd), name + "q_norm"));
      VOSTI_ASSIGN_OR_RETURN(D.k_norm, upload_f32(L.k_norm.data, static_cast<size_t>(hd), name + "k_norm"));
    }

    std::vector<uint16_t> wqkv = zero_bf16(dims_.qkv_rows, H);  // [qkv_rows, H]
    put_bf16(L.wqkv.data, qkv_width, H, wqkv, 0, H);
    std::vector<float> bqkv;  // [qkv_rows]
    if (L.bqkv.data != nullptr) {
      bqkv.assign(static_cast<size_t>(dims_.qkv_rows), 0.0f);
      std::memcpy(bqkv.data(), L.bqkv.data, static_cast<size_t>(qkv_width) * sizeof(float));
    }
    VOSTI_ASSIGN_OR_RETURN(
        D.qkv, upload_gemm(wqkv, bqkv.empty() ? nullptr : bqkv.data(), dims_.qkv_rows, H, has_wgmma, name + "wqkv"));

    std::vector<uint16_t> wo = zero_bf16(H, dims_.attn_width);  // [H, attn_width]
    for (int64_t r = 0; r < H; ++r) put_bf16(L.wo.data + r * nh * hd, 1, nh * hd, wo, r, dims_.attn_width);
    VOSTI_ASSIGN_OR_RETURN(D.o, upload_gemm(wo, nullptr, H, dims_.attn_width, has_wgmma, name + "wo"));

    std::vector<uint16_t> wgu = zero_bf16(2 * dims_.ffn_width, H);  // [2 * ffn_width, H]
    put_bf16(L.w_gate_up.data, I, H, wgu, 0, H);
    put_bf16(L.w_gate_up.data + I * H, I, H, wgu, dims_.ffn_width, H);
    VOSTI_ASSIGN_OR_RETURN(D.gate_up, upload_gemm(wgu, nullptr, 2 * dims_.ffn_width, H, has_wgmma, name + "w_gate_up"));

    std::vector<uint16_t> wd = zero_bf16(H, dims_.ffn_width);  // [H, ffn_width]
    for (int64_t r = 0; r < H; ++r) put_bf16(L.w_down.data + r * I, 1, I, wd, r, dims_.ffn_width);
    VOSTI_ASSIGN_OR_RETURN(D.down, upload_gemm(wd, nullptr, H, dims_.ffn_width, has_wgmma, name + "w_down"));
  }

  std::vector<uint16_t> head = zero_bf16(dims_.vocab_rows, H);  // [vocab_rows, H]
  put_bf16(W.lm_head.data, c.vocab_size, H, head, 0, H);
  VOSTI_ASSIGN_OR_RETURN(lm_head_, upload_gemm(head, nullptr, dims_.vocab_rows, H, has_wgmma, "lm_head"));
  if (W.lm_head.data == W.embed.data) {
    embed_ = lm_head_.w.as<uint16_t>();  // tied: the embedding is lm_head's first vocab rows
  } else {
    std::vector<uint16_t> embed = zero_bf16(c.vocab_size, H);  // [vocab, H]
    put_bf16(W.embed.data, c.vocab_size, H, embed, 0, H);
    VOSTI_ASSIGN_OR_RETURN(embed_own_,
                           DeviceMemory::upload(embed.data(), embed.size() * sizeof(uint16_t), "embedding"));
    num_weight_bytes_ += embed_own_.bytes();
    embed_ = embed_own_.as<uint16_t>();
  }
  VOSTI_ASSIGN_OR_RETURN(final_norm_, upload_f32(W.final_norm.data, static_cast<size_t>(H), "final_norm"));
  const std::vector<float> inv_freq = c.rope_inv_freq();  // [head_dim / 2]
  VOSTI_ASSIGN_OR_RETURN(inv_freq_, upload_f32(inv_freq.data(), inv_freq.size(), "rope inv_freq"));
  return Status();
}

size_t CudaModel::gemm_workspace_bytes(int64_t max_m) const {
  size_t bytes = vosti::gemm_workspace_bytes(lm_head_.schedule, max_m, num_sms_);
  for (const CudaLayerWeights& L : layers_) {
    for (const CudaGemmWeight* g : {&L.qkv, &L.o, &L.gate_up, &L.down})
      bytes = std::max(bytes, vosti::gemm_workspace_bytes(g->schedule, max_m, num_sms_));
  }
  return bytes;
}

}  // namespace vosti
