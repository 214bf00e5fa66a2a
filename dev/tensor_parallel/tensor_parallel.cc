// The tensor-parallel split: shard bounds and weight slices (tensor_parallel.h).
#include "model/tensor_parallel.h"

#include <algorithm>
#include <string>

namespace vosti {
namespace {

int64_t round_up(int64_t v, int64_t multiple) { return (v + multiple - 1) / multiple * multiple; }

std::string n_of(const ModelConfig& c) { return c.name.empty() ? std::string("the model") : c.name; }

}  // namespace

Status check_tensor_parallel(const ModelConfig& c, int32_t tp) {
  const std::string size = "tensor_parallel_size " + std::to_string(tp);
  if (tp < 1) return invalid_argument(size + " must be at least 1");
  if (c.num_heads % tp != 0) {
    return invalid_argument(size + " does not divide the " + std::to_string(c.num_heads) + " attention heads of " +
                            n_of(c) + " (each rank holds whole heads)");
  }
  if (c.num_kv_heads % tp != 0 && tp % c.num_kv_heads != 0) {
    return invalid_argument(size + " neither divides nor is a multiple of the " + std::to_string(c.num_kv_heads) +
                            " KV heads of " + n_of(c) + " (KV heads are split, or replicated on tp_size / " +
                            std::to_string(c.num_kv_heads) + " ranks each)");
  }
  if (c.intermediate_size % tp != 0) {
    return invalid_argument(size + " does not divide the MLP's intermediate size " +
                            std::to_string(c.intermediate_size) + " of " + n_of(c));
  }
  return Status();
}

Result<TensorParallelShard> tensor_parallel_shard(const ModelConfig& c, int32_t tp, int32_t rank) {
  VOSTI_RETURN_IF_ERROR(check_tensor_parallel(c, tp));
  if (rank < 0 || rank >= tp) {
    return invalid_argument("rank " + std::to_string(rank) + " outside the tensor-parallel group of " +
                            std::to_string(tp));
  }
  TensorParallelShard s;
  s.tp_size = tp;
  s.rank = rank;
  s.num_q_heads = c.num_heads / tp;
  s.q_head_begin = rank * s.num_q_heads;
  if (c.num_kv_heads % tp == 0) {
    s.num_kv_heads = c.num_kv_heads / tp;
    s.kv_head_begin = rank * s.num_kv_heads;
  } else {
    s.kv_replicas = static_cast<int32_t>(tp / c.num_kv_heads);
    s.num_kv_heads = 1;
    s.kv_head_begin = rank / s.kv_replicas;
  }
  s.ffn_size = c.intermediate_size / tp;
  s.ffn_begin = rank * s.ffn_size;
  s.vocab_shard_rows = round_up((c.vocab_size + tp - 1) / tp, 8);
  s.vocab_begin = std::min<int64_t>(c.vocab_size, rank * s.vocab_shard_rows);
  s.vocab_size = std::min<int64_t>(c.vocab_size, s.vocab_begin + s.vocab_shard_rows) - s.vocab_begin;
  return s;
}

TensorSlice tensor_parallel_slice(const ModelConfig& c, const TensorParallelShard& s, WeightRole role) {
  const int64_t H = c.hidden_size, hd = c.head_dim, I = c.intermediate_size;
  const int64_t q_rows = c.num_heads * hd, kv_rows = c.num_kv_heads * hd;
  const auto rows = [](int64_t full_rows, int64_t full_cols, int64_t begin, int64_t n) {
    return TensorSlice{full_rows, full_cols, begin, n, 0, full_cols};
  };
  const auto cols = [](int64_t full_rows, int64_t full_cols, int64_t begin, int64_t n) {
    return TensorSlice{full_rows, full_cols, 0, full_rows, begin, n};
  };
  const auto whole = [](int64_t full_rows, int64_t full_cols) {
    return TensorSlice{full_rows, full_cols, 0, full_rows, 0, full_cols};
  };
  switch (role) {
    case WeightRole::kEmbed:
      return whole(c.vocab_size, H);
    case WeightRole::kLmHead:
      return rows(c.vocab_size, H, s.vocab_begin, s.vocab_size);
    case WeightRole::kFinalNorm:
    case WeightRole::kAttnNorm:
    case WeightRole::kFfnNorm:
      return whole(H, 1);
    case WeightRole::kQNorm:
    case WeightRole::kKNorm:
      return whole(hd, 1);
    case WeightRole::kQ:
      return rows(q_rows, H, s.q_head_begin * hd, s.num_q_heads * hd);
    case WeightRole::kK:
    case WeightRole::kV:
      return rows(kv_rows, H, s.kv_head_begin * hd, s.num_kv_heads * hd);
    case WeightRole::kQBias:
      return rows(q_rows, 1, s.q_head_begin * hd, s.num_q_heads * hd);
    case WeightRole::kKBias:
    case WeightRole::kVBias:
      return rows(kv_rows, 1, s.kv_head_begin * hd, s.num_kv_heads * hd);
    case WeightRole::kO:
      return cols(H, q_rows, s.q_head_begin * hd, s.num_q_heads * hd);
    case WeightRole::kGate:
    case WeightRole::kUp:
      return rows(I, H, s.ffn_begin, s.ffn_size);
    case WeightRole::kDown:
      return cols(H, I, s.ffn_begin, s.ffn_size);
  }
  return whole(0, 0);
}

}  // namespace vosti
