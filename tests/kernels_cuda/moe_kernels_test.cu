// Tests of the mixture-of-experts kernels (src/kernels/cuda/moe/moe_kernels.h):
//   - moe_route against a host transcription of its order (experts exactly, weights to 1e-6), ties
//     to the lowest expert index;
//   - moe_permute against a host counting sort (positions, source tokens, tile list exactly), for
//     random, skewed (all tokens to the same experts) and every-expert-once routings;
//   - moe_grouped_gemm against an f64 host product (the only tolerance: the reference's);
//   - bit invariance of the whole MoE MLP (permute, gather, grouped gate_up, activation, grouped
//     down, combine): a probe token's output row alone, among many tokens sharing its experts,
//     with every token on its experts (skewed) and with every expert used once: memcmp-equal;
//   - the same harness on a planted grouped GEMM whose k split follows the expert's token count
//     (defined here only, never in src/): the harness must see its bits change.
// GPU tests skip with "no CUDA device" where there is none.
#include <cuda_bf16.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "kernels/cuda/cuda_status.h"
#include "kernels/cuda/moe/moe_grouped_gemm.cuh"
#include "kernels/cuda/moe/moe_kernels.h"
#include "kernels/cuda/rows/row_kernels.h"
#include "tests/kernels_cuda/cuda_test_util.h"

namespace vosti {
namespace {

using cuda_test::DeviceBuffer;

// ---- the planted violation: a k split chosen from the expert's token count ----

// As moe_grouped_gemm_kernel, but an expert with more than one row runs its k chain as two
// segments added afterwards (a split-K heuristic keyed on the count, as cuBLAS-style dispatch
// does): a token's bits then depend on how many tokens share its expert.
__global__ void __launch_bounds__(moe_detail::MoeTileConfig::kThreads)
    planted_count_split_kernel(moe_detail::MoeGemmParams g) {
  extern __shared__ __align__(128) unsigned char smem_raw[];
  if (static_cast<int>(blockIdx.x) >= *g.num_tiles) return;
  const MoeTile t = g.tiles[blockIdx.x];
  const int count = t.row_end - t.expert_row0;
  const int segments = count > 1 && g.num_k_blocks % 2 == 0 ? 2 : 1;
  moe_detail::moe_expert_tile<moe_detail::MoeTileConfig, moe_detail::kMoeBlockM, 4>(
      g, t, static_cast<int>(blockIdx.y) * kGemmBlockN, segments, smem_raw);
}

Status planted_grouped_gemm(const MoeGemmSchedule& s, const MoeGroupedGemmArgs& a, cudaStream_t stream) {
  moe_detail::MoeGemmParams g{};
  g.x = reinterpret_cast<const __nv_bfloat16*>(a.x);
  g.w = reinterpret_cast<const __nv_bfloat16*>(a.w);
  g.y = a.y;
  g.tiles = a.tiles;
  g.num_tiles = a.num_tiles;
  g.n = static_cast<int>(s.n);
  g.k = static_cast<int>(s.k);
  g.num_k_blocks = s.num_k_blocks;
  g.out_f32 = a.out_dtype == DType::kF32 ? 1 : 0;
  g.scratch_row = static_cast<int>(a.scratch_row);
  constexpr int kSmem = 4 * moe_detail::MoeTileConfig::kStageElems * 2;
  VOSTI_CUDA_RETURN_IF_ERROR(
      cudaFuncSetAttribute(planted_count_split_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem));
  const dim3 grid(static_cast<unsigned>(a.max_tiles), static_cast<unsigned>((s.n + kGemmBlockN - 1) / kGemmBlockN));
  planted_count_split_kernel<<<grid, moe_detail::MoeTileConfig::kThreads, kSmem, stream>>>(g);
  return cuda_launch_status("planted_count_split_kernel");
}

// ---- host references ----

struct HostRoute {
  std::vector<int32_t> experts;  // [T, k]
  std::vector<float> weights;    // [T, k]
};

// moe_kernels.h step 1 on the host (std::exp for expf).
HostRoute host_route(const std::vector<float>& logits, int64_t T, int E, int k, bool norm) {
  HostRoute r{std::vector<int32_t>(static_cast<size_t>(T * k)), std::vector<float>(static_cast<size_t>(T * k))};
  std::vector<float> p(static_cast<size_t>(E));
  for (int64_t t = 0; t < T; ++t) {
    const float* l = logits.data() + t * E;
    float m = l[0];
    for (int e = 1; e < E; ++e) m = m < l[e] ? l[e] : m;
    float s = 0.0f;
    for (int e = 0; e < E; ++e) s += (p[static_cast<size_t>(e)] = std::exp(l[e] - m));
    for (int e = 0; e < E; ++e) p[static_cast<size_t>(e)] /= s;
    int32_t* ex = r.experts.data() + t * k;
    float* wt = r.weights.data() + t * k;
    for (int j = 0; j < k; ++j) {
      int best = 0;
      for (int e = 1; e < E; ++e)
        if (p[static_cast<size_t>(e)] > p[static_cast<size_t>(best)]) best = e;
      ex[j] = best;
      wt[j] = p[static_cast<size_t>(best)];
      p[static_cast<size_t>(best)] = -1.0f;
    }
    if (norm) {
      float sum = 0.0f;
      for (int j = 0; j < k; ++j) sum += wt[j];
      for (int j = 0; j < k; ++j) wt[j] /= sum;
    }
    for (int i = 1; i < k; ++i)
      for (int j = i; j > 0 && ex[j - 1] > ex[j]; --j) {
        std::swap(ex[j - 1], ex[j]);
        std::swap(wt[j - 1], wt[j]);
      }
  }
  return r;
}

struct HostPermute {
  std::vector<int32_t> pos, src_token;
  std::vector<MoeTile> tiles;
};

// moe_kernels.h step 2 on the host: a stable counting sort of the entries by expert.
HostPermute host_permute(const std::vector<int32_t>& experts, int k, int E, int block_m) {
  const auto P = static_cast<int64_t>(experts.size());
  std::vector<int32_t> count(static_cast<size_t>(E), 0), offset(static_cast<size_t>(E) + 1, 0);
  for (int32_t e : experts) ++count[static_cast<size_t>(e)];
  for (int e = 0; e < E; ++e)
    offset[static_cast<size_t>(e) + 1] = offset[static_cast<size_t>(e)] + count[static_cast<size_t>(e)];
  HostPermute h{std::vector<int32_t>(static_cast<size_t>(P)), std::vector<int32_t>(static_cast<size_t>(P)), {}};
  std::vector<int32_t> next(offset.begin(), offset.end() - 1);
  for (int64_t i = 0; i < P; ++i) {
    const int32_t at = next[static_cast<size_t>(experts[static_cast<size_t>(i)])]++;
    h.pos[static_cast<size_t>(i)] = at;
    h.src_token[static_cast<size_t>(at)] = static_cast<int32_t>(i / k);
  }
  for (int e = 0; e < E; ++e)
    for (int32_t r = offset[static_cast<size_t>(e)]; r < offset[static_cast<size_t>(e) + 1]; r += block_m)
      h.tiles.push_back(MoeTile{e, r, offset[static_cast<size_t>(e) + 1], offset[static_cast<size_t>(e)]});
  return h;
}

// T tokens' k distinct experts (ascending) of E, uniformly at random.
std::vector<int32_t> random_routing(int64_t T, int E, int k, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<int32_t> all(static_cast<size_t>(E)), out;
  std::iota(all.begin(), all.end(), 0);
  for (int64_t t = 0; t < T; ++t) {
    std::shuffle(all.begin(), all.end(), rng);
    std::vector<int32_t> pick(all.begin(), all.begin() + k);
    std::sort(pick.begin(), pick.end());
    out.insert(out.end(), pick.begin(), pick.end());
  }
  return out;
}

// ---- device pipeline ----

struct PermuteResult {
  std::vector<int32_t> pos, src_token;
  std::vector<MoeTile> tiles;
};

// The permutation buffers of up to `entries` routed rows.
struct PermuteBuffers {
  PermuteBuffers(int64_t entries, int E, int block_m)
      : max_tiles(moe_max_tiles(entries, E, block_m)),
        pos(static_cast<size_t>(entries)),
        src(static_cast<size_t>(entries)),
        tiles(static_cast<size_t>(max_tiles)),
        num_tiles(1) {}
  Status run(const DeviceBuffer<int32_t>& experts, int64_t entries, int k, int E, int block_m) {
    MoePermuteArgs a;
    a.experts = experts.get();
    a.num_entries = entries;
    a.top_k = k;
    a.num_experts = E;
    a.block_m = block_m;
    a.pos = pos.get();
    a.src_token = src.get();
    a.tiles = tiles.get();
    a.num_tiles = num_tiles.get();
    a.max_tiles = max_tiles;
    return moe_permute(a, nullptr);
  }
  PermuteResult download(int64_t entries) const {
    PermuteResult r{pos.download(0, static_cast<size_t>(entries)), src.download(0, static_cast<size_t>(entries)), {}};
    const int32_t n = num_tiles.download()[0];
    r.tiles = tiles.download(0, static_cast<size_t>(n));
    return r;
  }
  int64_t max_tiles;
  DeviceBuffer<int32_t> pos, src;
  DeviceBuffer<MoeTile> tiles;
  DeviceBuffer<int32_t> num_tiles;
};

bool same_tiles(const std::vector<MoeTile>& a, const std::vector<MoeTile>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(MoeTile)) == 0;
}

using GroupedGemmFn = Status (*)(const MoeGemmSchedule&, const MoeGroupedGemmArgs&, cudaStream_t);

// One MoE MLP: experts' gate_up [E, 2W, H] and down [E, H, W] (bf16), SwiGLU.
struct MoeLayer {
  int E, k, H, W;
  std::vector<uint16_t> gate_up, down;
};

// out [T, H] f32 of the MoE MLP of rows h [T, H] (bf16) under the given routing, by the kernels of
// moe_kernels.h with `gemm` as the grouped GEMM.
std::vector<float> run_moe_mlp(const MoeLayer& L, const std::vector<uint16_t>& h, const std::vector<int32_t>& experts,
                               const std::vector<float>& weights, GroupedGemmFn gemm) {
  const int64_t T = static_cast<int64_t>(h.size()) / L.H, P = T * L.k;
  const MoeGemmSchedule gu = select_moe_gemm_schedule(2 * L.W, L.H).value();
  const MoeGemmSchedule dn = select_moe_gemm_schedule(L.H, L.W).value();
  DeviceBuffer<uint16_t> dh(h), dgu(L.gate_up), ddown(L.down);
  DeviceBuffer<int32_t> dex(experts);
  DeviceBuffer<float> dw(weights);
  PermuteBuffers perm(P, L.E, gu.block_m);
  const int64_t rows = moe_rows_with_scratch(P, gu.block_m);
  DeviceBuffer<uint16_t> x(static_cast<size_t>(rows * L.H)), act(static_cast<size_t>(rows * L.W));
  DeviceBuffer<float> y_gu(static_cast<size_t>(rows * 2 * L.W)), y(static_cast<size_t>(rows * L.H)),
      out(static_cast<size_t>(T * L.H));
  EXPECT_TRUE(perm.run(dex, P, L.k, L.E, gu.block_m).ok());
  EXPECT_TRUE(moe_gather(dh.get(), perm.src.get(), P, L.H, x.get(), nullptr).ok());
  MoeGroupedGemmArgs g;
  g.x = x.get();
  g.w = dgu.get();
  g.y = y_gu.get();
  g.tiles = perm.tiles.get();
  g.num_tiles = perm.num_tiles.get();
  g.max_tiles = perm.max_tiles;
  g.scratch_row = P;
  EXPECT_TRUE(gemm(gu, g, nullptr).ok());
  EXPECT_TRUE(gated_mul(MlpActivation::kSilu, y_gu.get(), P, L.W, act.get(), DType::kBF16, nullptr).ok());
  g.x = act.get();
  g.w = ddown.get();
  g.y = y.get();
  EXPECT_TRUE(gemm(dn, g, nullptr).ok());
  EXPECT_TRUE(moe_combine(y.get(), perm.pos.get(), dw.get(), T, L.k, L.H, out.get(), nullptr).ok());
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  return out.download();
}

TEST(MoeSchedule, FixedPerShapeAndRejectsBadShapes) {
  EXPECT_FALSE(select_moe_gemm_schedule(100, 64).ok());
  EXPECT_FALSE(select_moe_gemm_schedule(128, 96).ok());
  const MoeGemmSchedule a = select_moe_gemm_schedule(1536, 2048).value();
  EXPECT_EQ(a.num_k_blocks, 32);
  EXPECT_EQ(a.block_m, select_moe_gemm_schedule(2048, 768).value().block_m);
  // The tile bound holds for the worst spread: every expert one row more than whole tiles.
  EXPECT_EQ(moe_max_tiles(1, 128, 64), 2);
  EXPECT_GE(moe_max_tiles(128 * 65, 128, 64), 128 * 2);
}

TEST(MoeRoute, MatchesTheHostOrderWithTiesToTheLowestExpert) {
  VOSTI_SKIP_WITHOUT_CUDA();
  for (const auto& [E, k, norm] : {std::tuple{128, 8, true}, std::tuple{8, 2, true}, std::tuple{60, 4, false}}) {
    const int64_t T = 777, ld = (E + 7) / 8 * 8;
    std::vector<float> logits = cuda_test::random_f32(static_cast<size_t>(T * E), 5 + E, 3.0f);
    for (int e = 0; e < E; ++e) logits[static_cast<size_t>(e)] = 0.5f;  // token 0: all tied
    std::vector<float> padded(static_cast<size_t>(T * ld), 1e30f);      // padding columns never read
    for (int64_t t = 0; t < T; ++t) std::copy_n(logits.begin() + t * E, E, padded.begin() + t * ld);
    DeviceBuffer<float> dl(padded), dw(static_cast<size_t>(T * k));
    DeviceBuffer<int32_t> dex(static_cast<size_t>(T * k)), routed(static_cast<size_t>(T * 3 * k));
    MoeRouteArgs a;
    a.logits = dl.get();
    a.ld = ld;
    a.num_tokens = T;
    a.num_experts = E;
    a.top_k = k;
    a.norm_topk_prob = norm;
    a.experts = dex.get();
    a.weights = dw.get();
    a.routed = routed.get();
    a.routed_stride = 3 * k;
    a.routed_offset = k;  // the second of three MoE layers
    ASSERT_TRUE(moe_route(a, nullptr).ok());
    const HostRoute want = host_route(logits, T, E, k, norm);
    const std::vector<int32_t> got = dex.download(), rec = routed.download();
    const std::vector<float> w = dw.download();
    ASSERT_EQ(got, want.experts) << E << " experts";
    for (int j = 0; j < k; ++j) EXPECT_EQ(got[static_cast<size_t>(j)], j) << "ties go to the lowest expert index";
    for (size_t i = 0; i < w.size(); ++i) EXPECT_NEAR(w[i], want.weights[i], 1e-6f * std::max(1.0f, want.weights[i]));
    for (int64_t t = 0; t < T; ++t)
      for (int j = 0; j < k; ++j)
        ASSERT_EQ(rec[static_cast<size_t>(t * 3 * k + k + j)], got[static_cast<size_t>(t * k + j)]);
  }
}

TEST(MoePermute, MatchesAStableCountingSortUnderAnyLoad) {
  VOSTI_SKIP_WITHOUT_CUDA();
  const int E = 128, k = 8, bm = 64;
  std::vector<std::pair<std::string, std::vector<int32_t>>> cases;
  cases.push_back({"one token", random_routing(1, E, k, 1)});
  cases.push_back({"3000 tokens at random", random_routing(3000, E, k, 2)});
  std::vector<int32_t> skew;  // every token on experts 0..7
  for (int t = 0; t < 2500; ++t)
    for (int j = 0; j < k; ++j) skew.push_back(j);
  cases.push_back({"all tokens on the same experts", skew});
  std::vector<int32_t> once(static_cast<size_t>(E));  // E / k tokens, every expert once
  std::iota(once.begin(), once.end(), 0);
  cases.push_back({"every expert once", once});
  for (const auto& [name, experts] : cases) {
    const auto P = static_cast<int64_t>(experts.size());
    DeviceBuffer<int32_t> dex(experts);
    PermuteBuffers perm(P, E, bm);
    ASSERT_TRUE(perm.run(dex, P, k, E, bm).ok()) << name;
    const PermuteResult got = perm.download(P);
    const HostPermute want = host_permute(experts, k, E, bm);
    EXPECT_EQ(got.pos, want.pos) << name;
    EXPECT_EQ(got.src_token, want.src_token) << name;
    EXPECT_TRUE(same_tiles(got.tiles, want.tiles))
        << name << ": " << got.tiles.size() << " tiles, want " << want.tiles.size();
    EXPECT_LE(static_cast<int64_t>(want.tiles.size()), perm.max_tiles) << name;
  }
}

TEST(MoeGroupedGemm, MatchesAnF64HostProduct) {
  VOSTI_SKIP_WITHOUT_CUDA();
  const int E = 8, k = 2, n = 200, K = 192;  // a partial n-tile, three k-blocks
  const int64_t T = 150, P = T * k;
  const std::vector<int32_t> experts = random_routing(T, E, k, 3);
  const MoeGemmSchedule s = select_moe_gemm_schedule(n, K).value();
  DeviceBuffer<int32_t> dex(experts);
  PermuteBuffers perm(P, E, s.block_m);
  ASSERT_TRUE(perm.run(dex, P, k, E, s.block_m).ok());
  const std::vector<uint16_t> x = cuda_test::random_bf16(static_cast<size_t>(P * K), 11);
  const std::vector<uint16_t> w = cuda_test::random_bf16(static_cast<size_t>(E) * n * K, 12, 0.1f);
  const HostPermute hp = host_permute(experts, k, E, s.block_m);
  std::vector<int32_t> row_expert(static_cast<size_t>(P));
  for (int64_t i = 0; i < P; ++i)
    row_expert[static_cast<size_t>(hp.pos[static_cast<size_t>(i)])] = experts[static_cast<size_t>(i)];
  std::vector<double> ref(static_cast<size_t>(P * n));
  for (int64_t p = 0; p < P; ++p)
    for (int c = 0; c < n; ++c) {
      double acc = 0;
      const uint16_t* wr = w.data() + (static_cast<int64_t>(row_expert[static_cast<size_t>(p)]) * n + c) * K;
      for (int j = 0; j < K; ++j) acc += double(bf16_to_f32(x[static_cast<size_t>(p * K + j)])) * bf16_to_f32(wr[j]);
      ref[static_cast<size_t>(p * n + c)] = acc;
    }
  const int64_t rows = moe_rows_with_scratch(P, s.block_m);
  std::vector<uint16_t> x_rows = x;
  x_rows.resize(static_cast<size_t>(rows * K), f32_to_bf16(NAN));  // scratch rows: NaN, never stored
  DeviceBuffer<uint16_t> dx(x_rows), dw(w), ybf(static_cast<size_t>(rows * n));
  DeviceBuffer<float> yf(static_cast<size_t>(rows * n));
  MoeGroupedGemmArgs a;
  a.x = dx.get();
  a.w = dw.get();
  a.y = yf.get();
  a.tiles = perm.tiles.get();
  a.num_tiles = perm.num_tiles.get();
  a.max_tiles = perm.max_tiles;
  a.scratch_row = P;
  ASSERT_TRUE(moe_grouped_gemm(s, a, nullptr).ok());
  a.y = ybf.get();
  a.out_dtype = DType::kBF16;
  ASSERT_TRUE(moe_grouped_gemm(s, a, nullptr).ok());
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const std::vector<float> gf = yf.download(0, static_cast<size_t>(P * n));
  const std::vector<uint16_t> gb = ybf.download(0, static_cast<size_t>(P * n));
  std::vector<double> of(gf.begin(), gf.end()), ob(gb.size());
  for (size_t i = 0; i < gb.size(); ++i) ob[i] = bf16_to_f32(gb[i]);
  EXPECT_LT(cuda_test::relative_error(ref, of), 1e-5);
  EXPECT_LT(cuda_test::relative_error(ref, ob), 8e-3);
}

// A probe token's MoE output row under four routings of the batch around it; returns each
// scenario's row (scenario 0: the probe alone).
std::vector<std::vector<float>> probe_rows(const MoeLayer& L, GroupedGemmFn gemm) {
  const std::vector<uint16_t> probe = cuda_test::random_bf16(static_cast<size_t>(L.H), 99);
  const std::vector<int32_t> probe_ex = {1, 5};  // ascending, k = 2
  const std::vector<float> probe_w = {0.625f, 0.375f};
  std::vector<std::vector<float>> rows;
  // (tokens, probe index, routing of the others: 0 random sharing expert 1, 1 all on the probe's
  // experts, 2 every expert once)
  const std::vector<std::tuple<int64_t, int64_t, int>> scenarios = {
      {1, 0, 0}, {300, 137, 0}, {260, 259, 1}, {static_cast<int64_t>(L.E / L.k), 2, 2}};
  for (const auto& [T, at, kind] : scenarios) {
    std::vector<uint16_t> h = cuda_test::random_bf16(static_cast<size_t>(T * L.H), 1000 + T);
    std::vector<int32_t> ex = random_routing(T, L.E, L.k, 2000 + T);
    std::vector<float> w = cuda_test::random_f32(static_cast<size_t>(T * L.k), 3000 + T, 0.3f, 0.5f);
    for (int64_t t = 0; t < T; ++t) {
      int32_t* e = ex.data() + t * L.k;
      if (kind == 0 && t % 2 == 0 && e[0] != 1 && e[1] != 1) e[0] = 1, std::sort(e, e + L.k);
      if (kind == 1) std::copy(probe_ex.begin(), probe_ex.end(), e);
      if (kind == 2)
        for (int j = 0; j < L.k; ++j) e[j] = static_cast<int32_t>(t * L.k + j);
    }
    std::copy(probe.begin(), probe.end(), h.begin() + at * L.H);
    if (kind != 2) std::copy(probe_ex.begin(), probe_ex.end(), ex.begin() + at * L.k);
    std::copy(probe_w.begin(), probe_w.end(), w.begin() + at * L.k);
    const std::vector<float> out = run_moe_mlp(L, h, ex, w, gemm);
    rows.emplace_back(out.begin() + at * L.H, out.begin() + (at + 1) * L.H);
  }
  // Scenario 3 routes the probe to its own experts (2k, 2k+1 for token 2): compare it with the
  // probe alone on those experts.
  std::vector<int32_t> own = {static_cast<int32_t>(2 * L.k), static_cast<int32_t>(2 * L.k + 1)};
  const std::vector<float> alone = run_moe_mlp(L, probe, own, probe_w, gemm);
  rows.push_back(alone);
  return rows;
}

MoeLayer random_layer() {
  MoeLayer L{8, 2, 256, 128, {}, {}};
  L.gate_up = cuda_test::random_bf16(static_cast<size_t>(L.E) * 2 * L.W * L.H, 21, 0.08f);
  L.down = cuda_test::random_bf16(static_cast<size_t>(L.E) * L.H * L.W, 22, 0.08f);
  return L;
}

bool same_row(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

TEST(MoeInvariance, ATokensRowIsTheSameAloneAmongManyAndUnderSkew) {
  VOSTI_SKIP_WITHOUT_CUDA();
  const MoeLayer L = random_layer();
  const auto rows = probe_rows(L, moe_grouped_gemm);
  ASSERT_EQ(rows.size(), 5u);
  EXPECT_TRUE(same_row(rows[1], rows[0])) << "among 300 tokens sharing its expert";
  EXPECT_TRUE(same_row(rows[2], rows[0])) << "all 260 tokens on its experts";
  EXPECT_TRUE(same_row(rows[3], rows[4])) << "every expert once vs alone on the same experts";
  double norm = 0;
  for (float v : rows[0]) norm += double(v) * v;
  EXPECT_GT(norm, 0.0) << "the probe's output is not all zero";
}

TEST(MoeInvariance, APlantedCountDependentSplitIsCaught) {
  VOSTI_SKIP_WITHOUT_CUDA();
  const MoeLayer L = random_layer();
  const auto rows = probe_rows(L, planted_grouped_gemm);
  ASSERT_EQ(rows.size(), 5u);
  // Alone (one row per expert: one chain) the planted kernel is the shipped one...
  const auto shipped = probe_rows(L, moe_grouped_gemm);
  EXPECT_TRUE(same_row(rows[0], shipped[0]));
  // ...and among tokens sharing its experts its bits move: the harness above would fail on it.
  EXPECT_FALSE(same_row(rows[1], rows[0])) << "the planted split went unnoticed among 300 tokens";
  EXPECT_FALSE(same_row(rows[2], rows[0])) << "the planted split went unnoticed under skew";
}

}  // namespace
}  // namespace vosti
