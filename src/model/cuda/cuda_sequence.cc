// CudaSequence: the single-sequence forward on the GPU; the op order is in cuda_sequence.h.
#include "model/cuda/cuda_sequence.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "kernels/cuda/attention.h"
#include "kernels/cuda/cuda_status.h"
#include "kernels/cuda/gemm_bf16.h"
#include "kernels/cuda/row_kernels.h"

namespace vosti {
namespace {

// lm_head rows per GEMM call: bounds the logits buffer; the GEMM is row-invariant, so the
// chunking never changes a bit.
constexpr int64_t kMaxLogitChunkRows = 64;

}  // namespace

Result<std::unique_ptr<CudaSequence>> CudaSequence::create(std::shared_ptr<const CudaModel> model, int64_t max_tokens,
                                                           int block_size) {
  if (model == nullptr) return invalid_argument("CudaSequence: no model");
  if (max_tokens < 1 || max_tokens > 0x7fffffff) {
    return invalid_argument("CudaSequence: max_tokens " + std::to_string(max_tokens) + " must be in [1, 2^31)");
  }
  if (block_size < 1) return invalid_argument("CudaSequence: block_size must be positive");
  std::unique_ptr<CudaSequence> seq(new CudaSequence(std::move(model), max_tokens, block_size));
  VOSTI_RETURN_IF_ERROR(seq->allocate());
  return seq;
}

CudaSequence::CudaSequence(std::shared_ptr<const CudaModel> model, int64_t max_tokens, int block_size)
    : model_(std::move(model)),
      max_tokens_(max_tokens),
      block_size_(block_size),
      num_blocks_((max_tokens + block_size - 1) / block_size),
      logit_chunk_rows_(std::min(max_tokens, kMaxLogitChunkRows)) {}

CudaSequence::~CudaSequence() {
  if (stream_ != nullptr) {
    (void)cudaStreamSynchronize(stream_);  // buffers are freed after the stream's work ends
    (void)cudaStreamDestroy(stream_);
  }
}

Status CudaSequence::allocate() {
  const ModelConfig& c = model_->config();
  const CudaModelDims& d = model_->dims();
  const int64_t T = max_tokens_, H = c.hidden_size;
  const int64_t cache_floats = c.num_layers * num_blocks_ * block_size_ * c.num_kv_heads * c.head_dim;
  VOSTI_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  auto alloc = [](DeviceMemory& m, int64_t count, size_t elem, const char* what) -> Status {
    Result<DeviceMemory> r = DeviceMemory::allocate(static_cast<size_t>(count) * elem, what);
    if (!r.ok()) return r.status();
    m = std::move(r).value();
    return Status();
  };
  VOSTI_RETURN_IF_ERROR(alloc(ids_, T, sizeof(int32_t), "token ids"));
  VOSTI_RETURN_IF_ERROR(alloc(positions_, T, sizeof(int32_t), "positions"));
  VOSTI_RETURN_IF_ERROR(alloc(slots_, T, sizeof(int64_t), "cache slots"));
  VOSTI_RETURN_IF_ERROR(alloc(block_table_, num_blocks_, sizeof(int32_t), "block table"));
  VOSTI_RETURN_IF_ERROR(alloc(x_, T * H, sizeof(float), "residual stream"));
  VOSTI_RETURN_IF_ERROR(alloc(h_, T * H, sizeof(uint16_t), "normed activations"));
  VOSTI_RETURN_IF_ERROR(alloc(qkv_, T * d.qkv_rows, sizeof(float), "qkv activations"));
  VOSTI_RETURN_IF_ERROR(alloc(attn_, T * d.attn_width, sizeof(uint16_t), "attention output"));
  VOSTI_RETURN_IF_ERROR(alloc(proj_, T * H, sizeof(float), "projection output"));
  VOSTI_RETURN_IF_ERROR(alloc(gate_up_, T * 2 * d.ffn_width, sizeof(float), "gate_up activations"));
  VOSTI_RETURN_IF_ERROR(alloc(act_, T * d.ffn_width, sizeof(uint16_t), "SwiGLU activations"));
  VOSTI_RETURN_IF_ERROR(alloc(logits_, logit_chunk_rows_ * d.vocab_rows, sizeof(float), "logits"));
  VOSTI_RETURN_IF_ERROR(alloc(k_cache_, cache_floats, sizeof(float), "K cache"));
  VOSTI_RETURN_IF_ERROR(alloc(v_cache_, cache_floats, sizeof(float), "V cache"));
  VOSTI_ASSIGN_OR_RETURN(workspace_, DeviceMemory::allocate(model_->gemm_workspace_bytes(T), "GEMM workspace"));
  if (!workspace_.empty()) {
    VOSTI_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(workspace_.as<void>(), 0, workspace_.bytes(), stream_));
  }
  // wo's padding columns read attn_'s padding columns, which attention never writes.
  VOSTI_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(attn_.as<void>(), 0, attn_.bytes(), stream_));
  std::vector<int32_t> table(static_cast<size_t>(num_blocks_));  // [num_blocks]
  for (size_t i = 0; i < table.size(); ++i) table[i] = static_cast<int32_t>(i);
  VOSTI_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(block_table_.as<void>(), table.data(), table.size() * sizeof(int32_t),
                                             cudaMemcpyHostToDevice, stream_));
  VOSTI_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
  return Status();
}

Status CudaSequence::gemm(const CudaGemmWeight& w, const uint16_t* x, int64_t m, float* y, int64_t row_capacity) {
  GemmArgs args;
  args.x = x;
  args.w = w.w.as<uint16_t>();
  args.bias = w.bias.empty() ? nullptr : w.bias.as<float>();
  args.y = y;
  args.out_dtype = DType::kF32;
  args.m = m;
  args.row_capacity = row_capacity;
  return gemm_bf16(w.schedule, args, GemmWorkspace{workspace_.as<void>(), workspace_.bytes()}, stream_);
}

Status CudaSequence::run_layer(int64_t li, int64_t T) {
  const ModelConfig& c = model_->config();
  const CudaModelDims& d = model_->dims();
  const CudaLayerWeights& L = model_->layer(li);
  const int64_t H = c.hidden_size, hd = c.head_dim, nh = c.num_heads, nkv = c.num_kv_heads;
  const int nhi = static_cast<int>(nh), nkvi = static_cast<int>(nkv), hdi = static_cast<int>(hd);
  const float eps = static_cast<float>(c.rms_norm_eps);
  float* x = x_.as<float>();              // [T, H]
  uint16_t* h = h_.as<uint16_t>();        // [T, H] bf16
  float* qkv = qkv_.as<float>();          // [T, qkv_rows]
  float* k = qkv + nh * hd;               // heads of row r at k + r * qkv_rows
  float* v = qkv + (nh + nkv) * hd;       // heads of row r at v + r * qkv_rows
  float* proj = proj_.as<float>();        // [T, H]
  float* gate_up = gate_up_.as<float>();  // [T, 2 * ffn_width]
  const int32_t* positions = positions_.as<int32_t>();
  const int64_t layer_floats = num_blocks_ * block_size_ * nkv * hd;
  PagedKvView kv{k_cache_.as<float>() + li * layer_floats,
                 v_cache_.as<float>() + li * layer_floats,
                 num_blocks_,
                 block_size_,
                 nkvi,
                 hdi};

  if (li == 0) {
    VOSTI_RETURN_IF_ERROR(rms_norm(x, T, H, L.attn_norm.as<float>(), eps, h, DType::kBF16, stream_));
  } else {  // x += the previous layer's down projection
    VOSTI_RETURN_IF_ERROR(add_rms_norm(x, proj, T, H, L.attn_norm.as<float>(), eps, h, DType::kBF16, stream_));
  }
  VOSTI_RETURN_IF_ERROR(gemm(L.qkv, h, T, qkv, max_tokens_));
  if (c.qk_norm) {
    VOSTI_RETURN_IF_ERROR(head_rms_norm(qkv, d.qkv_rows, T, nhi, hdi, L.q_norm.as<float>(), eps, stream_));
    VOSTI_RETURN_IF_ERROR(head_rms_norm(k, d.qkv_rows, T, nkvi, hdi, L.k_norm.as<float>(), eps, stream_));
  }
  VOSTI_RETURN_IF_ERROR(rope(qkv, d.qkv_rows, T, nhi, hdi, positions, model_->inv_freq(), c.rope_layout, stream_));
  VOSTI_RETURN_IF_ERROR(rope(k, d.qkv_rows, T, nkvi, hdi, positions, model_->inv_freq(), c.rope_layout, stream_));
  // Rule 4: this step's K/V go into the cache first; every query then reads through it.
  VOSTI_RETURN_IF_ERROR(kv_write(k, v, d.qkv_rows, T, slots_.as<int64_t>(), kv, stream_));
  AttentionArgs a;
  a.q = qkv;
  a.q_row_stride = d.qkv_rows;
  a.num_heads = nhi;
  a.positions = positions;
  a.block_tables = block_table_.as<int32_t>();
  a.block_table_stride = 0;  // one sequence: every query reads the same table
  a.scale = 1.0f / std::sqrt(static_cast<float>(hd));
  a.out = attn_.as<void>();
  a.out_row_stride = d.attn_width;
  a.out_dtype = DType::kBF16;
  a.m = T;
  VOSTI_RETURN_IF_ERROR(attention(a, kv, stream_));
  VOSTI_RETURN_IF_ERROR(gemm(L.o, attn_.as<uint16_t>(), T, proj, max_tokens_));
  VOSTI_RETURN_IF_ERROR(add_rms_norm(x, proj, T, H, L.ffn_norm.as<float>(), eps, h, DType::kBF16, stream_));
  VOSTI_RETURN_IF_ERROR(gemm(L.gate_up, h, T, gate_up, max_tokens_));
  VOSTI_RETURN_IF_ERROR(silu_mul(gate_up, T, d.ffn_width, act_.as<void>(), DType::kBF16, stream_));
  return gemm(L.down, act_.as<uint16_t>(), T, proj, max_tokens_);
}

// The final norm of the logit rows (the last row, or all T) and lm_head, copied into out.
Status CudaSequence::logits(int64_t T, bool all_logits, std::vector<float>& out) {
  const ModelConfig& c = model_->config();
  const int64_t H = c.hidden_size, vocab = c.vocab_size, vocab_rows = model_->dims().vocab_rows;
  const int64_t first = all_logits ? 0 : T - 1;
  const int64_t rows = T - first;
  const float eps = static_cast<float>(c.rms_norm_eps);
  float* x = x_.as<float>() + first * H;              // [rows, H]
  const float* proj = proj_.as<float>() + first * H;  // [rows, H]
  uint16_t* h = h_.as<uint16_t>();                    // [rows, H] bf16
  if (c.num_layers > 0) {
    VOSTI_RETURN_IF_ERROR(add_rms_norm(x, proj, rows, H, model_->final_norm(), eps, h, DType::kBF16, stream_));
  } else {
    VOSTI_RETURN_IF_ERROR(rms_norm(x, rows, H, model_->final_norm(), eps, h, DType::kBF16, stream_));
  }
  out.assign(static_cast<size_t>(rows * vocab), 0.0f);
  for (int64_t r0 = 0; r0 < rows; r0 += logit_chunk_rows_) {
    const int64_t n = std::min(logit_chunk_rows_, rows - r0);
    VOSTI_RETURN_IF_ERROR(
        gemm(model_->lm_head(), h + r0 * H, n, logits_.as<float>(), std::min(logit_chunk_rows_, max_tokens_ - r0)));
    // Stream-ordered: the next chunk's GEMM overwrites logits_ only after this copy.
    VOSTI_CUDA_RETURN_IF_ERROR(cudaMemcpy2DAsync(out.data() + r0 * vocab, vocab * sizeof(float), logits_.as<void>(),
                                                 vocab_rows * sizeof(float), vocab * sizeof(float), n,
                                                 cudaMemcpyDeviceToHost, stream_));
  }
  return Status();
}

Result<std::vector<float>> CudaSequence::append(std::span<const int32_t> tokens, bool all_logits) {
  if (!broken_.ok()) return broken_;
  const int64_t T = static_cast<int64_t>(tokens.size());
  const int64_t vocab = model_->config().vocab_size;
  if (T == 0) return invalid_argument("CudaSequence::append: no tokens");
  if (num_tokens_ + T > max_tokens_) {
    return out_of_range("CudaSequence::append: too many tokens: " + std::to_string(num_tokens_) + " + " +
                        std::to_string(T) + " > max_tokens " + std::to_string(max_tokens_));
  }
  for (int64_t i = 0; i < T; ++i) {
    const int32_t id = tokens[static_cast<size_t>(i)];
    if (id < 0 || id >= vocab) {
      return out_of_range("CudaSequence::append: token id " + std::to_string(id) + " at index " + std::to_string(i) +
                          " is outside the vocabulary [0, " + std::to_string(vocab) + ")");
    }
  }
  std::vector<int32_t> positions(static_cast<size_t>(T));  // [T]
  std::vector<int64_t> slots(static_cast<size_t>(T));      // [T]: block b holds positions [b * bs, (b + 1) * bs)
  for (int64_t i = 0; i < T; ++i) {
    positions[static_cast<size_t>(i)] = static_cast<int32_t>(num_tokens_ + i);
    slots[static_cast<size_t>(i)] = num_tokens_ + i;
  }
  std::vector<float> out;
  Status s = [&]() -> Status {
    VOSTI_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(ids_.as<void>(), tokens.data(), static_cast<size_t>(T) * sizeof(int32_t),
                                               cudaMemcpyHostToDevice, stream_));
    VOSTI_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(positions_.as<void>(), positions.data(),
                                               positions.size() * sizeof(int32_t), cudaMemcpyHostToDevice, stream_));
    VOSTI_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(slots_.as<void>(), slots.data(), slots.size() * sizeof(int64_t),
                                               cudaMemcpyHostToDevice, stream_));
    const ModelConfig& c = model_->config();
    VOSTI_RETURN_IF_ERROR(
        embedding_gather(model_->embedding(), vocab, c.hidden_size, ids_.as<int32_t>(), T, x_.as<float>(), stream_));
    for (int64_t li = 0; li < c.num_layers; ++li) VOSTI_RETURN_IF_ERROR(run_layer(li, T));
    VOSTI_RETURN_IF_ERROR(logits(T, all_logits, out));
    return cuda_status(cudaStreamSynchronize(stream_), "CudaSequence::append: the forward on the GPU");
  }();
  if (!s.ok()) {
    broken_ = s.with_context("CudaSequence is unusable after a CUDA failure");
    return broken_;
  }
  num_tokens_ += T;
  return out;
}

}  // namespace vosti
