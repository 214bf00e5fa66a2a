// Tests of the per-query CUDA paged attention (src/kernels/cuda/attention/attention.h, family 2: the f32
// pools' path and the engine's previous one) and kv_write: accuracy
// against the scalar oracle (kernels/ref) on shuffled physical blocks with grouped-query
// heads, bf16 and f32 pools (the oracle reads the bf16 pool's values), and bitwise invariance: a query computed alone
// equals the same query inside a batch of other sequences' queries, whatever its row, and the bf16 output is the f32
// output rounded once. GPU only (skips with "no CUDA device").
// Bound: both sides are f32 with different orders (fma dot vs rounded products, online
// softmax over 32-position tiles vs two-pass, expf vs the oracle's exp): ~1e-6 relative per
// (query, head) row; 2e-5 leaves head room and any indexing or masking error gives > 1e-2.
#include "kernels/cuda/attention/attention.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>
#include <random>
#include <vector>

#include "kernels/cuda/cuda_status.h"
#include "tests/kernels_cuda/cuda_test_util.h"
#include "tests/model_cuda/attention_reference.h"

namespace vosti {
namespace {

using cuda_test::DeviceBuffer;

struct CacheShape {
  int head_dim = 64;
  int num_heads = 4;
  int num_kv_heads = 2;
  int block_size = 16;
  int num_blocks = 24;
};

// Per query row: its position and sequence; per sequence its block table row.
struct Queries {
  std::vector<int32_t> tables;     // [num_seqs, table_stride]
  std::vector<int32_t> positions;  // [m]
  std::vector<int32_t> row_seq;    // [m]
  int32_t table_stride = 0;
  int64_t m() const { return static_cast<int64_t>(positions.size()); }
};

// The oracle's [num_blocks, block_size, nkv, hd] f32 cache as the pool's [num_blocks, nkv,
// block_size, hd] in `dtype` (values already representable in it).
template <typename T>
std::vector<T> to_pool(const std::vector<float>& nhd, const CacheShape& s, T (*convert)(float)) {
  std::vector<T> out(nhd.size());
  for (int b = 0; b < s.num_blocks; ++b)
    for (int o = 0; o < s.block_size; ++o)
      for (int h = 0; h < s.num_kv_heads; ++h)
        for (int d = 0; d < s.head_dim; ++d) {
          const size_t src = ((static_cast<size_t>(b) * s.block_size + o) * s.num_kv_heads + h) * s.head_dim + d;
          const size_t dst = ((static_cast<size_t>(b) * s.num_kv_heads + h) * s.block_size + o) * s.head_dim + d;
          out[dst] = convert(nhd[src]);
        }
  return out;
}
float keep_f32(float v) { return v; }
uint16_t to_bf16_bits(float v) { return f32_to_bf16(v); }

struct AttentionParam {
  int head_dim;
  DType kv_dtype;
  int window = 0;  // sliding window (0: none)
};

class AttentionCase : public ::testing::TestWithParam<AttentionParam> {};

TEST_P(AttentionCase, MatchesOracleAndIsBatchInvariant) {
  VOSTI_SKIP_WITHOUT_CUDA();
  CacheShape s;
  s.head_dim = GetParam().head_dim;
  const DType kv_dtype = GetParam().kv_dtype;
  const int window = GetParam().window;
  const bool bf16 = kv_dtype == DType::kBF16;
  const int64_t slot_floats = static_cast<int64_t>(s.num_kv_heads) * s.head_dim;
  const int64_t cache_floats = static_cast<int64_t>(s.num_blocks) * s.block_size * slot_floats;
  std::vector<float> k_host = cuda_test::random_f32(static_cast<size_t>(cache_floats), 11 + s.head_dim);
  std::vector<float> v_host = cuda_test::random_f32(static_cast<size_t>(cache_floats), 12 + s.head_dim);
  if (bf16) {  // the oracle reads the values the bf16 pool holds
    for (float& x : k_host) x = bf16_to_f32(f32_to_bf16(x));
    for (float& x : v_host) x = bf16_to_f32(f32_to_bf16(x));
  }

  // Three sequences of lengths 1, 37 and 100 on a shuffled set of physical blocks.
  std::vector<int32_t> blocks(static_cast<size_t>(s.num_blocks));
  std::iota(blocks.begin(), blocks.end(), 0);
  std::mt19937 rng(5);
  std::shuffle(blocks.begin(), blocks.end(), rng);
  const int lengths[] = {1, 37, 100};
  Queries qs;
  qs.table_stride = 8;  // blocks per sequence table (>= ceil(100 / 16))
  size_t next_block = 0;
  for (int si = 0; si < 3; ++si) {
    const int len = lengths[si];
    std::vector<int32_t> table(static_cast<size_t>(qs.table_stride), -1);
    for (int b = 0; b < (len + s.block_size - 1) / s.block_size; ++b)
      table[static_cast<size_t>(b)] = blocks[next_block++];
    qs.tables.insert(qs.tables.end(), table.begin(), table.end());
    for (int p = 0; p < len; ++p) {
      qs.positions.push_back(p);
      qs.row_seq.push_back(si);
    }
  }
  const int64_t m = qs.m();
  const int64_t row = static_cast<int64_t>(s.num_heads) * s.head_dim;
  std::vector<float> q_host = cuda_test::random_f32(static_cast<size_t>(m * row), 13, 0.5f);

  // Oracle.
  auto ref = make_ref_backend();
  PagedKvView host_kv{k_host.data(), v_host.data(), s.num_blocks, s.block_size, s.num_kv_heads, s.head_dim};
  std::vector<AttentionQuery> ref_queries(static_cast<size_t>(m));
  for (int64_t r = 0; r < m; ++r) {
    const int32_t p = qs.positions[static_cast<size_t>(r)];
    ref_queries[static_cast<size_t>(r)] = {qs.tables.data() + qs.row_seq[static_cast<size_t>(r)] * qs.table_stride, p,
                                           attention_window_first(p, window)};
  }
  const float scale = 1.0f / std::sqrt(static_cast<float>(s.head_dim));
  std::vector<float> expected(static_cast<size_t>(m * row));  // [m, row]
  ref->attention(q_host.data(), m, s.num_heads, ref_queries.data(), host_kv, scale, expected.data());

  DeviceBuffer<float> k32(bf16 ? std::vector<float>(1) : to_pool(k_host, s, keep_f32)),
      v32(bf16 ? std::vector<float>(1) : to_pool(v_host, s, keep_f32));
  DeviceBuffer<uint16_t> k16(bf16 ? to_pool(k_host, s, to_bf16_bits) : std::vector<uint16_t>(1)),
      v16(bf16 ? to_pool(v_host, s, to_bf16_bits) : std::vector<uint16_t>(1));
  DeviceBuffer<float> q_dev(q_host);
  DeviceBuffer<int32_t> tables(qs.tables), positions(qs.positions), row_seq(qs.row_seq),
      stride(std::vector<int32_t>{qs.table_stride});
  DeviceBuffer<float> out(static_cast<size_t>(m * row));
  DeviceBuffer<uint16_t> out_bf16(static_cast<size_t>(m * row));
  CudaKvLayer kv{bf16 ? static_cast<void*>(k16.get()) : k32.get(),
                 bf16 ? static_cast<void*>(v16.get()) : v32.get(),
                 kv_dtype,
                 s.num_blocks,
                 s.block_size,
                 s.num_kv_heads,
                 s.head_dim};
  auto run = [&](int64_t first, int64_t count, void* dst, DType dtype, bool reference = false) {
    AttentionArgs a;
    a.q = q_dev.get() + first * row;
    a.q_row_stride = row;
    a.num_heads = s.num_heads;
    a.positions = positions.get() + first;
    a.row_seq = row_seq.get() + first;
    a.block_tables = tables.get();
    a.block_table_stride = stride.get();
    a.scale = scale;
    a.window = window;
    a.out = dst;
    a.out_row_stride = row;
    a.out_dtype = dtype;
    a.m = count;
    a.kernels = cuda_test::attention_kernels(s.head_dim);  // raises the per-query kernels' shared memory
    ASSERT_TRUE(
        (reference ? cuda_test::reference_attention(a, kv, nullptr) : attention_per_query(a, kv, nullptr)).ok());
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  };
  run(0, m, out.get(), DType::kF32);
  run(0, m, out_bf16.get(), DType::kBF16);
  const std::vector<float> batch = out.download();
  const std::vector<uint16_t> batch_bf16 = out_bf16.download();
  // The simple one-warp form of the same order gives the same bits.
  out.poison();
  run(0, m, out.get(), DType::kF32, /*reference=*/true);
  const std::vector<float> simple = out.download();
  ASSERT_TRUE(cuda_test::same_bits(simple.data(), batch.data(), batch.size() * sizeof(float)))
      << "the production attention differs from the one-warp reference";

  double worst = 0;
  for (int64_t r = 0; r < m; ++r) {
    for (int h = 0; h < s.num_heads; ++h) {
      const int64_t off = r * row + static_cast<int64_t>(h) * s.head_dim;
      std::vector<double> e(expected.begin() + off, expected.begin() + off + s.head_dim);
      std::vector<double> o(batch.begin() + off, batch.begin() + off + s.head_dim);
      const double err = cuda_test::relative_error(e, o);
      worst = std::max(worst, err);
      ASSERT_LT(err, 2e-5) << "query " << r << " (position " << qs.positions[static_cast<size_t>(r)] << ") head " << h;
    }
  }
  std::printf(
      "[ attention ] head_dim %d, %s pool, window %d: worst relative error vs the oracle %.3g over %lld queries\n",
      s.head_dim, bf16 ? "bf16" : "f32", window, worst, static_cast<long long>(m));
  for (size_t i = 0; i < batch.size(); ++i) {
    ASSERT_EQ(batch_bf16[i], f32_to_bf16(batch[i])) << "bf16 output is not the f32 output rounded, element " << i;
  }

  // Every query alone (m = 1) and a few sub-batches starting at other rows: identical bits.
  for (int64_t r = 0; r < m; ++r) {
    out.poison();
    run(r, 1, out.get(), DType::kF32);
    const std::vector<float> alone = out.download(0, static_cast<size_t>(row));
    ASSERT_TRUE(cuda_test::same_bits(alone.data(), batch.data() + r * row, static_cast<size_t>(row) * sizeof(float)))
        << "query " << r << " alone differs from the batch";
  }
  for (int64_t first : {int64_t{1}, int64_t{40}, int64_t{77}}) {
    out.poison();
    run(first, m - first, out.get(), DType::kF32);
    const std::vector<float> part = out.download(0, static_cast<size_t>((m - first) * row));
    ASSERT_TRUE(cuda_test::same_bits(part.data(), batch.data() + first * row, part.size() * sizeof(float)))
        << "batch from row " << first;
  }
}

std::string attention_name(const ::testing::TestParamInfo<AttentionParam>& info) {
  return std::to_string(info.param.head_dim) + (info.param.kv_dtype == DType::kBF16 ? "_bf16" : "_f32") +
         (info.param.window > 0 ? "_window" + std::to_string(info.param.window) : "");
}

INSTANTIATE_TEST_SUITE_P(HeadDims, AttentionCase,
                         ::testing::Values(AttentionParam{16, DType::kBF16}, AttentionParam{64, DType::kBF16},
                                           AttentionParam{128, DType::kBF16}, AttentionParam{256, DType::kBF16},
                                           AttentionParam{64, DType::kF32}, AttentionParam{128, DType::kF32},
                                           AttentionParam{64, DType::kF32, 40}, AttentionParam{128, DType::kBF16, 33}),
                         attention_name);

TEST(KvWrite, WritesSlotsRoundedAndSkipsPaddingAndOutOfPool) {
  VOSTI_SKIP_WITHOUT_CUDA();
  const int nkv = 2, hd = 8, block_size = 4, num_blocks = 3;
  const int64_t slot_floats = nkv * hd, stride = 3 * slot_floats;  // rows as in a qkv buffer
  const int64_t cache = num_blocks * block_size * slot_floats;
  std::vector<float> rows = cuda_test::random_f32(static_cast<size_t>(4 * stride), 3);
  const std::vector<int32_t> slots = {5, -1, 11, 12};  // 12 is outside the pool (12 slots)
  DeviceBuffer<float> src(rows);
  DeviceBuffer<int32_t> slot_dev(slots);
  // Where (slot, head, d) lives in the pool: [block, head, offset, d].
  const auto at = [&](int64_t slot, int h, int d) {
    return static_cast<size_t>(((slot / block_size * nkv + h) * block_size + slot % block_size) * hd + d);
  };
  for (const DType dtype : {DType::kF32, DType::kBF16}) {
    const bool bf16 = dtype == DType::kBF16;
    DeviceBuffer<float> k32(std::vector<float>(static_cast<size_t>(cache), 0.f)),
        v32(std::vector<float>(static_cast<size_t>(cache), 0.f));
    DeviceBuffer<uint16_t> k16(std::vector<uint16_t>(static_cast<size_t>(cache), 0)),
        v16(std::vector<uint16_t>(static_cast<size_t>(cache), 0));
    CudaKvLayer kv{bf16 ? static_cast<void*>(k16.get()) : k32.get(),
                   bf16 ? static_cast<void*>(v16.get()) : v32.get(),
                   dtype,
                   num_blocks,
                   block_size,
                   nkv,
                   hd};
    ASSERT_TRUE(kv_write(src.get(), src.get() + slot_floats, stride, 4, slot_dev.get(), kv, nullptr).ok());
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    std::vector<float> k_expect(static_cast<size_t>(cache), 0.f), v_expect(static_cast<size_t>(cache), 0.f);
    for (int r : {0, 2}) {
      const int64_t slot = slots[static_cast<size_t>(r)];
      for (int h = 0; h < nkv; ++h)
        for (int d = 0; d < hd; ++d) {
          const float kx = rows[static_cast<size_t>(r * stride + h * hd + d)];
          const float vx = rows[static_cast<size_t>(r * stride + slot_floats + h * hd + d)];
          k_expect[at(slot, h, d)] = bf16 ? bf16_to_f32(f32_to_bf16(kx)) : kx;
          v_expect[at(slot, h, d)] = bf16 ? bf16_to_f32(f32_to_bf16(vx)) : vx;
        }
    }
    std::vector<float> kh, vh;
    if (bf16) {
      for (uint16_t b : k16.download()) kh.push_back(bf16_to_f32(b));
      for (uint16_t b : v16.download()) vh.push_back(bf16_to_f32(b));
    } else {
      kh = k32.download();
      vh = v32.download();
    }
    EXPECT_EQ(kh, k_expect) << (bf16 ? "bf16" : "f32");
    EXPECT_EQ(vh, v_expect) << (bf16 ? "bf16" : "f32");
  }
}

TEST(AttentionErrors, BadShapesAreNamed) {
  VOSTI_SKIP_WITHOUT_CUDA();
  DeviceBuffer<float> buf(4096), out(64);
  DeviceBuffer<int32_t> ints(64);  // 0xFF bytes: position -1, which gives NaN rows without reading the cache
  CudaKvLayer kv{buf.get(), buf.get(), DType::kF32, 4, 4, 2, 16};
  AttentionArgs a;
  a.q = buf.get();
  a.q_row_stride = 64;
  a.num_heads = 4;
  a.positions = ints.get();
  a.row_seq = ints.get();
  a.block_tables = ints.get();
  a.block_table_stride = ints.get();
  a.out = out.get();
  a.out_row_stride = 64;
  a.m = 1;
  EXPECT_TRUE(attention(a, kv, nullptr).ok());
  AttentionArgs bad = a;
  bad.num_heads = 3;
  EXPECT_EQ(attention(bad, kv, nullptr).code(), StatusCode::kInvalidArgument);
  bad = a;
  bad.q_row_stride = 63;
  EXPECT_EQ(attention(bad, kv, nullptr).code(), StatusCode::kInvalidArgument);
  bad = a;
  bad.out_dtype = DType::kF16;
  EXPECT_EQ(attention(bad, kv, nullptr).code(), StatusCode::kInvalidArgument);
  bad = a;
  bad.positions = nullptr;
  EXPECT_EQ(attention(bad, kv, nullptr).code(), StatusCode::kInvalidArgument);
  bad = a;
  bad.block_table_stride = nullptr;
  EXPECT_EQ(attention(bad, kv, nullptr).code(), StatusCode::kInvalidArgument);
  CudaKvLayer odd = kv;
  odd.head_dim = 6;
  const Status s = attention(a, odd, nullptr);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("head_dim 6"), std::string::npos) << s.to_string();
  CudaKvLayer f16 = kv;
  f16.dtype = DType::kF16;
  EXPECT_EQ(attention(a, f16, nullptr).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(kv_write(buf.get(), buf.get(), 16, 1, nullptr, kv, nullptr).code(), StatusCode::kInvalidArgument);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
}

}  // namespace
}  // namespace vosti
