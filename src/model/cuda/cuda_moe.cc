// CudaModel's mixture-of-experts layers: the router and the experts' stacked matrices uploaded
// (cuda_model.h, padding), and the MoE MLP of one layer (kernels/cuda/moe/moe_kernels.h, its order).
#include <cstring>
#include <string>
#include <vector>

#include "kernels/cuda/cuda_status.h"
#include "kernels/cuda/rows/row_kernels.h"
#include "model/cuda/cuda_model.h"
#include "model/cuda/cuda_model_source.h"

namespace vosti {
namespace {

// Copies src [rows, cols] (bf16) into dst [.., dst_cols] from row dst_row0.
void put_rows(const std::vector<uint16_t>& src, int64_t rows, int64_t cols, std::vector<uint16_t>& dst,
              int64_t dst_row0, int64_t dst_cols) {
  for (int64_t r = 0; r < rows; ++r)
    std::memcpy(dst.data() + static_cast<size_t>((dst_row0 + r) * dst_cols), src.data() + r * cols,
                static_cast<size_t>(cols) * sizeof(uint16_t));
}

Status check_size(const std::vector<uint16_t>& v, int64_t rows, int64_t cols, const std::string& what) {
  if (static_cast<int64_t>(v.size()) == rows * cols) return Status();
  return invalid_argument(what + ": " + std::to_string(v.size()) + " values, expected [" + std::to_string(rows) + ", " +
                          std::to_string(cols) + "]");
}

}  // namespace

// Layer li's router [router_rows, H] (zero rows after the experts'), every expert's gate_up
// [2 * moe_width, H] (gate rows, zero rows, up rows, zero rows) and down [H, moe_width] (zero
// columns after the intermediate), stacked in expert order, one expert at a time.
Status CudaModel::upload_moe_layer(const Source& src, int64_t li) {
  const MoeSpec& m = config_.layers[static_cast<size_t>(li)].moe;
  const int64_t H = config_.hidden_size, E = m.num_experts, I = m.intermediate_size, W = dims_.moe_width;
  CudaMoeWeights& M = layers_[static_cast<size_t>(li)].moe;
  const std::string name = "layer " + std::to_string(li) + " ";
  {
    std::vector<uint16_t> router(static_cast<size_t>(dims_.router_rows * H), 0);  // [router_rows, H]
    VOSTI_ASSIGN_OR_RETURN(std::vector<uint16_t> r, src.bf16(WeightRole::kRouter, li, -1));
    VOSTI_RETURN_IF_ERROR(check_size(r, E, H, name + "router"));
    put_rows(r, E, H, router, 0, H);
    VOSTI_ASSIGN_OR_RETURN(M.router, upload_gemm(router, nullptr, dims_.router_rows, H, name + "router"));
  }
  VOSTI_ASSIGN_OR_RETURN(M.gate_up_schedule, select_moe_gemm_schedule(2 * W, H));
  VOSTI_ASSIGN_OR_RETURN(M.down_schedule, select_moe_gemm_schedule(H, W));
  const size_t gu_elems = static_cast<size_t>(2 * W * H), down_elems = static_cast<size_t>(H * W);
  VOSTI_ASSIGN_OR_RETURN(M.gate_up,
                         DeviceMemory::allocate(static_cast<size_t>(E) * gu_elems * 2, name + "experts' gate_up"));
  VOSTI_ASSIGN_OR_RETURN(M.down,
                         DeviceMemory::allocate(static_cast<size_t>(E) * down_elems * 2, name + "experts' down"));
  num_weight_bytes_ += M.gate_up.bytes() + M.down.bytes();
  std::vector<uint16_t> gu(gu_elems), down(down_elems);  // [2W, H], [H, W]
  for (int64_t e = 0; e < E; ++e) {
    const std::string what = name + "expert " + std::to_string(e);
    std::fill(gu.begin(), gu.end(), uint16_t{0});
    std::fill(down.begin(), down.end(), uint16_t{0});
    VOSTI_ASSIGN_OR_RETURN(std::vector<uint16_t> gate, src.bf16(WeightRole::kExpertGate, li, e));
    VOSTI_RETURN_IF_ERROR(check_size(gate, I, H, what + " gate"));
    put_rows(gate, I, H, gu, 0, H);
    VOSTI_ASSIGN_OR_RETURN(std::vector<uint16_t> up, src.bf16(WeightRole::kExpertUp, li, e));
    VOSTI_RETURN_IF_ERROR(check_size(up, I, H, what + " up"));
    put_rows(up, I, H, gu, W, H);
    VOSTI_ASSIGN_OR_RETURN(std::vector<uint16_t> d, src.bf16(WeightRole::kExpertDown, li, e));
    VOSTI_RETURN_IF_ERROR(check_size(d, H, I, what + " down"));
    for (int64_t r = 0; r < H; ++r)
      std::memcpy(down.data() + r * W, d.data() + r * I, static_cast<size_t>(I) * sizeof(uint16_t));
    VOSTI_CUDA_RETURN_IF_ERROR(cudaMemcpy(M.gate_up.as<uint16_t>() + static_cast<size_t>(e) * gu_elems, gu.data(),
                                          gu_elems * 2, cudaMemcpyHostToDevice));
    VOSTI_CUDA_RETURN_IF_ERROR(cudaMemcpy(M.down.as<uint16_t>() + static_cast<size_t>(e) * down_elems, down.data(),
                                          down_elems * 2, cudaMemcpyHostToDevice));
  }
  return Status();
}

// proj [T, H] = layer li's mixture of experts of the normed rows h (moe_kernels.h, steps 0-6).
Status CudaModel::run_moe(int64_t li, int64_t T, const CudaActivations& a, cudaStream_t stream) const {
  const LayerSpec& spec = config_.layers[static_cast<size_t>(li)];
  const MoeSpec& m = spec.moe;
  const CudaMoeWeights& M = layers_[static_cast<size_t>(li)].moe;
  const CudaMoeActivations& b = a.moe;
  const int64_t H = config_.hidden_size, k = m.top_k, P = T * k;
  if (b.logits == nullptr)
    return invalid_argument("CudaModel::forward: an MoE model's activations without their MoE buffers");
  VOSTI_RETURN_IF_ERROR(gemm(M.router, a.h, T, b.logits, a.row_capacity, a, stream));
  MoeRouteArgs r;
  r.logits = b.logits;
  r.ld = dims_.router_rows;
  r.num_tokens = T;
  r.num_experts = static_cast<int>(m.num_experts);
  r.top_k = static_cast<int>(k);
  r.norm_topk_prob = m.norm_topk_prob;
  r.experts = b.experts;
  r.weights = b.weights;
  r.routed = b.routed;
  r.routed_stride = num_moe_layers_ * k;
  r.routed_offset = layer_moe_[static_cast<size_t>(li)] * k;
  VOSTI_RETURN_IF_ERROR(moe_route(r, stream));
  MoePermuteArgs p;
  p.experts = b.experts;
  p.num_entries = P;
  p.top_k = static_cast<int>(k);
  p.num_experts = static_cast<int>(m.num_experts);
  p.block_m = M.gate_up_schedule.block_m;
  p.pos = b.pos;
  p.src_token = b.src_token;
  p.tiles = b.tiles;
  p.num_tiles = b.num_tiles;
  p.max_tiles = b.max_tiles;
  VOSTI_RETURN_IF_ERROR(moe_permute(p, stream));
  VOSTI_RETURN_IF_ERROR(moe_gather(a.h, b.src_token, P, H, b.x, stream));
  MoeGroupedGemmArgs g;
  g.x = b.x;
  g.w = M.gate_up.as<uint16_t>();
  g.y = b.gate_up;
  g.out_dtype = DType::kF32;
  g.tiles = b.tiles;
  g.num_tiles = b.num_tiles;
  g.max_tiles = moe_max_tiles(P, m.num_experts, M.gate_up_schedule.block_m);
  g.scratch_row = P;
  VOSTI_RETURN_IF_ERROR(moe_grouped_gemm(M.gate_up_schedule, g, stream));
  VOSTI_RETURN_IF_ERROR(gated_mul(spec.activation, b.gate_up, P, dims_.moe_width, b.act, DType::kBF16, stream));
  g.x = b.act;
  g.w = M.down.as<uint16_t>();
  g.y = b.y;
  VOSTI_RETURN_IF_ERROR(moe_grouped_gemm(M.down_schedule, g, stream));
  return moe_combine(b.y, b.pos, b.weights, T, static_cast<int>(k), H, a.proj, stream);
}

}  // namespace vosti
