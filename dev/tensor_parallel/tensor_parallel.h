// Tensor parallelism's split of a decoder (Megatron-LM's column- and row-parallel layers), as
// pure functions of (ModelConfig, tp_size, rank): which query heads, KV heads, MLP columns and
// vocabulary rows each rank holds, and the slice of every weight that goes with them.
//
//   q, k, v (+ biases)   column-parallel: rank r holds its query heads' rows and its KV heads'
//                        rows; each rank attends with its own heads over its own KV cache;
//   o                    row-parallel: the columns of its query heads; the ranks' partial
//                        outputs [T, hidden] are summed by the all-reduce (rank order, rule 7);
//   gate, up             column-parallel: rows [ffn_begin, ffn_begin + ffn_size) of each;
//   down                 row-parallel: those columns; partials all-reduced like o;
//   lm_head              vocabulary-parallel: rows [vocab_begin, vocab_begin + vocab_size); the
//                        ranks' logits are gathered side by side (no sum: each logit is one
//                        rank's dot product over the whole hidden size);
//   embedding, norms     replicated (q/k norms too: they act per head over head_dim).
// Heads: rank r holds query heads [r nh/N, (r+1) nh/N). KV heads: where N divides nkv, rank r
// holds [r nkv/N, (r+1) nkv/N); where N is a multiple of nkv, each KV head is replicated on N/nkv
// ranks and rank r holds head r / (N/nkv) (as vLLM does). Either way every query head of a rank
// finds its KV head (h / (nh/nkv)) on that rank. The vocabulary is cut into N pieces of
// vocab_shard_rows rows (a multiple of 8, the GEMM's n), the last pieces holding fewer (or no)
// real rows.
// tp_size 1 is one rank holding everything: the slices are the whole tensors.
// Thread safety: pure functions and value types.
#pragma once

#include <cstdint>
#include <cstring>
#include <vector>

#include "core/status.h"
#include "model/model_config.h"
#include "model/model_file.h"

namespace vosti {

// What one rank of a tensor-parallel group holds (header comment).
struct TensorParallelShard {
  int32_t tp_size = 1;
  int32_t rank = 0;
  int64_t q_head_begin = 0, num_q_heads = 0;    // query heads [q_head_begin, + num_q_heads)
  int64_t kv_head_begin = 0, num_kv_heads = 0;  // KV heads [kv_head_begin, + num_kv_heads)
  int32_t kv_replicas = 1;                      // ranks holding each KV head (tp_size / nkv where larger)
  int64_t ffn_begin = 0, ffn_size = 0;          // MLP columns [ffn_begin, + ffn_size)
  int64_t vocab_begin = 0, vocab_size = 0;      // lm_head rows [vocab_begin, + vocab_size), vocab_size may be 0
  int64_t vocab_shard_rows = 0;                 // every rank's piece of the gathered logits (% 8 == 0)
};

// Ok when `config` splits over tp_size ranks. Errors: kInvalidArgument naming the numbers: tp_size
// below 1, query heads or the intermediate size not divisible by tp_size, KV heads neither
// divisible by it nor dividing it.
Status check_tensor_parallel(const ModelConfig& config, int32_t tp_size);

// Rank `rank`'s shard. Errors: check_tensor_parallel's; kInvalidArgument for a rank outside
// [0, tp_size).
Result<TensorParallelShard> tensor_parallel_shard(const ModelConfig& config, int32_t tp_size, int32_t rank);

// The part of one weight a rank holds: rows [row_begin, + num_rows) and columns [col_begin, +
// num_cols) of the Hugging Face tensor [full_rows, full_cols] (a vector is [n, 1]).
struct TensorSlice {
  int64_t full_rows = 0, full_cols = 0;
  int64_t row_begin = 0, num_rows = 0;
  int64_t col_begin = 0, num_cols = 0;
  bool whole() const { return num_rows == full_rows && num_cols == full_cols; }
};

// The slice of `role`'s tensor on `shard` (kLmHead: the vocabulary rows, also where the
// embedding is tied to it; kEmbed: the whole table).
TensorSlice tensor_parallel_slice(const ModelConfig& config, const TensorParallelShard& shard, WeightRole role);

// The slice's values, row-major [num_rows, num_cols], from `full` [full_rows, full_cols].
// REQUIRES: full.size() == full_rows * full_cols.
template <typename T>
std::vector<T> take_slice(const std::vector<T>& full, const TensorSlice& s) {
  if (s.whole()) return full;
  std::vector<T> out(static_cast<size_t>(s.num_rows * s.num_cols));
  for (int64_t r = 0; r < s.num_rows; ++r)
    std::memcpy(out.data() + r * s.num_cols, full.data() + (s.row_begin + r) * s.full_cols + s.col_begin,
                static_cast<size_t>(s.num_cols) * sizeof(T));
  return out;
}

}  // namespace vosti
