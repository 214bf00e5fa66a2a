// The tensor-parallel split (model/tensor_parallel.h) on the CPU: shard shapes of real configs,
// every weight element held by exactly one rank (or by every rank / every KV replica where the
// split says so), each rank's query heads finding their KV heads locally, the row-parallel
// slices summing to the whole product, and errors that name the numbers.
#include "model/tensor_parallel.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace vosti {
namespace {

ModelConfig config(int64_t vocab, int64_t hidden, int64_t inter, int64_t nh, int64_t nkv, int64_t hd) {
  ModelConfig c;
  c.name = "test-model";
  c.vocab_size = vocab;
  c.hidden_size = hidden;
  c.intermediate_size = inter;
  c.num_layers = 2;
  c.num_heads = nh;
  c.num_kv_heads = nkv;
  c.head_dim = hd;
  return c;
}

ModelConfig llama_70b() { return config(128256, 8192, 28672, 64, 8, 128); }
ModelConfig llama_8b() { return config(128256, 4096, 14336, 32, 8, 128); }

const std::vector<WeightRole> kRoles = {
    WeightRole::kEmbed, WeightRole::kFinalNorm, WeightRole::kLmHead, WeightRole::kAttnNorm, WeightRole::kQ,
    WeightRole::kK,     WeightRole::kV,         WeightRole::kQBias,  WeightRole::kKBias,    WeightRole::kVBias,
    WeightRole::kQNorm, WeightRole::kKNorm,     WeightRole::kO,      WeightRole::kFfnNorm,  WeightRole::kGate,
    WeightRole::kUp,    WeightRole::kDown};

std::vector<TensorParallelShard> shards(const ModelConfig& c, int32_t tp) {
  std::vector<TensorParallelShard> out;
  for (int32_t r = 0; r < tp; ++r) {
    auto s = tensor_parallel_shard(c, tp, r);
    EXPECT_TRUE(s.ok()) << s.status().to_string();
    if (s.ok()) out.push_back(*s);
  }
  return out;
}

TEST(TensorParallelShard, Llama70BAtTwoFourAndEightRanks) {
  const ModelConfig c = llama_70b();
  for (int32_t tp : {1, 2, 4, 8}) {
    for (const TensorParallelShard& s : shards(c, tp)) {
      EXPECT_EQ(s.num_q_heads, 64 / tp);
      EXPECT_EQ(s.num_kv_heads, 8 / tp);
      EXPECT_EQ(s.kv_replicas, 1);
      EXPECT_EQ(s.q_head_begin, s.rank * 64 / tp);
      EXPECT_EQ(s.kv_head_begin, s.rank * 8 / tp);
      EXPECT_EQ(s.ffn_size, 28672 / tp);
      EXPECT_EQ(s.vocab_shard_rows % 8, 0);
      EXPECT_GE(s.vocab_shard_rows * tp, 128256);
      EXPECT_LE(s.vocab_size, s.vocab_shard_rows);
    }
  }
  const auto one = shards(c, 1);
  EXPECT_EQ(one[0].vocab_shard_rows, 128256);  // TP 1: lm_head as the single-GPU deployment pads it
  EXPECT_EQ(one[0].vocab_size, 128256);
  const auto eight = shards(c, 8);
  EXPECT_EQ(eight[0].vocab_shard_rows, 16032);
  EXPECT_EQ(eight[7].vocab_begin, 7 * 16032);
  EXPECT_EQ(eight[7].vocab_size, 128256 - 7 * 16032);
}

TEST(TensorParallelShard, MoreRanksThanKvHeadsReplicateThem) {
  const ModelConfig c = llama_70b();  // 8 KV heads over 16 ranks: each on 2 ranks
  const auto s = shards(c, 16);
  ASSERT_EQ(s.size(), 16u);
  for (const TensorParallelShard& sh : s) {
    EXPECT_EQ(sh.num_kv_heads, 1);
    EXPECT_EQ(sh.kv_replicas, 2);
    EXPECT_EQ(sh.kv_head_begin, sh.rank / 2);
    EXPECT_EQ(sh.num_q_heads, 4);
  }
}

TEST(TensorParallelShard, EachRanksQueryHeadsFindTheirKvHeadsOnThatRank) {
  for (const ModelConfig& c :
       {llama_70b(), llama_8b(), config(256, 128, 512, 12, 4, 32), config(64, 64, 128, 8, 2, 8)}) {
    for (int32_t tp : {1, 2, 4, 8, 16}) {
      if (!check_tensor_parallel(c, tp).ok()) continue;
      for (const TensorParallelShard& s : shards(c, tp)) {
        const int64_t group = c.num_heads / c.num_kv_heads;          // the model's GQA group
        const int64_t local_group = s.num_q_heads / s.num_kv_heads;  // the attention's, on the rank
        for (int64_t j = 0; j < s.num_q_heads; ++j) {
          const int64_t kv = (s.q_head_begin + j) / group;
          EXPECT_EQ(kv, s.kv_head_begin + j / local_group) << c.num_heads << " heads, tp " << tp << ", rank " << s.rank;
        }
      }
    }
  }
}

// How many ranks hold each element of role's tensor, over the group.
std::vector<int> coverage(const ModelConfig& c, int32_t tp, WeightRole role) {
  std::vector<int> count;
  for (const TensorParallelShard& s : shards(c, tp)) {
    const TensorSlice t = tensor_parallel_slice(c, s, role);
    if (count.empty()) count.assign(static_cast<size_t>(t.full_rows * t.full_cols), 0);
    EXPECT_GE(t.row_begin, 0);
    EXPECT_LE(t.row_begin + t.num_rows, t.full_rows);
    EXPECT_LE(t.col_begin + t.num_cols, t.full_cols);
    for (int64_t r = t.row_begin; r < t.row_begin + t.num_rows; ++r)
      for (int64_t k = t.col_begin; k < t.col_begin + t.num_cols; ++k)
        ++count[static_cast<size_t>(r * t.full_cols + k)];
  }
  return count;
}

TEST(TensorParallelSlice, EveryWeightElementIsHeldOnceOrReplicatedAsTheSplitSays) {
  const std::vector<ModelConfig> configs = {config(1000, 64, 256, 8, 8, 8), config(37, 64, 128, 8, 2, 8),
                                            config(32, 64, 64, 16, 4, 4)};
  for (const ModelConfig& c : configs) {
    for (int32_t tp : {1, 2, 4, 8, 16}) {
      if (!check_tensor_parallel(c, tp).ok()) continue;
      const int32_t replicas = shards(c, tp)[0].kv_replicas;
      for (WeightRole role : kRoles) {
        int want = 1;  // split: exactly one rank
        switch (role) {
          case WeightRole::kEmbed:
          case WeightRole::kFinalNorm:
          case WeightRole::kAttnNorm:
          case WeightRole::kFfnNorm:
          case WeightRole::kQNorm:
          case WeightRole::kKNorm:
            want = tp;  // replicated
            break;
          case WeightRole::kK:
          case WeightRole::kV:
          case WeightRole::kKBias:
          case WeightRole::kVBias:
            want = replicas;
            break;
          default:
            break;
        }
        const std::vector<int> n = coverage(c, tp, role);
        ASSERT_FALSE(n.empty());
        for (size_t i = 0; i < n.size(); ++i)
          ASSERT_EQ(n[i], want) << "role " << static_cast<int>(role) << ", tp " << tp << ", element " << i << ", vocab "
                                << c.vocab_size;
      }
    }
  }
}

TEST(TensorParallelSlice, RowParallelSlicesSumToTheWholeProduct) {
  // o: y = W_o a with W_o [hidden, heads * hd]; rank r holds the columns of its heads and the
  // attention output of those heads; small integers make every sum exact in f32.
  const ModelConfig c = config(64, 16, 32, 8, 4, 4);
  std::mt19937 rng(3);
  for (WeightRole role : {WeightRole::kO, WeightRole::kDown}) {
    const int64_t in = role == WeightRole::kO ? c.num_heads * c.head_dim : c.intermediate_size;
    std::vector<float> w(static_cast<size_t>(c.hidden_size * in)), a(static_cast<size_t>(in));
    for (float& v : w) v = static_cast<float>(static_cast<int>(rng() % 9) - 4);
    for (float& v : a) v = static_cast<float>(static_cast<int>(rng() % 9) - 4);
    std::vector<float> whole(static_cast<size_t>(c.hidden_size), 0.0f);
    for (int64_t i = 0; i < c.hidden_size; ++i)
      for (int64_t k = 0; k < in; ++k)
        whole[static_cast<size_t>(i)] += w[static_cast<size_t>(i * in + k)] * a[static_cast<size_t>(k)];
    for (int32_t tp : {2, 4}) {
      std::vector<float> sum(static_cast<size_t>(c.hidden_size), 0.0f);
      for (const TensorParallelShard& s : shards(c, tp)) {
        const TensorSlice t = tensor_parallel_slice(c, s, role);
        const std::vector<float> ws = take_slice(w, t);  // [hidden, num_cols]
        for (int64_t i = 0; i < c.hidden_size; ++i)
          for (int64_t k = 0; k < t.num_cols; ++k)
            sum[static_cast<size_t>(i)] +=
                ws[static_cast<size_t>(i * t.num_cols + k)] * a[static_cast<size_t>(t.col_begin + k)];
      }
      EXPECT_EQ(sum, whole) << "role " << static_cast<int>(role) << ", tp " << tp;
    }
  }
}

TEST(TensorParallelSlice, TakeSliceCopiesRowsAndColumns) {
  std::vector<int> full(6 * 5);
  for (size_t i = 0; i < full.size(); ++i) full[i] = static_cast<int>(i);
  EXPECT_EQ(take_slice(full, TensorSlice{6, 5, 2, 2, 0, 5}),
            (std::vector<int>{10, 11, 12, 13, 14, 15, 16, 17, 18, 19}));
  EXPECT_EQ(take_slice(full, TensorSlice{6, 5, 0, 6, 3, 2}),
            (std::vector<int>{3, 4, 8, 9, 13, 14, 18, 19, 23, 24, 28, 29}));
  EXPECT_EQ(take_slice(full, TensorSlice{6, 5, 0, 6, 0, 5}), full);
}

TEST(TensorParallelShard, IndivisibleShapesAreErrorsNamingTheNumbers) {
  const auto message = [](const ModelConfig& c, int32_t tp) { return check_tensor_parallel(c, tp).to_string(); };
  EXPECT_NE(message(llama_8b(), 3).find("tensor_parallel_size 3 does not divide the 32 attention heads"),
            std::string::npos)
      << message(llama_8b(), 3);
  EXPECT_NE(message(config(64, 64, 128, 12, 4, 8), 6).find("the 4 KV heads"), std::string::npos)
      << message(config(64, 64, 128, 12, 4, 8), 6);
  EXPECT_NE(message(config(64, 64, 100, 8, 8, 8), 8).find("intermediate size 100"), std::string::npos);
  EXPECT_NE(message(llama_8b(), 0).find("at least 1"), std::string::npos);
  EXPECT_FALSE(tensor_parallel_shard(llama_8b(), 2, 2).ok());
  EXPECT_FALSE(tensor_parallel_shard(llama_8b(), 2, -1).ok());
  EXPECT_TRUE(check_tensor_parallel(llama_70b(), 16).ok());  // KV heads replicated
}

}  // namespace
}  // namespace vosti
