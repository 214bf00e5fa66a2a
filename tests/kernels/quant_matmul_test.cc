// The CPU matmul on stored weight encodings (kernels/cpu/matmul_avx2.h, quant_avx2.h), bit
// for bit (memcmp, zero tolerance):
// - the in-register decoders give exactly the loader's f32 values (io/dequant.h, itself
//   checked against gguf-py) on tests/io/data/dequant.gguf, every type, every code;
// - y = x w^T computed from the encoded rows equals the documented order (lane-8 dot,
//   then + bias) on the same matrix dequantised to f32, for every type, every row count 1..12 and 33, 1-3 threads, with
//   and without bias, and with the rows split into parts of different encodings;
// - a row's output never depends on the other rows (batch invariance), every type;
// - the ref backend computes from encoded rows what it computes from their f32 values.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "core/quant_blocks.h"
#include "core/thread_pool.h"
#include "io/dequant.h"
#include "io/gguf.h"
#include "kernels/cpu/matmul_avx2.h"
#include "kernels/cpu/quant_avx2.h"
#include "kernels/cpu/simd_avx2.h"
#include "kernels/kernel_backend.h"
#include "tests/kernels/kernel_test_util.h"
#include "tests/model/quant_models.h"

namespace vosti {
namespace {

std::string type_name(WeightType t) { return std::string(weight_type_traits(static_cast<uint32_t>(t))->name); }

bool same_value(float a, float b) {
  return (std::isnan(a) && std::isnan(b)) || std::memcmp(&a, &b, sizeof(float)) == 0;
}

TEST(QuantDecode, InRegisterDecodersMatchTheLoaderOnEveryCode) {
  auto file = GgufFile::open(testing::fixture("dequant.gguf"));
  ASSERT_TRUE(file.ok()) << file.status().to_string();
  for (WeightType type : testing::loadable_weight_types()) {
    auto q = file->tensor(type_name(type) + ".q");
    ASSERT_TRUE(q.ok()) << type_name(type);
    const int64_t rows = q->shape[0], k = q->shape[1];
    std::vector<float> want(static_cast<size_t>(rows * k)), got(want.size());
    ASSERT_TRUE(dequantize(type, q->data, q->num_bytes, want.data(), rows * k).ok());
    const int64_t rb = row_bytes(type, k);
    for (int64_t r = 0; r < rows; ++r) {
      const bool known = avx2::with_codec(
          type, [&]<typename Codec>() { avx2::decode_row<Codec>(q->data + r * rb, k, got.data() + r * k); });
      ASSERT_TRUE(known) << type_name(type);
    }
    for (size_t i = 0; i < want.size(); ++i)
      ASSERT_TRUE(same_value(got[i], want[i]))
          << type_name(type) << " element " << i << ": " << got[i] << " vs " << want[i];
  }
}

// n encoded rows of k values of `type`, their f32 decoding, and the matrix views.
struct EncodedMatrix {
  std::string bytes;
  std::vector<float> f32;  // [n, k]
  std::vector<const uint8_t*> rows;
  std::vector<WeightRows> parts;
  WeightMatrix matrix;

  EncodedMatrix(const std::vector<WeightType>& types, int64_t rows_per_part, int64_t k, uint64_t seed) {
    testing::SplitMix64 rng(seed);
    std::vector<size_t> offsets;
    for (WeightType t : types) {
      offsets.push_back(bytes.size());
      bytes += testing::random_weight_bytes(t, rows_per_part, k, rng);
    }
    const int64_t n = rows_per_part * static_cast<int64_t>(types.size());
    f32.resize(static_cast<size_t>(n * k));
    for (size_t p = 0; p < types.size(); ++p) {
      const auto* base = reinterpret_cast<const uint8_t*>(bytes.data()) + offsets[p];
      const int64_t rb = row_bytes(types[p], k);
      for (int64_t r = 0; r < rows_per_part; ++r) rows.push_back(base + r * rb);
      decode_values(types[p], base, rows_per_part * k, f32.data() + static_cast<int64_t>(p) * rows_per_part * k);
    }
    for (size_t p = 0; p < types.size(); ++p)
      parts.push_back(WeightRows{types[p], rows_per_part, rows.data() + static_cast<int64_t>(p) * rows_per_part});
    matrix = WeightMatrix{n, k, parts.data(), static_cast<int>(parts.size())};
  }
};

void expect_encoded_equals_f32(const std::vector<WeightType>& types, int64_t rows_per_part, int64_t k,
                               const std::string& what) {
  const EncodedMatrix w(types, rows_per_part, k, 5);
  const int64_t n = w.matrix.n;
  const auto bias = testing::random_floats(static_cast<size_t>(n), 9);
  for (int threads : {1, 2, 3}) {
    ThreadPool pool(threads);
    auto cpu = make_cpu_backend(&pool);
    for (int64_t m : {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 33}) {
      const auto x = testing::random_floats(static_cast<size_t>(m * k), 100 + static_cast<uint64_t>(m), -2, 2);
      for (const float* b : {static_cast<const float*>(nullptr), bias.data()}) {
        std::vector<float> y_enc(static_cast<size_t>(m * n)), y_f32(y_enc.size());
        cpu->matmul(x.data(), m, w.matrix, b, y_enc.data());
        // The documented order on the f32 values: lane-8 dot, then + bias.
        for (int64_t r = 0; r < m; ++r) {
          for (int64_t c = 0; c < n; ++c) {
            float s = avx2::dot_lane8(x.data() + r * k, w.f32.data() + c * k, k);
            if (b != nullptr) s += b[c];
            y_f32[static_cast<size_t>(r * n + c)] = s;
          }
        }
        ASSERT_TRUE(testing::bits_equal(y_enc.data(), y_f32.data(), y_enc.size()))
            << what << ": m=" << m << " threads=" << threads << (b ? " with bias" : "");
      }
    }
  }
}

class QuantMatmul : public ::testing::TestWithParam<WeightType> {};

TEST_P(QuantMatmul, EncodedRowsGiveTheBitsOfTheirF32Values) {
  const WeightType t = GetParam();
  // k = 512: two K-quant blocks, 16 legacy blocks; 100 rows: 3 chunks, a partial one.
  expect_encoded_equals_f32({t}, 100, 512, type_name(t));
  // Plain types also run with a k that leaves a tail after the 8-lane groups.
  if (block_layout(t).elems == 1) expect_encoded_equals_f32({t}, 61, 77, type_name(t) + " k=77");
}

// Both builds of the one-row kernel (AVX2 always; AVX-512VL where the CPU has it, which the
// backend then prefers) against the documented order, every code of every type.
TEST_P(QuantMatmul, OneRowKernelsOfEveryIsaGiveTheDocumentedBits) {
  const WeightType t = GetParam();
  const int64_t k = block_layout(t).elems == 1 ? 77 : 512, n = 37;
  const EncodedMatrix w({t}, n, k, 8);
  const auto x = testing::random_floats(static_cast<size_t>(k), 4, -2, 2);
  const auto bias = testing::random_floats(static_cast<size_t>(n), 10);
  std::vector<float> want(static_cast<size_t>(n));
  for (int64_t c = 0; c < n; ++c)
    want[static_cast<size_t>(c)] = avx2::dot_lane8(x.data(), w.f32.data() + c * k, k) + bias[static_cast<size_t>(c)];
  std::vector<float> got(static_cast<size_t>(n));
  matmul_row_columns_avx2(x.data(), k, w.parts[0], bias.data(), got.data(), 0, n);
  EXPECT_TRUE(testing::bits_equal(got.data(), want.data(), got.size())) << type_name(t) << " AVX2";
  if (!cpu_has_avx512_rows()) GTEST_SKIP() << "no AVX-512VL here: only the AVX2 build was checked";
  std::fill(got.begin(), got.end(), 0.0f);
  matmul_row_columns_avx512(x.data(), k, w.parts[0], bias.data(), got.data(), 0, n);
  EXPECT_TRUE(testing::bits_equal(got.data(), want.data(), got.size())) << type_name(t) << " AVX-512VL";
}

// The row counts of BatchInvariance.MatmulRowIsIndependentOfBatchAndThreads (1..70), for
// every encoding: row r of an m-row call equals the row alone, whatever the other rows.
TEST_P(QuantMatmul, RowIsIndependentOfTheBatch) {
  const WeightType t = GetParam();
  const int64_t k = 256, n = 70;
  const EncodedMatrix w({t}, n, k, 6);
  const auto target = testing::random_floats(static_cast<size_t>(k), 12);
  ThreadPool one(1);
  auto alone = make_cpu_backend(&one);
  std::vector<float> y_alone(static_cast<size_t>(n));
  alone->matmul(target.data(), 1, w.matrix, nullptr, y_alone.data());
  for (int threads : {2, 3}) {
    ThreadPool pool(threads);
    auto batched = make_cpu_backend(&pool);
    for (int64_t m = 2; m <= 70; ++m) {
      for (int64_t r : {int64_t{0}, m - 1, m / 2}) {
        auto x = testing::random_floats(static_cast<size_t>(m * k), 1000 + static_cast<uint64_t>(m * 10 + r));
        std::copy(target.begin(), target.end(), x.begin() + r * k);
        std::vector<float> y(static_cast<size_t>(m * n));
        batched->matmul(x.data(), m, w.matrix, nullptr, y.data());
        EXPECT_TRUE(testing::bits_equal(y.data() + r * n, y_alone.data(), static_cast<size_t>(n)))
            << type_name(t) << " m=" << m << " r=" << r << " threads=" << threads;
      }
    }
  }
}

TEST_P(QuantMatmul, RefBackendComputesFromTheDecodedValues) {
  const WeightType t = GetParam();
  const EncodedMatrix w({t}, 20, 256, 7);
  const auto x = testing::random_floats(3 * 256, 3);
  auto ref = make_ref_backend();
  std::vector<float> y_enc(3 * 20), y_f32(y_enc.size());
  ref->matmul(x.data(), 3, w.matrix, nullptr, y_enc.data());
  ref->matmul(x.data(), 3, 256, w.f32.data(), 20, nullptr, y_f32.data());
  EXPECT_TRUE(testing::bits_equal(y_enc.data(), y_f32.data(), y_enc.size())) << type_name(t);
}

INSTANTIATE_TEST_SUITE_P(EveryType, QuantMatmul, ::testing::ValuesIn(testing::loadable_weight_types()),
                         [](const auto& info) { return type_name(info.param); });

TEST(QuantMatmul, PartsOfDifferentEncodingsStackLikeOneMatrix) {
  // q, k, v of a Q4_K_M file: Q4_K, Q4_K, Q6_K; and a mix of every block size.
  expect_encoded_equals_f32({WeightType::kQ4_K, WeightType::kQ4_K, WeightType::kQ6_K}, 50, 512, "Q4_K+Q4_K+Q6_K");
  expect_encoded_equals_f32({WeightType::kQ8_0, WeightType::kF16, WeightType::kQ5_1, WeightType::kBF16}, 37, 256,
                            "Q8_0+F16+Q5_1+BF16");
}

}  // namespace
}  // namespace vosti
