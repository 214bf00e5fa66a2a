// The device sampler, digests and token masks (kernels/cuda/sampler/) against the host's
// sample_token / score_token / logits_digest / apply_token_bitmask on the same rows, bit for bit: random
// rows with ties, infinities, NaN and signed zeros, flat and peaked, under random sampling
// parameters (greedy, temperature, top-k, top-p, min-p, penalties, logit bias) and seeds, in
// one batch and alone. GPU only (skips with "no CUDA device"); rows the GPU's own forward
// produced are checked by the engine tests (check_device_sampler).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "kernels/cuda/sampler/digest_kernels.h"
#include "kernels/cuda/sampler/sampler_kernels.h"
#include "kernels/cuda/sampler/token_mask_kernels.h"
#include "runner/cuda/device_rows.h"
#include "runner/cpu/host_rows.h"
#include "sample/token_bitmask.h"
#include "tests/kernels_cuda/cuda_test_util.h"

namespace vosti {
namespace {

using cuda_test::DeviceBuffer;

struct Case {
  std::vector<float> row;
  SamplingParams params;
  uint64_t seed = 0;
  std::vector<int32_t> prompt, outputs;
  WantedRow wanted;
};

// A logits row of `vocab` values with the awkward cases the sampler must order exactly.
std::vector<float> random_row(int64_t vocab, std::mt19937& rng, int style) {
  std::vector<float> row(static_cast<size_t>(vocab));
  std::normal_distribution<float> n(0.0f, style == 0 ? 0.3f : (style == 1 ? 3.0f : 12.0f));
  for (float& x : row) x = n(rng);
  const float inf = std::numeric_limits<float>::infinity();
  const int extras = static_cast<int>(rng() % 12);
  for (int e = 0; e < extras; ++e) {
    const size_t i = rng() % row.size();
    switch (rng() % 6) {
      case 0:
        row[i] = -inf;
        break;
      case 1:
        row[i] = std::numeric_limits<float>::quiet_NaN();
        break;
      case 2:
        row[i] = 0.0f;
        break;
      case 3:
        row[i] = -0.0f;
        break;
      case 4:
        row[i] = row[rng() % row.size()];  // a tie
        break;
      default:
        row[i] = 20.0f;  // shared maxima
        break;
    }
  }
  if (style == 3) std::fill(row.begin(), row.end(), 1.5f);  // all tied
  return row;
}

SamplingParams random_params(std::mt19937& rng, int64_t vocab) {
  SamplingParams p;
  const int kind = static_cast<int>(rng() % 8);
  p.temperature = kind == 0 ? 0.0f : (kind == 1 ? 1.0f : 0.3f + static_cast<float>(rng() % 100) / 60.0f);
  const int32_t ks[] = {0, 0, 1, 5, 50, 1000, 1500, static_cast<int32_t>(vocab)};
  p.top_k = ks[rng() % 8];
  const float ps[] = {1.0f, 1.0f, 0.95f, 0.5f, 0.1f, 0.999f};
  p.top_p = ps[rng() % 6];
  p.min_p = rng() % 3 == 0 ? 0.05f : 0.0f;
  if (rng() % 4 == 0) p.repetition_penalty = 1.3f;
  if (rng() % 4 == 0) p.frequency_penalty = 0.5f;
  if (rng() % 4 == 0) p.presence_penalty = -0.25f;
  if (rng() % 4 == 0) {
    const auto first = static_cast<int32_t>(rng() % static_cast<uint32_t>(vocab - 3));
    for (int i = 0; i < 3; ++i) p.logit_bias.push_back({first + i, 5.0f - 4.0f * static_cast<float>(i)});
  }
  p.num_top_logprobs = static_cast<int32_t>(rng() % 6);
  EXPECT_TRUE(p.validate(vocab).ok()) << p.validate(vocab).to_string();
  return p;
}

struct DeviceRun {
  std::vector<SamplerRowResult> results;
};

DeviceRun run_device(const std::vector<Case>& cases, int64_t vocab) {
  const int64_t stride = (vocab + 7) / 8 * 8;  // like the logits buffer's vocab_rows
  std::vector<float> logits(static_cast<size_t>(stride) * cases.size(), 0.0f);
  std::vector<SamplerRowTask> tasks;
  std::vector<SamplerAdjust> adjusts;
  for (size_t i = 0; i < cases.size(); ++i) {
    std::copy(cases[i].row.begin(), cases[i].row.end(), logits.begin() + static_cast<int64_t>(i) * stride);
    RequestLogitsTask t;
    t.sampling = &cases[i].params;
    t.seed = cases[i].seed;
    t.prompt = cases[i].prompt;
    t.outputs = cases[i].outputs;
    SamplerRowTask st = sampler_task(t, cases[i].wanted);
    if (cases[i].wanted.kind == RowKind::kScore) {
      tasks.push_back(st);
      continue;
    }
    const size_t before = adjusts.size();
    append_sampler_adjusts(t, cases[i].wanted, adjusts);
    st.adjust_begin = static_cast<int32_t>(before);
    st.adjust_count = static_cast<int32_t>(adjusts.size() - before);
    tasks.push_back(st);
  }
  if (adjusts.empty()) adjusts.push_back(SamplerAdjust{});
  DeviceBuffer<float> d_logits(logits), scratch(static_cast<size_t>(vocab) * cases.size());
  DeviceBuffer<SamplerRowTask> d_tasks(tasks);
  DeviceBuffer<SamplerAdjust> d_adjusts(adjusts);
  DeviceBuffer<SamplerRowResult> d_results(cases.size());
  const Status s = sample_rows(d_logits.get(), stride, vocab, d_tasks.get(), d_adjusts.get(), scratch.get(),
                               d_results.get(), static_cast<int64_t>(cases.size()), nullptr);
  EXPECT_TRUE(s.ok()) << s.to_string();
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  return {d_results.download()};
}

// Compares the device's result for each case with the host's; returns how many the device
// handed back to the host (fallbacks), which the runner then samples on the host.
int64_t compare_with_host(const std::vector<Case>& cases, const DeviceRun& run, const std::string& what) {
  SamplerScratch scratch;
  int64_t fallbacks = 0;
  for (size_t i = 0; i < cases.size(); ++i) {
    const Case& c = cases[i];
    RequestLogitsTask t;
    t.sampling = &c.params;
    t.seed = c.seed;
    t.prompt = c.prompt;
    t.outputs = c.outputs;
    const RowResult host = finish_row_on_host(c.row, c.wanted, t, scratch);
    const SamplerRowResult& d = run.results[i];
    if (d.status == kSamplerHostFallback) {
      ++fallbacks;
      EXPECT_EQ(c.wanted.kind, RowKind::kSample) << what << " case " << i << ": a scored row fell back";
      continue;
    }
    const RowResult dev = row_from_device(d, c.wanted, LogprobsMode::kRawLogprobs);
    EXPECT_TRUE(same_scored(host.scored, dev.scored))
        << what << " case " << i << " (T " << c.params.temperature << ", top_k " << c.params.top_k << ", top_p "
        << c.params.top_p << ", min_p " << c.params.min_p << ", rep " << c.params.repetition_penalty << ", bias "
        << c.params.logit_bias.size() << "): host token " << host.scored.token << " lp " << host.scored.logprob
        << ", device token " << dev.scored.token << " lp " << dev.scored.logprob;
  }
  return fallbacks;
}

class DeviceSampler : public ::testing::TestWithParam<int64_t> {};

TEST_P(DeviceSampler, MatchesTheHostSamplerBitForBit) {
  VOSTI_SKIP_WITHOUT_CUDA();
  const int64_t vocab = GetParam();
  std::mt19937 rng(static_cast<uint32_t>(vocab));
  std::vector<Case> cases;
  for (int i = 0; i < 160; ++i) {
    Case c;
    c.row = random_row(vocab, rng, i % 4);
    c.params = random_params(rng, vocab);
    c.seed = (static_cast<uint64_t>(rng()) << 32) | rng();
    for (int k = 0; k < 1 + static_cast<int>(rng() % 40); ++k) c.prompt.push_back(static_cast<int32_t>(rng() % vocab));
    for (int k = 0; k < static_cast<int>(rng() % 30); ++k) c.outputs.push_back(static_cast<int32_t>(rng() % vocab));
    c.wanted.plan_index = 0;
    c.wanted.position = static_cast<int32_t>(c.prompt.size() + c.outputs.size()) - 1;
    if (i % 5 == 4) {
      c.wanted.kind = RowKind::kScore;
      c.wanted.target_token = c.prompt[0];
    }
    cases.push_back(std::move(c));
  }
  const DeviceRun batch = run_device(cases, vocab);
  const int64_t fallbacks = compare_with_host(cases, batch, "vocab " + std::to_string(vocab) + " batch");
  std::printf("[ device sampler ] vocab %lld: %zu rows, %lld handed to the host\n", static_cast<long long>(vocab),
              cases.size(), static_cast<long long>(fallbacks));
  EXPECT_LT(fallbacks, static_cast<int64_t>(cases.size()) / 4) << "the device should finish most rows itself";
  // A row alone gives the batch's result (the kernel never reads another row).
  for (size_t i = 0; i < cases.size(); i += 17) {
    const DeviceRun alone = run_device({cases[i]}, vocab);
    EXPECT_EQ(std::memcmp(&alone.results[0], &batch.results[i], sizeof(SamplerRowResult)), 0) << "case " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(Vocabularies, DeviceSampler, ::testing::Values(320, 4099, 49152, 151936, 262208));

TEST(DeviceDigest, MatchesTheHostDigest) {
  VOSTI_SKIP_WITHOUT_CUDA();
  std::mt19937 rng(2);
  for (const int64_t vocab : {61, 320, 1025, 49152, 128256, 151936}) {
    const int64_t stride = (vocab + 7) / 8 * 8;
    const int rows = 5;
    std::vector<float> logits(static_cast<size_t>(stride * rows));
    std::normal_distribution<float> n(0.0f, 2.0f);
    for (float& x : logits) x = n(rng);
    DeviceBuffer<float> d_logits(logits);
    const std::vector<int32_t> which = {3, 0, 4};
    DeviceBuffer<int32_t> d_rows(which);
    DeviceBuffer<uint64_t> d_out(2 * which.size());
    ASSERT_TRUE(digest_rows(d_logits.get(), stride, vocab, d_rows.get(), 3, d_out.get(), nullptr).ok());
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    const std::vector<uint64_t> out = d_out.download();
    for (size_t k = 0; k < which.size(); ++k) {
      const LogitsDigest host =
          logits_digest(std::span<const float>(logits.data() + which[k] * stride, static_cast<size_t>(vocab)));
      EXPECT_EQ(out[2 * k], host[0]) << "vocab " << vocab << " row " << which[k];
      EXPECT_EQ(out[2 * k + 1], host[1]) << "vocab " << vocab << " row " << which[k];
    }
  }
  EXPECT_EQ(digest_rows(nullptr, 60, 60, nullptr, 1, nullptr, nullptr).code(), StatusCode::kInvalidArgument);
}

// The device token mask writes what the host's apply_token_bitmask writes, byte for byte, on the
// rows it names and on no other row: random masks (dense, sparse, one token), vocabularies that end
// inside a mask word.
TEST(DeviceTokenMask, MatchesTheHostMask) {
  VOSTI_SKIP_WITHOUT_CUDA();
  std::mt19937 rng(3);
  for (const int64_t vocab : {61, 320, 1025, 49152, 151936, 262208}) {
    const int64_t stride = (vocab + 7) / 8 * 8, words = token_mask_words(vocab);
    const int rows = 5;
    std::vector<float> logits(static_cast<size_t>(stride * rows));
    std::normal_distribution<float> n(0.0f, 2.0f);
    for (float& x : logits) x = n(rng);
    const std::vector<int32_t> which = {3, 0, 4};
    std::vector<uint32_t> masks(which.size() * static_cast<size_t>(words), 0u);
    for (size_t k = 0; k < which.size(); ++k) {
      uint32_t* m = masks.data() + k * static_cast<size_t>(words);
      if (k == 0) {
        for (int64_t w = 0; w < words; ++w) m[w] = rng();  // about half allowed
      } else if (k == 1) {
        for (int i = 0; i < 40; ++i) {  // sparse
          const auto t = static_cast<int32_t>(rng() % static_cast<uint32_t>(vocab));
          m[t >> 5] |= 1u << (t & 31);
        }
      } else {
        const auto t = static_cast<int32_t>(vocab - 1);  // one token: the last
        m[t >> 5] |= 1u << (t & 31);
      }
    }
    DeviceBuffer<float> d_logits(logits);
    DeviceBuffer<int32_t> d_rows(which);
    DeviceBuffer<uint32_t> d_masks(masks);
    ASSERT_TRUE(apply_token_masks(d_logits.get(), stride, vocab, d_rows.get(), d_masks.get(), words,
                                  static_cast<int64_t>(which.size()), nullptr)
                    .ok());
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    std::vector<float> want = logits;
    for (size_t k = 0; k < which.size(); ++k)
      apply_token_bitmask(
          std::span<float>(want.data() + which[k] * stride, static_cast<size_t>(vocab)),
          std::span<const uint32_t>(masks.data() + k * static_cast<size_t>(words), static_cast<size_t>(words)));
    const std::vector<float> got = d_logits.download();
    EXPECT_EQ(std::memcmp(want.data(), got.data(), want.size() * sizeof(float)), 0) << "vocab " << vocab;
  }
  EXPECT_EQ(apply_token_masks(nullptr, 64, 64, nullptr, nullptr, 1, 1, nullptr).code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace vosti
