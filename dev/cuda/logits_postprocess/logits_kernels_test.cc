// Tests of logits post-processing (src/dev/cuda/logits_postprocess/logits_kernels.h): max and argmax exact
// (ties to the lowest id, NaN as -inf), log_sum and logprobs against an f64 reference, the
// same bits whatever the row's alignment or whether logprobs aliases logits, and bitwise row
// invariance: row r of an m-row call equals the row computed alone, for every m in 1..300
// and samples up to 2048, at rows {0, m/2, m-1}, the other rows freshly drawn.
#include "dev/cuda/logits_postprocess/logits_kernels.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "kernels/cuda/cuda_status.h"
#include "tests/kernels_cuda/cuda_test_util.h"

namespace vosti {
namespace {

using cuda_test::DeviceBuffer;
constexpr float kInf = std::numeric_limits<float>::infinity();

class LogitsKernels : public ::testing::Test {
 protected:
  void SetUp() override { VOSTI_SKIP_WITHOUT_CUDA(); }
};

struct RefStats {
  float max;
  int32_t argmax;
  double log_sum;
};

RefStats reference(const float* row, int64_t vocab) {
  RefStats s{-kInf, 0, 0.0};
  for (int64_t i = 0; i < vocab; ++i) {
    const float x = std::isnan(row[i]) ? -kInf : row[i];
    if (x > s.max || i == 0) s.max = x, s.argmax = static_cast<int32_t>(i);
  }
  double z = 0;
  for (int64_t i = 0; i < vocab; ++i) {
    const float x = std::isnan(row[i]) ? -kInf : row[i];
    z += x == s.max ? 1.0 : std::exp(static_cast<double>(x) - s.max);
  }
  s.log_sum = std::log(z);
  return s;
}

std::vector<LogitsRowStats> run(const DeviceBuffer<float>& logits, size_t offset, int64_t m, int64_t vocab,
                                float* logprobs) {
  DeviceBuffer<LogitsRowStats> stats(static_cast<size_t>(m));
  DeviceBuffer<uint8_t> ws(logits_workspace_bytes(m, vocab));
  const Status s =
      logits_postprocess(logits.get() + offset, m, vocab, stats.get(), logprobs, ws.get(), ws.size(), nullptr);
  EXPECT_TRUE(s.ok()) << s.to_string();
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  return stats.download();
}

TEST_F(LogitsKernels, MatchReferenceIncludingSpecialRows) {
  for (int64_t vocab : {49152, 50257, 128256, 8193, 7, 1}) {
    const int64_t m = 6;
    std::vector<float> host = cuda_test::random_f32(static_cast<size_t>(m * vocab), 40 + vocab, 3.0f);
    float* r1 = host.data() + vocab;  // ties: the max at two ids, a NaN before them
    r1[vocab / 3] = 50.0f;
    r1[vocab - 1] = 50.0f;
    if (vocab > 1) r1[0] = std::numeric_limits<float>::quiet_NaN();
    float* r2 = host.data() + 2 * vocab;  // +inf present (twice)
    r2[vocab / 2] = kInf;
    r2[vocab - 1] = kInf;
    float* r3 = host.data() + 3 * vocab;  // only -inf and NaN
    for (int64_t i = 0; i < vocab; ++i) r3[i] = i % 2 ? -kInf : std::numeric_limits<float>::quiet_NaN();
    float* r4 = host.data() + 4 * vocab;  // -0 and +0 tie at the max
    for (int64_t i = 0; i < vocab; ++i) r4[i] = -1.0f - static_cast<float>(i % 5);
    r4[vocab - 1] = 0.0f;
    r4[vocab / 2] = -0.0f;
    DeviceBuffer<float> logits(host);
    DeviceBuffer<float> logprobs(host.size());
    const std::vector<LogitsRowStats> got = run(logits, 0, m, vocab, logprobs.get());
    const std::vector<float> lp = logprobs.download();
    for (int64_t r = 0; r < m; ++r) {
      const RefStats want = reference(host.data() + r * vocab, vocab);
      SCOPED_TRACE("vocab " + std::to_string(vocab) + " row " + std::to_string(r));
      EXPECT_EQ(got[r].argmax, want.argmax);
      EXPECT_EQ(got[r].max, want.max);
      EXPECT_NEAR(got[r].log_sum, want.log_sum, 2e-6 * std::max(1.0, std::abs(want.log_sum)));
      double worst = 0;
      for (int64_t i = 0; i < vocab; ++i) {
        const float x = std::isnan(host[r * vocab + i]) ? -kInf : host[r * vocab + i];
        const double d = x == want.max ? 0.0 : static_cast<double>(x) - want.max;
        const double ref = d - want.log_sum;
        const float out = lp[r * vocab + i];
        if (std::isinf(ref)) {
          EXPECT_EQ(out, static_cast<float>(ref)) << "id " << i;
          continue;
        }
        ASSERT_FALSE(std::isnan(out)) << "id " << i;
        worst = std::max(worst, std::abs(out - ref) / std::max(1.0, std::abs(ref)));
      }
      EXPECT_LT(worst, 4e-6);
    }
  }
}

TEST_F(LogitsKernels, SameBitsForAnyAlignmentAndInPlace) {
  const int64_t m = 5, vocab = 32000;
  const std::vector<float> host = cuda_test::random_f32(static_cast<size_t>(m * vocab + 1), 41, 4.0f);
  DeviceBuffer<float> aligned(std::vector<float>(host.begin(), host.end() - 1));
  DeviceBuffer<float> shifted(static_cast<size_t>(m * vocab + 1));
  shifted.upload(std::vector<float>(host.begin(), host.end() - 1), 1);  // rows start 4 bytes past 16-byte alignment
  DeviceBuffer<float> lp_aligned(static_cast<size_t>(m * vocab));
  DeviceBuffer<float> lp_shifted(static_cast<size_t>(m * vocab + 1));
  const std::vector<LogitsRowStats> a = run(aligned, 0, m, vocab, lp_aligned.get());
  const std::vector<LogitsRowStats> b = run(shifted, 1, m, vocab, lp_shifted.get() + 1);
  ASSERT_TRUE(cuda_test::same_bits(a.data(), b.data(), sizeof(LogitsRowStats) * m));
  const std::vector<float> lpa = lp_aligned.download(), lpb = lp_shifted.download(1);
  ASSERT_TRUE(cuda_test::same_bits(lpa.data(), lpb.data(), sizeof(float) * lpa.size()));
  // In place: logprobs overwrite the logits they come from.
  const std::vector<LogitsRowStats> c = run(aligned, 0, m, vocab, aligned.get());
  ASSERT_TRUE(cuda_test::same_bits(a.data(), c.data(), sizeof(LogitsRowStats) * m));
  const std::vector<float> lpc = aligned.download();
  ASSERT_TRUE(cuda_test::same_bits(lpa.data(), lpc.data(), sizeof(float) * lpa.size()));
}

TEST_F(LogitsKernels, RowInvariant) {
  const int64_t vocab = 49152, max_m = 2048;
  DeviceBuffer<float> pool(cuda_test::random_f32(static_cast<size_t>((max_m + 61) * vocab), 42, 3.0f));
  DeviceBuffer<float> probe(cuda_test::random_f32(static_cast<size_t>(vocab), 43, 3.0f, 0.5f));
  DeviceBuffer<float> rows(static_cast<size_t>(max_m * vocab));
  DeviceBuffer<float> lp(static_cast<size_t>(max_m * vocab));
  DeviceBuffer<LogitsRowStats> stats(static_cast<size_t>(max_m));
  DeviceBuffer<uint8_t> ws(logits_workspace_bytes(max_m, vocab));
  const size_t row_bytes = sizeof(float) * vocab;
  auto compute = [&](int64_t m, const std::vector<int64_t>& probes, int64_t offset) {
    ASSERT_EQ(cudaMemcpy(rows.get(), pool.get() + offset * vocab, row_bytes * m, cudaMemcpyDeviceToDevice),
              cudaSuccess);
    for (int64_t p : probes)
      ASSERT_EQ(cudaMemcpy(rows.get() + p * vocab, probe.get(), row_bytes, cudaMemcpyDeviceToDevice), cudaSuccess);
    const Status s = logits_postprocess(rows.get(), m, vocab, stats.get(), lp.get(), ws.get(), ws.size(), nullptr);
    ASSERT_TRUE(s.ok()) << s.to_string();
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  };
  compute(1, {0}, 0);
  const std::vector<LogitsRowStats> want_stats = stats.download(0, 1);
  const std::vector<float> want_lp = lp.download(0, static_cast<size_t>(vocab));
  std::vector<int64_t> ms;
  for (int64_t m = 1; m <= 300; ++m) ms.push_back(m);
  for (int64_t m : {511, 1000, 2048}) ms.push_back(m);
  for (int64_t m : ms) {
    const std::vector<int64_t> probes = {0, m / 2, m - 1};
    compute(m, probes, (m * 17) % 61);
    for (int64_t p : probes) {
      const std::vector<LogitsRowStats> s = stats.download(static_cast<size_t>(p), 1);
      const std::vector<float> l = lp.download(static_cast<size_t>(p * vocab), static_cast<size_t>(vocab));
      ASSERT_TRUE(cuda_test::same_bits(s.data(), want_stats.data(), sizeof(LogitsRowStats)))
          << "stats of row " << p << " of m=" << m << " differ from the row computed alone";
      ASSERT_TRUE(cuda_test::same_bits(l.data(), want_lp.data(), row_bytes))
          << "logprobs of row " << p << " of m=" << m << " differ from the row computed alone";
    }
  }
}

TEST_F(LogitsKernels, BadArgumentsAreReported) {
  DeviceBuffer<float> x(16);
  DeviceBuffer<LogitsRowStats> s(4);
  DeviceBuffer<uint8_t> ws(logits_workspace_bytes(4, 16));
  const size_t n = ws.size();
  auto code = [](const Status& st) { return st.code(); };
  EXPECT_EQ(code(logits_postprocess(nullptr, 1, 16, s.get(), nullptr, ws.get(), n, nullptr)),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(code(logits_postprocess(x.get(), 1, 16, nullptr, nullptr, ws.get(), n, nullptr)),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(code(logits_postprocess(x.get(), 1, 0, s.get(), nullptr, ws.get(), n, nullptr)),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(code(logits_postprocess(x.get(), -1, 16, s.get(), nullptr, ws.get(), n, nullptr)),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(code(logits_postprocess(x.get(), 65536, 16, s.get(), nullptr, ws.get(), n, nullptr)),
            StatusCode::kInvalidArgument);
  const Status small = logits_postprocess(x.get(), 4, 16, s.get(), nullptr, ws.get(), n - 1, nullptr);
  EXPECT_EQ(small.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(small.to_string().find("workspace"), std::string::npos) << small.to_string();
  EXPECT_TRUE(logits_postprocess(x.get(), 0, 16, s.get(), nullptr, nullptr, 0, nullptr).ok());
}

}  // namespace
}  // namespace vosti
