// The hardware fact the wgmma attention kernel rests on (wgmma_ptx.cuh): a wgmma k16 step
// computes each output element as mma.sync m16n8k16 does from the same operands, so a row's
// chain of k16 steps has one set of bits on either instruction. For 1,024 tiles of random data
// in four distributions (normal; exponents over 2^-12..2^12; K rows that cancel exactly; zeros and
// powers of two), it computes attention's two chains both ways from the same registers and tiles:
// S = Q K^T over head_dim 128 (8 steps from zero; mma.sync as attention_mma.cu's tile_step, wgmma
// m64n64k16 with Q from registers, and from shared memory as its wgmma kernel reads it) and
// O = O0 + P V over 64 positions (4 steps onto a random f32
// O0; wgmma m64n128k16 and m64n64k16 with B N-major, the head_dim 128 and 64 forms), and requires
// every element equal bit for bit. Runs where the GPU has wgmma (sm_90); skips elsewhere.
#include <cuda_bf16.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "tests/kernels_cuda/cuda_test_util.h"
#include "kernels/cuda/gemm/gemm_bf16.h"
#include "kernels/cuda/ptx/mma_ptx.cuh"
#include "kernels/cuda/ptx/wgmma_ptx.cuh"

namespace vosti {
namespace {

constexpr int kHd = 128, kRows = 64, kPos = 64, kTileBytes = kRows * kHd * 2;

#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
// attention_mma.cu's layout: [rows][128] bf16, 16-byte chunk c of row r at c ^ (r & 7).
__device__ constexpr uint32_t mma_layout(int row, int chunk) { return (row * 16 + (chunk ^ (row & 7))) * 16; }
// wgmma's (the wgmma kernel's stages): [chunk / 8][rows][64] bf16, chunk c % 8 at (c % 8) ^ (r & 7).
__device__ constexpr uint32_t wgmma_layout(int row, int chunk) {
  return (chunk >> 3) * (kRows * 128) + row * 128 + (((chunk & 7) ^ (row & 7)) * 16);
}
#endif

// One tile's results, each [rows][columns] f32.
struct Results {
  float s_mma[kRows * kPos], s_wgmma[kRows * kPos], s_wgmma_ss[kRows * kPos];
  float o_mma[kRows * kHd], o_wgmma[kRows * kHd], o64_wgmma[kRows * kPos];
};

__global__ void __launch_bounds__(128) chains_kernel(const uint16_t* q, const uint16_t* k, const uint16_t* v,
                                                     const uint16_t* p, const float* o0, Results* out) {
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using namespace mma_ptx;
  namespace wg = wgmma_ptx;
  extern __shared__ __align__(128) char raw[];
  char* sm = raw + ((1024 - (smem_addr(raw) & 1023)) & 1023);
  const uint32_t base = smem_addr(sm);
  char *qm = sm, *km = sm + kTileBytes, *vm = sm + 2 * kTileBytes, *kw = sm + 3 * kTileBytes, *vw = sm + 4 * kTileBytes;
  char* qw = sm + 5 * kTileBytes;
  uint16_t* ps = reinterpret_cast<uint16_t*>(sm + 6 * kTileBytes);
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const size_t t0 = static_cast<size_t>(blockIdx.x) * kRows * kHd;
  for (int i = tid; i < kRows * 16; i += 128) {
    const int row = i / 16, c = i % 16;
    const uint4 a = *reinterpret_cast<const uint4*>(q + t0 + row * kHd + c * 8);
    const uint4 b = *reinterpret_cast<const uint4*>(k + t0 + row * kHd + c * 8);
    const uint4 d = *reinterpret_cast<const uint4*>(v + t0 + row * kHd + c * 8);
    *reinterpret_cast<uint4*>(qm + mma_layout(row, c)) = a;
    *reinterpret_cast<uint4*>(qw + wgmma_layout(row, c)) = a;
    *reinterpret_cast<uint4*>(km + mma_layout(row, c)) = b;
    *reinterpret_cast<uint4*>(vm + mma_layout(row, c)) = d;
    *reinterpret_cast<uint4*>(kw + wgmma_layout(row, c)) = b;
    *reinterpret_cast<uint4*>(vw + wgmma_layout(row, c)) = d;
  }
  for (int i = tid; i < kRows * kPos; i += 128) ps[i] = p[static_cast<size_t>(blockIdx.x) * kRows * kPos + i];
  wg::fence_proxy_async();
  __syncthreads();
  const int g = lane >> 2, c2 = 2 * (lane & 3), r0 = warp * 16 + g;
  const uint32_t q_lane = mma_layout(lane & 15, lane >> 4);
  const uint32_t k_lane = mma_layout((lane & 7) + ((lane >> 4) << 3), (lane >> 3) & 1);
  const uint32_t v_lane = mma_layout((lane & 7) + (((lane >> 3) & 1) << 3), lane >> 4);
  uint32_t qa[8][4];
  for (int kk = 0; kk < 8; ++kk) ldsm_x4(qa[kk], base + warp * 16 * 256 + (q_lane ^ (kk * 32)));
  float s[8][4] = {}, sw[32] = {}, ss[32] = {};
  for (int kk = 0; kk < 8; ++kk)
    for (int np = 0; np < 4; ++np) {
      uint32_t f[4];
      ldsm_x4(f, base + kTileBytes + np * 16 * 256 + (k_lane ^ (kk * 32)));
      mma_bf16(s[2 * np], qa[kk], f[0], f[1]);
      mma_bf16(s[2 * np + 1], qa[kk], f[2], f[3]);
    }
  wg::fence();
  for (int kk = 0; kk < 8; ++kk)
    wg::wgmma_m64n64k16_rs<0>(
        sw, qa[kk], wg::desc_sw128(base + 3 * kTileBytes + (kk >> 2) * kRows * 128 + (kk & 3) * 32, 16, 1024));
  wg::commit();
  wg::wait<0>();
  wg::fence_operands(sw);
  // The same chain with Q as the shared-memory A operand (the attention kernel's form).
  wg::fence_operands(ss);
  wg::fence();
  for (int kk = 0; kk < 8; ++kk) {
    const uint32_t at = (kk >> 2) * kRows * 128 + (kk & 3) * 32;
    wg::wgmma_m64n64k16_ss(ss, wg::desc_sw128(base + 5 * kTileBytes + at, 16, 1024),
                           wg::desc_sw128(base + 3 * kTileBytes + at, 16, 1024));
  }
  wg::commit();
  wg::wait<0>();
  wg::fence_operands(ss);
  uint32_t pa[4][4];
  const auto pk = [&](int r, int c) { return uint32_t{ps[r * kPos + c]} | uint32_t{ps[r * kPos + c + 1]} << 16; };
  for (int kk = 0; kk < 4; ++kk) {
    pa[kk][0] = pk(r0, 16 * kk + c2);
    pa[kk][1] = pk(r0 + 8, 16 * kk + c2);
    pa[kk][2] = pk(r0, 16 * kk + c2 + 8);
    pa[kk][3] = pk(r0 + 8, 16 * kk + c2 + 8);
  }
  float o[16][4], ow[64], ow64[32];
  for (int dt = 0; dt < 16; ++dt)
    for (int e = 0; e < 4; ++e) {
      o[dt][e] = ow[4 * dt + e] = o0[t0 + (r0 + 8 * (e >> 1)) * kHd + 8 * dt + c2 + (e & 1)];
      if (dt < 8) ow64[4 * dt + e] = o[dt][e];
    }
  for (int kk = 0; kk < 4; ++kk)
    for (int dp = 0; dp < 8; ++dp) {
      uint32_t f[4];
      ldsm_x4_trans(f, base + 2 * kTileBytes + kk * 16 * 256 + (v_lane ^ (dp * 32)));
      mma_bf16(o[2 * dp], pa[kk], f[0], f[1]);
      mma_bf16(o[2 * dp + 1], pa[kk], f[2], f[3]);
    }
  wg::fence();
  for (int kk = 0; kk < 4; ++kk) {
    const uint64_t d = wg::desc_sw128(base + 4 * kTileBytes + kk * 2048, kRows * 128, 1024);
    wg::wgmma_m64n128k16_rs<1>(ow, pa[kk], d);
    wg::wgmma_m64n64k16_rs<1>(ow64, pa[kk], d);
  }
  wg::commit();
  wg::wait<0>();
  wg::fence_operands(ow);
  wg::fence_operands(ow64);
  Results& w = out[blockIdx.x];
  for (int j = 0; j < 16; ++j)
    for (int e = 0; e < 4; ++e) {
      const int row = r0 + 8 * (e >> 1), col = 8 * j + c2 + (e & 1);
      if (j < 8) {
        w.s_mma[row * kPos + col] = s[j][e];
        w.s_wgmma[row * kPos + col] = sw[4 * j + e];
        w.s_wgmma_ss[row * kPos + col] = ss[4 * j + e];
        w.o64_wgmma[row * kPos + col] = ow64[4 * j + e];
      }
      w.o_mma[row * kHd + col] = o[j][e];
      w.o_wgmma[row * kHd + col] = ow[4 * j + e];
    }
#endif
}

uint16_t to_bf16(float x) {  // round to nearest even (no NaN here)
  uint32_t u;
  std::memcpy(&u, &x, 4);
  u += 0x7FFF + ((u >> 16) & 1);
  return static_cast<uint16_t>(u >> 16);
}

TEST(WgmmaBits, EveryK16StepEqualsMmaSync) {
  VOSTI_SKIP_WITHOUT_CUDA();
  if (!cuda_test::device().has_wgmma) GTEST_SKIP() << "the GPU has no wgmma (sm_90 only)";
  constexpr int kTiles = 1024;
  const size_t tile = size_t{kRows} * kHd, ptile = size_t{kRows} * kPos;
  std::vector<uint16_t> q(kTiles * tile), k(kTiles * tile), v(kTiles * tile), p(kTiles * ptile);
  std::vector<float> o0(kTiles * tile);
  std::mt19937_64 rng(20261203);
  std::normal_distribution<float> normal(0.f, 1.f);
  std::uniform_int_distribution<int> exponent(-12, 12), coin(0, 7);
  for (int t = 0; t < kTiles; ++t) {
    const int mode = t % 4;  // normal; spread exponents; cancelling K rows; zeros and +-2^k
    const auto value = [&]() -> float {
      if (mode == 3) return coin(rng) == 0 ? 0.f : std::ldexp(coin(rng) < 4 ? 1.f : -1.f, exponent(rng) / 2);
      const float x = normal(rng);
      return mode == 1 ? std::ldexp(x, exponent(rng)) : x;
    };
    for (size_t i = 0; i < tile; ++i) {
      q[t * tile + i] = to_bf16(value());
      k[t * tile + i] = to_bf16(value());
      v[t * tile + i] = to_bf16(value());
      o0[t * tile + i] = mode == 3 ? 0.f : std::ldexp(normal(rng), mode == 1 ? exponent(rng) : 4);
    }
    if (mode == 2)  // K row 2i + 1 = -K row 2i: the two rows' scores cancel term by term
      for (int r = 0; r < kRows; r += 2)
        for (int d = 0; d < kHd; ++d) k[t * tile + (r + 1) * kHd + d] = k[t * tile + r * kHd + d] ^ 0x8000;
    for (size_t i = 0; i < ptile; ++i) {
      const float x = std::exp2(-std::fabs(normal(rng)) * (mode == 1 ? 8.f : 2.f));  // softmax weights
      p[t * ptile + i] = to_bf16(mode == 3 ? (coin(rng) < 2 ? 0.f : (coin(rng) < 4 ? 1.f : x)) : x);
    }
  }
  cuda_test::DeviceBuffer<uint16_t> dq(q), dk(k), dv(v), dp(p);
  cuda_test::DeviceBuffer<float> d0(o0);
  cuda_test::DeviceBuffer<Results> out(kTiles);
  const int smem = 6 * kTileBytes + kRows * kPos * 2 + 1024;
  ASSERT_EQ(cudaFuncSetAttribute(chains_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem), cudaSuccess);
  chains_kernel<<<kTiles, 128, smem>>>(dq.get(), dk.get(), dv.get(), dp.get(), d0.get(), out.get());
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  std::vector<Results> r(kTiles);
  ASSERT_EQ(cudaMemcpy(r.data(), out.get(), sizeof(Results) * kTiles, cudaMemcpyDeviceToHost), cudaSuccess);
  int64_t differ[4] = {}, nonzero = 0;
  for (const Results& x : r) {
    for (int i = 0; i < kRows * kPos; ++i) {
      differ[0] += std::memcmp(&x.s_mma[i], &x.s_wgmma[i], 4) != 0;
      differ[3] += std::memcmp(&x.s_mma[i], &x.s_wgmma_ss[i], 4) != 0;
      differ[2] += std::memcmp(&x.o_mma[(i / kPos) * kHd + i % kPos], &x.o64_wgmma[i], 4) != 0;
      nonzero += x.s_mma[i] != 0.f;
    }
    for (int i = 0; i < kRows * kHd; ++i) differ[1] += std::memcmp(&x.o_mma[i], &x.o_wgmma[i], 4) != 0;
  }
  EXPECT_GT(nonzero, int64_t{kTiles} * kRows * kPos / 2) << "the chains computed nothing";
  EXPECT_EQ(differ[0], 0) << "S = Q K^T: wgmma m64n64k16 elements that differ from mma.sync's";
  EXPECT_EQ(differ[3], 0)
      << "S = Q K^T: wgmma m64n64k16 with Q from shared memory: elements that differ from mma.sync's";
  EXPECT_EQ(differ[1], 0) << "O += P V: wgmma m64n128k16 (B N-major) elements that differ from mma.sync's";
  EXPECT_EQ(differ[2], 0) << "O += P V: wgmma m64n64k16 (B N-major) elements that differ from mma.sync's";
}

}  // namespace
}  // namespace vosti
