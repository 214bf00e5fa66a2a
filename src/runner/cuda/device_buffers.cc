#include "runner/cuda/device_buffers.h"

#include <algorithm>
#include <string>

#include "kernels/cuda/cuda_status.h"

namespace vosti {
namespace {

constexpr size_t kHeadroomBytes = 512ull << 20;  // left free beside the KV pool (graphs, CUDA's own)

Status alloc(DeviceMemory& m, int64_t count, size_t elem, const char* what) {
  VOSTI_ASSIGN_OR_RETURN(m, DeviceMemory::allocate(static_cast<size_t>(count) * elem, what));
  return Status();
}

Status alloc_pinned(PinnedMemory& m, int64_t count, size_t elem, const char* what) {
  VOSTI_ASSIGN_OR_RETURN(m, PinnedMemory::allocate(static_cast<size_t>(count) * elem, what));
  return Status();
}

}  // namespace

Result<CudaActivationBuffers> CudaActivationBuffers::allocate(const CudaModel& model, int64_t rows, int64_t logit_rows,
                                                              cudaStream_t stream) {
  const CudaModelDims& d = model.dims();
  const int64_t H = model.config().hidden_size;
  CudaActivationBuffers b;
  VOSTI_RETURN_IF_ERROR(alloc(b.x_, rows * H, sizeof(float), "residual stream"));
  VOSTI_RETURN_IF_ERROR(alloc(b.h_, rows * H, sizeof(uint16_t), "normed activations"));
  VOSTI_RETURN_IF_ERROR(alloc(b.qkv_, rows * d.qkv_rows, sizeof(float), "qkv activations"));
  VOSTI_RETURN_IF_ERROR(alloc(b.attn_, rows * d.attn_width, sizeof(uint16_t), "attention output"));
  VOSTI_RETURN_IF_ERROR(alloc(b.proj_, rows * H, sizeof(float), "projection output"));
  VOSTI_RETURN_IF_ERROR(alloc(b.gate_up_, rows * 2 * d.ffn_width, sizeof(float), "gate_up activations"));
  VOSTI_RETURN_IF_ERROR(alloc(b.act_, rows * d.ffn_width, sizeof(uint16_t), "SwiGLU activations"));
  VOSTI_RETURN_IF_ERROR(alloc(b.h_logits_, logit_rows * H, sizeof(uint16_t), "final-normed logit rows"));
  VOSTI_ASSIGN_OR_RETURN(b.workspace_, DeviceMemory::allocate(model.gemm_workspace_bytes(rows), "GEMM workspace"));
  if (!b.workspace_.empty())
    VOSTI_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(b.workspace_.as<void>(), 0, b.workspace_.bytes(), stream));
  VOSTI_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(b.attn_.as<void>(), 0, b.attn_.bytes(), stream));
  b.view_ = CudaActivations{b.x_.as<float>(),
                            b.h_.as<uint16_t>(),
                            b.qkv_.as<float>(),
                            b.attn_.as<uint16_t>(),
                            b.proj_.as<float>(),
                            b.gate_up_.as<float>(),
                            b.act_.as<uint16_t>(),
                            b.h_logits_.as<uint16_t>(),
                            rows,
                            logit_rows,
                            {b.workspace_.as<void>(), b.workspace_.bytes()},
                            CudaMoeActivations{}};
  if (model.moe().enabled()) VOSTI_RETURN_IF_ERROR(b.allocate_moe(model, rows));
  return b;
}

Status CudaActivationBuffers::allocate_moe(const CudaModel& model, int64_t rows) {
  const CudaModelDims& d = model.dims();
  const MoeSpec m = model.moe();
  const int64_t H = model.config().hidden_size, k = m.top_k, entries = rows * k;
  VOSTI_ASSIGN_OR_RETURN(const MoeGemmSchedule s, select_moe_gemm_schedule(2 * d.moe_width, H));
  const int64_t max_tiles = moe_max_tiles(entries, m.num_experts, s.block_m);
  const int64_t perm_rows = moe_rows_with_scratch(entries, s.block_m);  // the grouped GEMM's scratch rows too
  VOSTI_RETURN_IF_ERROR(alloc(moe_logits_, rows * d.router_rows, sizeof(float), "router logits"));
  VOSTI_RETURN_IF_ERROR(alloc(moe_experts_, entries, sizeof(int32_t), "routed experts"));
  VOSTI_RETURN_IF_ERROR(alloc(moe_weights_, entries, sizeof(float), "routing weights"));
  VOSTI_RETURN_IF_ERROR(alloc(moe_pos_, entries, sizeof(int32_t), "MoE permutation"));
  VOSTI_RETURN_IF_ERROR(alloc(moe_src_, entries, sizeof(int32_t), "MoE permutation"));
  VOSTI_RETURN_IF_ERROR(alloc(moe_tiles_, max_tiles, sizeof(MoeTile), "MoE tile list"));
  VOSTI_RETURN_IF_ERROR(alloc(moe_num_tiles_, 1, sizeof(int32_t), "MoE tile count"));
  VOSTI_RETURN_IF_ERROR(alloc(moe_x_, perm_rows * H, sizeof(uint16_t), "MoE permuted rows"));
  VOSTI_RETURN_IF_ERROR(alloc(moe_gate_up_, perm_rows * 2 * d.moe_width, sizeof(float), "MoE gate_up activations"));
  VOSTI_RETURN_IF_ERROR(alloc(moe_act_, perm_rows * d.moe_width, sizeof(uint16_t), "MoE activations"));
  VOSTI_RETURN_IF_ERROR(alloc(moe_y_, perm_rows * H, sizeof(float), "MoE expert outputs"));
  VOSTI_RETURN_IF_ERROR(
      alloc(moe_routed_, rows * model.num_moe_layers() * k, sizeof(int32_t), "routed experts record"));
  CudaMoeActivations& v = view_.moe;
  v.logits = moe_logits_.as<float>();
  v.experts = moe_experts_.as<int32_t>();
  v.weights = moe_weights_.as<float>();
  v.pos = moe_pos_.as<int32_t>();
  v.src_token = moe_src_.as<int32_t>();
  v.tiles = moe_tiles_.as<MoeTile>();
  v.num_tiles = moe_num_tiles_.as<int32_t>();
  v.x = moe_x_.as<uint16_t>();
  v.gate_up = moe_gate_up_.as<float>();
  v.act = moe_act_.as<uint16_t>();
  v.y = moe_y_.as<float>();
  v.routed = moe_routed_.as<int32_t>();
  v.max_tiles = max_tiles;
  return Status();
}

Result<CudaRunnerBuffers> CudaRunnerBuffers::allocate(const CudaModel& model, const RunnerCapacity& cap,
                                                      cudaStream_t stream) {
  const int64_t vocab = model.config().vocab_size;
  CudaRunnerBuffers b;
  VOSTI_RETURN_IF_ERROR(alloc_pinned(b.step_host_, cap.step_bytes, 1, "the step buffer"));
  VOSTI_RETURN_IF_ERROR(alloc(b.step_dev_, cap.step_bytes, 1, "the step buffer"));
  constexpr int64_t kRowAlign = 256;  // activation rows: whole tiles of the GEMM's tallest x tile
  const int64_t rows = (cap.tokens + kRowAlign - 1) / kRowAlign * kRowAlign;
  VOSTI_ASSIGN_OR_RETURN(b.acts_, CudaActivationBuffers::allocate(model, rows, cap.logit_rows, stream));
  VOSTI_RETURN_IF_ERROR(alloc(b.logits_, cap.logit_rows * model.dims().vocab_rows, sizeof(float), "logits"));
  VOSTI_RETURN_IF_ERROR(alloc(b.scratch_, cap.logit_rows * vocab, sizeof(float), "sampler scratch"));
  VOSTI_RETURN_IF_ERROR(alloc(b.results_dev_, cap.tokens, sizeof(SamplerRowResult), "sampler results"));
  VOSTI_RETURN_IF_ERROR(alloc_pinned(b.results_host_, cap.tokens, sizeof(SamplerRowResult), "sampler results"));
  VOSTI_RETURN_IF_ERROR(alloc(b.digests_dev_, cap.sampled * 2, sizeof(uint64_t), "digests"));
  VOSTI_RETURN_IF_ERROR(alloc_pinned(b.digests_host_, cap.sampled * 2, sizeof(uint64_t), "digests"));
  VOSTI_RETURN_IF_ERROR(alloc_pinned(b.rows_host_, cap.sampled * vocab, sizeof(float), "logits rows on the host"));
  if (model.num_moe_layers() > 0) {
    VOSTI_RETURN_IF_ERROR(alloc_pinned(b.routed_host_, cap.tokens * model.num_moe_layers() * model.moe().top_k,
                                       sizeof(int32_t), "routed experts on the host"));
  }
  return b;
}

Status CudaRunnerBuffers::allocate_kv(const CudaModel& model, const EngineConfig& config, DType kv_dtype,
                                      int64_t max_len) {
  const ModelConfig& c = model.config();
  if (config.gpu_memory_utilization <= 0.0 || config.gpu_memory_utilization > 1.0)
    return invalid_argument("gpu_memory_utilization must be in (0, 1], got " +
                            std::to_string(config.gpu_memory_utilization));
  const int64_t bs = config.block_size;
  const size_t elem = kv_element_bytes(kv_dtype);
  const int64_t layer_elems_per_block = bs * c.num_kv_heads * c.head_dim;
  const int64_t bytes_per_block = 2 * c.num_layers * layer_elems_per_block * static_cast<int64_t>(elem);
  // The pools' sizes: EngineConfig::num_blocks, else the memory the fraction leaves after
  // everything allocated so far (one block of every layer per bytes_per_block).
  EngineConfig sizing = config;
  sizing.max_model_len = static_cast<int32_t>(max_len);
  if (config.num_blocks <= 0) {
    size_t free_bytes = 0, total_bytes = 0;
    VOSTI_CUDA_RETURN_IF_ERROR(cudaMemGetInfo(&free_bytes, &total_bytes));
    const double reserved = (1.0 - config.gpu_memory_utilization) * static_cast<double>(total_bytes);
    const double budget = static_cast<double>(free_bytes) - reserved - static_cast<double>(kHeadroomBytes);
    const int64_t blocks = budget > 0 ? static_cast<int64_t>(budget / static_cast<double>(bytes_per_block)) : 0;
    if (blocks <= 0)
      return resource_exhausted("no GPU memory left for the KV cache: " + std::to_string(free_bytes >> 20) +
                                " MiB free of " + std::to_string(total_bytes >> 20) +
                                " MiB after the weights and buffers; raise --gpu-memory-utilization (now " +
                                std::to_string(config.gpu_memory_utilization) + ") or lower --max-num-batched-tokens");
    sizing.kv_cache_bytes = blocks * bytes_per_block;
  }
  pools_ = kv_pool_sizes(c, sizing, static_cast<int64_t>(elem));
  if (pools_.num_blocks <= 0) return resource_exhausted("the KV cache holds no block");
  const KvLayerGroups groups = c.kv_layer_groups();
  const bool window_local = pools_.window > 0;
  const int64_t full_layers = window_local ? groups.num_full_layers : c.num_layers;
  const int64_t full_blocks = pools_.full_layers ? pools_.num_blocks : 0;
  const size_t full_side = static_cast<size_t>(full_blocks * layer_elems_per_block) * elem;  // one layer's K
  const size_t window_side = static_cast<size_t>(pools_.num_window_blocks * layer_elems_per_block) * elem;
  if (full_layers > 0 && full_blocks > 0) {
    VOSTI_ASSIGN_OR_RETURN(kv_pool_,
                           DeviceMemory::allocate(2 * static_cast<size_t>(full_layers) * full_side,
                                                  "the KV cache (" + std::to_string(full_blocks) + " blocks)"));
  }
  if (window_local) {
    VOSTI_ASSIGN_OR_RETURN(
        window_pool_, DeviceMemory::allocate(
                          2 * static_cast<size_t>(groups.num_window_layers) * window_side,
                          "the window layers' KV cache (" + std::to_string(pools_.num_window_blocks) + " blocks)"));
    VOSTI_CUDA_RETURN_IF_ERROR(cudaMemset(window_pool_.as<void>(), 0, window_pool_.bytes()));
  }
  kv_.resize(static_cast<size_t>(c.num_layers));
  int64_t full_index = 0, window_index = 0;
  for (int64_t li = 0; li < c.num_layers; ++li) {
    const bool window_layer = window_local && c.layers[static_cast<size_t>(li)].sliding_window > 0;
    CudaKvLayer& k = kv_[static_cast<size_t>(li)];
    char* base = window_layer ? window_pool_.as<char>() : kv_pool_.as<char>();
    const size_t side = window_layer ? window_side : full_side;
    const int64_t index = window_layer ? window_index++ : full_index++;
    k.k = base + (2 * index) * side;
    k.v = base + (2 * index + 1) * side;
    k.dtype = kv_dtype;
    k.num_blocks = window_layer ? pools_.num_window_blocks : full_blocks;
    k.block_size = static_cast<int>(bs);
    k.num_kv_heads = static_cast<int>(c.num_kv_heads);
    k.head_dim = static_cast<int>(c.head_dim);
  }
  return Status();
}

Status CudaRunnerBuffers::allocate_partials(const CudaModel& model, int32_t slots) {
  const ModelConfig& c = model.config();
  partial_slots_ = slots;
  const int64_t floats = attention_partial_floats(static_cast<int>(c.num_heads), static_cast<int>(c.head_dim));
  return alloc(partials_, slots * floats, sizeof(float), "the attention split states");
}

Status CudaRunnerBuffers::copy_results(int64_t num_rows, int64_t num_digests, cudaStream_t stream) const {
  VOSTI_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(results_host_.as<void>(), results_dev_.as<void>(),
                                             static_cast<size_t>(num_rows) * sizeof(SamplerRowResult),
                                             cudaMemcpyDeviceToHost, stream));
  if (num_digests > 0) {
    VOSTI_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(digests_host_.as<void>(), digests_dev_.as<void>(),
                                               static_cast<size_t>(num_digests) * 2 * sizeof(uint64_t),
                                               cudaMemcpyDeviceToHost, stream));
  }
  return Status();
}

Status CudaRunnerBuffers::copy_routed(int64_t num_tokens, int64_t per_token, cudaStream_t stream) const {
  VOSTI_CHECK(routed_host_.bytes() > 0 && acts().moe.routed != nullptr, "routed experts of a model without MoE layers");
  VOSTI_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(routed_host_.as<void>(), acts().moe.routed,
                                             static_cast<size_t>(num_tokens * per_token) * sizeof(int32_t),
                                             cudaMemcpyDeviceToHost, stream));
  return Status();
}

}  // namespace vosti
