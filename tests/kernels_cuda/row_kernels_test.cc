// Tests of the row-wise CUDA kernels (src/kernels/cuda/rows/row_kernels.h): accuracy against
// f64 CPU references (exact where the op is one IEEE operation per element), and bitwise
// row invariance: row r of an m-row call equals the row computed alone, for every m in
// 1..300 and samples up to 4096, at rows {0, m/2, m-1}, other rows freshly drawn.
#include "kernels/cuda/rows/row_kernels.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <set>
#include <vector>

#include "kernels/cuda/cuda_status.h"
#include "kernels/ref/scalar_math.h"
#include "tests/kernels_cuda/cuda_test_util.h"

namespace vosti {
namespace {

using cuda_test::DeviceBuffer;

// Runs one op over m rows in place or into `out`; `probes` are the rows holding the probe input.
using RowOp = std::function<Status(float* rows, int64_t m, const std::set<int64_t>& probes, uint8_t* out)>;

std::vector<int64_t> invariance_ms() {
  std::vector<int64_t> ms;
  for (int64_t m = 1; m <= 300; ++m) ms.push_back(m);
  for (int64_t m : {511, 1000, 4096}) ms.push_back(m);
  return ms;
}

// in_width floats of input per row; out_row_bytes per output row (0: the op works in place on rows).
void check_row_invariance(int64_t in_width, size_t out_row_bytes, const RowOp& op, uint64_t seed) {
  const std::vector<int64_t> ms = invariance_ms();
  const int64_t max_m = 4096;
  const size_t in_row_bytes = static_cast<size_t>(in_width) * sizeof(float);
  const size_t row_bytes = out_row_bytes == 0 ? in_row_bytes : out_row_bytes;
  DeviceBuffer<float> pool(cuda_test::random_f32(static_cast<size_t>((max_m + 61) * in_width), seed, 2.0f, 0.3f));
  DeviceBuffer<float> probe(cuda_test::random_f32(static_cast<size_t>(in_width), seed + 1, 2.0f, -0.2f));
  DeviceBuffer<float> rows(static_cast<size_t>(max_m * in_width));
  DeviceBuffer<uint8_t> out(static_cast<size_t>(max_m) * row_bytes + 1);
  auto run = [&](int64_t m, const std::set<int64_t>& probes, int64_t offset) -> Status {
    if (cudaMemcpy(rows.get(), pool.get() + offset * in_width, in_row_bytes * m, cudaMemcpyDeviceToDevice) !=
        cudaSuccess) {
      return internal_error("copy");
    }
    for (int64_t p : probes) {
      if (cudaMemcpy(rows.get() + p * in_width, probe.get(), in_row_bytes, cudaMemcpyDeviceToDevice) != cudaSuccess) {
        return internal_error("copy");
      }
    }
    const Status s = op(rows.get(), m, probes, out.get());
    if (!s.ok()) return s;
    return cuda_status(cudaDeviceSynchronize(), "row op");
  };
  auto row_of = [&](int64_t p) {
    if (out_row_bytes == 0) {
      std::vector<float> v = rows.download(static_cast<size_t>(p * in_width), static_cast<size_t>(in_width));
      std::vector<uint8_t> b(in_row_bytes);
      std::memcpy(b.data(), v.data(), in_row_bytes);
      return b;
    }
    return out.download(static_cast<size_t>(p) * row_bytes, row_bytes);
  };
  ASSERT_TRUE(run(1, {0}, 0).ok());
  const std::vector<uint8_t> want = row_of(0);
  for (int64_t m : ms) {
    const std::set<int64_t> probes = {0, m / 2, m - 1};
    const Status s = run(m, probes, (m * 17) % 61);
    ASSERT_TRUE(s.ok()) << s.to_string();
    for (int64_t p : probes) {
      ASSERT_TRUE(cuda_test::same_bits(row_of(p).data(), want.data(), row_bytes))
          << "row " << p << " of m=" << m << " differs from the row computed alone";
    }
  }
}

class RowKernels : public ::testing::Test {
 protected:
  void SetUp() override { VOSTI_SKIP_WITHOUT_CUDA(); }
};

std::vector<double> to_double(const std::vector<float>& v) { return {v.begin(), v.end()}; }

std::vector<double> rms_norm_ref(const std::vector<float>& x, int64_t m, int64_t n, const std::vector<float>& w,
                                 double eps) {
  std::vector<double> y(x.size());
  for (int64_t r = 0; r < m; ++r) {
    double ss = 0;
    for (int64_t i = 0; i < n; ++i) ss += double(x[r * n + i]) * x[r * n + i];
    const double inv = 1.0 / std::sqrt(ss / n + eps);
    for (int64_t i = 0; i < n; ++i) y[r * n + i] = x[r * n + i] * inv * w[i];
  }
  return y;
}

TEST_F(RowKernels, RmsNormMatchesReference) {
  for (int64_t n : {576, 4096, 4100}) {
    const int64_t m = 33;
    const std::vector<float> x = cuda_test::random_f32(m * n, n, 3.0f, 0.5f);
    const std::vector<float> w = cuda_test::random_f32(n, n + 1, 0.3f, 1.0f);
    DeviceBuffer<float> dx(x), dw(w), y32(m * n);
    DeviceBuffer<uint16_t> y16(m * n);
    ASSERT_TRUE(rms_norm(dx.get(), m, n, dw.get(), 1e-5f, y32.get(), DType::kF32, nullptr).ok());
    ASSERT_TRUE(rms_norm(dx.get(), m, n, dw.get(), 1e-5f, y16.get(), DType::kBF16, nullptr).ok());
    const std::vector<double> ref = rms_norm_ref(x, m, n, w, 1e-5);
    EXPECT_LT(cuda_test::relative_error(ref, to_double(y32.download())), 2e-6) << n;
    std::vector<double> got16;
    for (uint16_t h : y16.download()) got16.push_back(bf16_to_f32(h));
    EXPECT_LT(cuda_test::relative_error(ref, got16), 4e-3) << n;
  }
}

TEST_F(RowKernels, AddRmsNormUpdatesResidualExactly) {
  const int64_t m = 20, n = 2048;
  const std::vector<float> res = cuda_test::random_f32(m * n, 1, 2.0f), delta = cuda_test::random_f32(m * n, 2, 1.0f);
  const std::vector<float> w = cuda_test::random_f32(n, 3, 0.3f, 1.0f);
  DeviceBuffer<float> dres(res), ddelta(delta), dw(w), y(m * n);
  ASSERT_TRUE(add_rms_norm(dres.get(), ddelta.get(), m, n, dw.get(), 1e-6f, y.get(), DType::kF32, nullptr).ok());
  std::vector<float> sum(res.size());
  for (size_t i = 0; i < res.size(); ++i) sum[i] = res[i] + delta[i];
  const std::vector<float> got_res = dres.download();
  ASSERT_TRUE(cuda_test::same_bits(got_res.data(), sum.data(), sum.size() * sizeof(float)));
  EXPECT_LT(cuda_test::relative_error(rms_norm_ref(sum, m, n, w, 1e-6), to_double(y.download())), 2e-6);
}

TEST_F(RowKernels, HeadRmsNormMatchesReference) {
  const int64_t m = 9;
  const int heads = 6, hd = 128;
  const int64_t stride = heads * hd + 256;  // heads sit inside a wider packed row
  std::vector<float> x = cuda_test::random_f32(m * stride, 5, 1.5f, 0.1f);
  const std::vector<float> w = cuda_test::random_f32(hd, 6, 0.2f, 1.0f);
  DeviceBuffer<float> dx(x), dw(w);
  ASSERT_TRUE(head_rms_norm(dx.get(), stride, m, heads, hd, dw.get(), 1e-6f, nullptr).ok());
  const std::vector<float> got = dx.download();
  std::vector<double> ref, out;
  for (int64_t r = 0; r < m; ++r) {
    for (int h = 0; h < heads; ++h) {
      std::vector<float> head(x.begin() + r * stride + h * hd, x.begin() + r * stride + (h + 1) * hd);
      for (double v : rms_norm_ref(head, 1, hd, w, 1e-6)) ref.push_back(v);
      for (int i = 0; i < hd; ++i) out.push_back(got[r * stride + h * hd + i]);
    }
    for (int64_t i = heads * hd; i < stride; ++i)
      ASSERT_EQ(got[r * stride + i], x[r * stride + i]) << "outside the heads";
  }
  EXPECT_LT(cuda_test::relative_error(ref, out), 2e-6);
}

TEST_F(RowKernels, RopeMatchesReferenceBothLayouts) {
  for (int hd : {64, 6}) {  // the vectorised row kernel and the per-pair fallback
    for (RopeLayout layout : {RopeLayout::kNeox, RopeLayout::kGptj}) {
      const int64_t m = 17;
      const int heads = 4, half = hd / 2;
      const int64_t stride = heads * hd;
      const std::vector<float> x = cuda_test::random_f32(m * stride, 7, 1.0f);
      std::vector<int32_t> pos(m);
      for (int64_t r = 0; r < m; ++r) pos[r] = static_cast<int32_t>((r * 7919) % 40000);
      std::vector<float> inv_freq(half);
      for (int i = 0; i < half; ++i) inv_freq[i] = static_cast<float>(std::pow(10000.0, -2.0 * i / hd));
      DeviceBuffer<float> dx(x), dinv(inv_freq);
      DeviceBuffer<int32_t> dpos(pos);
      ASSERT_TRUE(rope(dx.get(), stride, m, heads, hd, dpos.get(), dinv.get(), layout, nullptr).ok());
      const std::vector<float> got = dx.download();
      std::vector<double> ref(x.size());
      for (int64_t r = 0; r < m; ++r) {
        for (int h = 0; h < heads; ++h) {
          for (int i = 0; i < half; ++i) {
            const double angle = static_cast<float>(pos[r]) * inv_freq[i];  // the f32 angle, as HF
            const int i0 = layout == RopeLayout::kNeox ? i : 2 * i;
            const int i1 = layout == RopeLayout::kNeox ? i + half : 2 * i + 1;
            const double x0 = x[r * stride + h * hd + i0], x1 = x[r * stride + h * hd + i1];
            ref[r * stride + h * hd + i0] = x0 * std::cos(angle) - x1 * std::sin(angle);
            ref[r * stride + h * hd + i1] = x1 * std::cos(angle) + x0 * std::sin(angle);
          }
        }
      }
      EXPECT_LT(cuda_test::relative_error(ref, to_double(got)), 2e-6)
          << (layout == RopeLayout::kNeox ? "neox" : "gptj") << " head_dim " << hd;
    }
  }
}

TEST_F(RowKernels, SiluMulAndBiasAddMatchReference) {
  const int64_t m = 12, n = 1536;
  const std::vector<float> gu = cuda_test::random_f32(m * 2 * n, 8, 3.0f);
  DeviceBuffer<float> dgu(gu), y(m * n);
  ASSERT_TRUE(silu_mul(dgu.get(), m, n, y.get(), DType::kF32, nullptr).ok());
  std::vector<double> ref;
  for (int64_t r = 0; r < m; ++r) {
    for (int64_t i = 0; i < n; ++i) {
      const double g = gu[r * 2 * n + i], u = gu[r * 2 * n + n + i];
      ref.push_back(g / (1.0 + std::exp(-g)) * u);
    }
  }
  EXPECT_LT(cuda_test::relative_error(ref, to_double(y.download())), 2e-6);

  const std::vector<float> before = y.download();
  const std::vector<float> bias = cuda_test::random_f32(n, 9, 1.0f);
  DeviceBuffer<float> dbias(bias);
  ASSERT_TRUE(bias_add(y.get(), m, n, dbias.get(), nullptr).ok());
  std::vector<float> want(before.size());
  for (int64_t r = 0; r < m; ++r) {
    for (int64_t i = 0; i < n; ++i) want[r * n + i] = before[r * n + i] + bias[i];
  }
  const std::vector<float> got = y.download();
  EXPECT_TRUE(cuda_test::same_bits(got.data(), want.data(), want.size() * sizeof(float)));
}

TEST_F(RowKernels, EmbeddingGatherWidensExactly) {
  const int64_t vocab = 1000, hidden = 576, m = 7;
  const std::vector<uint16_t> table = cuda_test::random_bf16(vocab * hidden, 10);
  const std::vector<int32_t> ids = {5, 999, 0, 5, 123, -1, 1000};  // the last two are out of range
  DeviceBuffer<uint16_t> dt(table);
  DeviceBuffer<int32_t> dids(ids);
  DeviceBuffer<float> out(m * hidden);
  ASSERT_TRUE(embedding_gather(dt.get(), vocab, hidden, dids.get(), m, 1.0f, out.get(), nullptr).ok());
  const std::vector<float> got = out.download();
  for (int64_t r = 0; r < m; ++r) {
    for (int64_t i = 0; i < hidden; ++i) {
      if (ids[r] < 0 || ids[r] >= vocab) {
        ASSERT_TRUE(std::isnan(got[r * hidden + i])) << "row " << r;
      } else {
        ASSERT_EQ(got[r * hidden + i], bf16_to_f32(table[ids[r] * hidden + i])) << "row " << r;
      }
    }
  }
}

// Gemma's scaled embedding: one f32 multiply per element after the widening, as the CPU's.
TEST_F(RowKernels, EmbeddingGatherScalesByOneMultiply) {
  const int64_t vocab = 300, hidden = 64, m = 3;
  const std::vector<uint16_t> table = cuda_test::random_bf16(vocab * hidden, 11);
  const std::vector<int32_t> ids = {7, 299, 0};
  DeviceBuffer<uint16_t> dt(table);
  DeviceBuffer<int32_t> dids(ids);
  DeviceBuffer<float> out(m * hidden);
  const float scale = std::sqrt(2304.0f);
  ASSERT_TRUE(embedding_gather(dt.get(), vocab, hidden, dids.get(), m, scale, out.get(), nullptr).ok());
  const std::vector<float> got = out.download();
  for (int64_t r = 0; r < m; ++r)
    for (int64_t i = 0; i < hidden; ++i)
      ASSERT_EQ(got[r * hidden + i], bf16_to_f32(table[ids[r] * hidden + i]) * scale) << "row " << r;
}

// GeGLU against scalar_math.h's gelu_tanh_times (the CPU's formula; expf for exp_f32: a few ulp)
// and against the f64 tanh GELU.
TEST_F(RowKernels, GeluTanhMulMatchesTheCpuFormula) {
  const int64_t m = 9, n = 1024;
  const std::vector<float> gu = cuda_test::random_f32(m * 2 * n, 12, 6.0f);
  DeviceBuffer<float> dgu(gu), y(m * n);
  ASSERT_TRUE(gated_mul(MlpActivation::kGeluTanh, dgu.get(), m, n, y.get(), DType::kF32, nullptr).ok());
  std::vector<double> cpu, exact;
  for (int64_t r = 0; r < m; ++r) {
    for (int64_t i = 0; i < n; ++i) {
      const float g = gu[r * 2 * n + i], u = gu[r * 2 * n + n + i];
      cpu.push_back(gelu_tanh_times(g, u));
      const double z = std::sqrt(2.0 / M_PI) * (g + 0.044715 * static_cast<double>(g) * g * g);
      exact.push_back(0.5 * g * (1.0 + std::tanh(z)) * u);
    }
  }
  const std::vector<double> got = to_double(y.download());
  EXPECT_LT(cuda_test::relative_error(cpu, got), 1e-6);
  EXPECT_LT(cuda_test::relative_error(exact, got), 2e-6);
}

// The final logit soft-cap against scalar_math.h's tanh_f32, in place on a strided row block;
// columns past n untouched.
TEST_F(RowKernels, SoftcapMatchesTheCpuFormula) {
  const int64_t m = 5, n = 1000, stride = 1008;
  const float cap = 30.0f;
  const std::vector<float> x = cuda_test::random_f32(m * stride, 13, 80.0f);
  DeviceBuffer<float> y(x);
  ASSERT_TRUE(softcap(y.get(), m, n, stride, cap, nullptr).ok());
  const std::vector<float> got = y.download();
  double worst = 0;
  for (int64_t r = 0; r < m; ++r) {
    for (int64_t i = 0; i < stride; ++i) {
      const float v = x[r * stride + i], g = got[r * stride + i];
      if (i >= n) {
        ASSERT_EQ(g, v) << "column past n written";
        continue;
      }
      const float want = tanh_f32(v / cap) * cap;
      worst = std::max(worst, std::fabs(static_cast<double>(g) - want));
      ASSERT_LE(std::fabs(g), cap);
    }
  }
  EXPECT_LT(worst, 1e-5) << "largest difference from the CPU's tanh_f32";
  EXPECT_EQ(softcap(y.get(), m, n, stride, 0.0f, nullptr).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(softcap(y.get(), m, n, n - 1, cap, nullptr).code(), StatusCode::kInvalidArgument);
}

TEST_F(RowKernels, BadShapesAreReported) {
  DeviceBuffer<float> x(64), w(64);
  EXPECT_EQ(rms_norm(x.get(), 2, 30, w.get(), 1e-5f, x.get(), DType::kF32, nullptr).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(rms_norm(x.get(), 2, 32, w.get(), 1e-5f, x.get(), DType::kF16, nullptr).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(rms_norm(nullptr, 2, 32, w.get(), 1e-5f, x.get(), DType::kF32, nullptr).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(rope(x.get(), 8, 1, 1, 7, nullptr, w.get(), RopeLayout::kNeox, nullptr).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(head_rms_norm(x.get(), 16, 2, 4, 8, w.get(), 1e-6f, nullptr).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(silu_mul(x.get(), 2, 6, x.get(), DType::kF32, nullptr).code(), StatusCode::kInvalidArgument);
}

TEST_F(RowKernels, RmsNormIsRowInvariant) {
  const int64_t n = 4096;
  DeviceBuffer<float> w(cuda_test::random_f32(n, 20, 0.3f, 1.0f));
  check_row_invariance(
      n, n * 2,
      [&](float* rows, int64_t m, const std::set<int64_t>&, uint8_t* out) {
        return rms_norm(rows, m, n, w.get(), 1e-5f, out, DType::kBF16, nullptr);
      },
      21);
}

TEST_F(RowKernels, AddRmsNormIsRowInvariant) {
  const int64_t n = 2048;
  DeviceBuffer<float> w(cuda_test::random_f32(n, 22, 0.3f, 1.0f));
  DeviceBuffer<float> delta(4096 * n);
  check_row_invariance(
      n, n * 4,
      [&](float* rows, int64_t m, const std::set<int64_t>&, uint8_t* out) {
        // delta = a copy of the rows: the residual row becomes 2x, then is normalised.
        if (cudaMemcpy(delta.get(), rows, sizeof(float) * n * m, cudaMemcpyDeviceToDevice) != cudaSuccess) {
          return internal_error("copy");
        }
        return add_rms_norm(rows, delta.get(), m, n, w.get(), 1e-6f, out, DType::kF32, nullptr);
      },
      23);
}

TEST_F(RowKernels, HeadNormAndRopeAreRowInvariant) {
  const int heads = 8, hd = 128;
  const int64_t width = heads * hd;
  DeviceBuffer<float> w(cuda_test::random_f32(hd, 24, 0.3f, 1.0f));
  std::vector<float> inv_freq(hd / 2);
  for (int i = 0; i < hd / 2; ++i) inv_freq[i] = static_cast<float>(std::pow(500000.0, -2.0 * i / hd));
  DeviceBuffer<float> dinv(inv_freq);
  DeviceBuffer<int32_t> pos(4096);
  for (RopeLayout layout : {RopeLayout::kNeox, RopeLayout::kGptj}) {
    check_row_invariance(
        width, 0,
        [&](float* rows, int64_t m, const std::set<int64_t>& probes, uint8_t*) {
          std::vector<int32_t> p(m);
          for (int64_t r = 0; r < m; ++r) p[r] = static_cast<int32_t>((r * 104729 + m) % 131072);
          for (int64_t r : probes) p[r] = 70001;
          pos.upload(p);
          const Status s = head_rms_norm(rows, width, m, heads, hd, w.get(), 1e-6f, nullptr);
          if (!s.ok()) return s;
          return rope(rows, width, m, heads, hd, pos.get(), dinv.get(), layout, nullptr);
        },
        25);
  }
}

TEST_F(RowKernels, SiluMulIsRowInvariant) {
  const int64_t n = 1536;
  check_row_invariance(
      2 * n, n * 2,
      [&](float* rows, int64_t m, const std::set<int64_t>&, uint8_t* out) {
        return silu_mul(rows, m, n, out, DType::kBF16, nullptr);
      },
      26);
}

TEST_F(RowKernels, GeluTanhMulAndSoftcapAreRowInvariant) {
  const int64_t n = 1536;
  check_row_invariance(
      2 * n, n * 2,
      [&](float* rows, int64_t m, const std::set<int64_t>&, uint8_t* out) {
        return gated_mul(MlpActivation::kGeluTanh, rows, m, n, out, DType::kBF16, nullptr);
      },
      27);
  check_row_invariance(
      n, 0,
      [&](float* rows, int64_t m, const std::set<int64_t>&, uint8_t*) {
        return softcap(rows, m, n, n, 30.0f, nullptr);
      },
      28);
}

}  // namespace
}  // namespace vosti
