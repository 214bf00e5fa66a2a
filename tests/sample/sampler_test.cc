#include "sample/sampler.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <set>
#include <vector>

#include "sample/philox.h"
#include "tests/sample/sampler_reference.h"

namespace vosti {
namespace {

using testing::reference_choose;
using testing::reference_draw_set;

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

SamplingParams greedy() {
  SamplingParams p;
  p.temperature = 0.0f;
  return p;
}

int32_t choose(const std::vector<float>& logits, const SamplingParams& p, std::vector<int32_t> prompt = {},
               std::vector<int32_t> output = {}, uint64_t seed = 1, int64_t pos = 0) {
  SamplerScratch scratch;
  return choose_token(logits, p, seed, pos, prompt, output, scratch);
}

TEST(Sampler, GreedyTiesGoToTheLowestId) {
  EXPECT_EQ(choose({1.0f, 3.0f, 3.0f, 2.0f}, greedy()), 1);
  EXPECT_EQ(choose({3.0f, 3.0f, 3.0f}, greedy()), 0);
  EXPECT_EQ(choose({-kInf, -kInf, -kInf}, greedy()), 0);
  EXPECT_EQ(choose({kNaN, -1.0f, kNaN, -1.0f}, greedy()), 1);  // NaN counts as -inf
  EXPECT_EQ(choose({0.0f, kInf, kInf}, greedy()), 1);
  SamplingParams tiny = greedy();
  tiny.temperature = 0.5f * kGreedyTemperature;  // below the epsilon: still greedy
  EXPECT_EQ(choose({1.0f, 2.0f, 2.0f}, tiny), 1);
}

TEST(Sampler, PenaltiesFollowHfAndOpenAiSemantics) {
  SamplingParams p = greedy();
  p.repetition_penalty = 2.0f;
  // Positive logits are divided: 2.0 -> 1.0 < 1.5.
  EXPECT_EQ(choose({2.0f, 1.5f}, p, {0}, {}), 1);
  // Negative logits are multiplied: -1.0 -> -2.0 < -1.5; the penalty covers output tokens too.
  EXPECT_EQ(choose({-1.0f, -1.5f}, p, {}, {0}), 1);
  // A token repeated many times is penalised once.
  EXPECT_EQ(choose({2.0f, 0.9f}, p, {0, 0, 0}, {0, 0}), 0);

  SamplingParams f = greedy();
  f.frequency_penalty = 0.1f;
  EXPECT_EQ(choose({1.0f, 0.85f}, f, {}, {0, 0}), 1);     // 1.0 - 0.2 = 0.8
  EXPECT_EQ(choose({1.0f, 0.85f}, f, {}, {0}), 0);        // 1.0 - 0.1 = 0.9
  EXPECT_EQ(choose({1.0f, 0.85f}, f, {0, 0, 0}, {}), 0);  // prompt tokens do not count
  SamplingParams pr = greedy();
  pr.presence_penalty = 0.2f;
  EXPECT_EQ(choose({1.0f, 0.85f}, pr, {}, {0}), 1);        // 1.0 - 0.2
  EXPECT_EQ(choose({1.0f, 0.75f}, pr, {}, {0, 0, 0}), 0);  // presence does not grow with count
  SamplingParams bias = greedy();
  bias.logit_bias = {{2, 5.0f}};
  EXPECT_EQ(choose({4.0f, 3.0f, -0.5f}, bias), 2);
}

TEST(Sampler, TopKKeepsExactlyKWithTiesToLowestIds) {
  SamplingParams p;
  p.top_k = 2;
  SamplerScratch scratch;
  const std::vector<float> logits = {1.0f, 2.0f, 2.0f, 2.0f, 0.0f};
  const auto dist = sampling_distribution(logits, p, {}, {}, scratch);
  ASSERT_EQ(dist.size(), 2u);
  EXPECT_EQ(dist[0].token, 1);
  EXPECT_EQ(dist[1].token, 2);
  EXPECT_EQ(dist[0].prob, 0.5);
  EXPECT_EQ(dist[1].prob, 0.5);
}

TEST(Sampler, TopPKeepsTheShortestPrefixReachingP) {
  // Probabilities 0.5, 0.25, 0.125, 0.125 (powers of two: exact in float and double).
  const std::vector<float> logits = {std::log(0.125f), std::log(0.5f), std::log(0.25f), std::log(0.125f)};
  SamplerScratch scratch;
  SamplingParams p;
  p.top_p = 0.5f;  // the best token alone reaches 0.5
  auto dist = sampling_distribution(logits, p, {}, {}, scratch);
  ASSERT_EQ(dist.size(), 1u);
  EXPECT_EQ(dist[0].token, 1);
  p.top_p = 0.6f;  // needs the second
  dist = sampling_distribution(logits, p, {}, {}, scratch);
  ASSERT_EQ(dist.size(), 2u);
  p.top_p = 0.8f;  // 0.75 < 0.8: needs a third; of the tied 0.125s the lowest id (0) is kept
  dist = sampling_distribution(logits, p, {}, {}, scratch);
  ASSERT_EQ(dist.size(), 3u);
  EXPECT_EQ(dist[0].token, 0);
  EXPECT_EQ(dist[1].token, 1);
  EXPECT_EQ(dist[2].token, 2);
  p.top_p = 1e-6f;  // never empty
  dist = sampling_distribution(logits, p, {}, {}, scratch);
  ASSERT_EQ(dist.size(), 1u);
}

TEST(Sampler, MinPIsRelativeToTheBestToken) {
  const std::vector<float> logits = {std::log(0.125f), std::log(0.5f), std::log(0.25f), std::log(0.125f)};
  SamplerScratch scratch;
  SamplingParams p;
  p.min_p = 0.5f;  // keeps p >= 0.25
  auto dist = sampling_distribution(logits, p, {}, {}, scratch);
  ASSERT_EQ(dist.size(), 2u);
  EXPECT_EQ(dist[0].token, 1);
  EXPECT_EQ(dist[1].token, 2);
  p.min_p = 1.0f;
  dist = sampling_distribution(logits, p, {}, {}, scratch);
  ASSERT_EQ(dist.size(), 1u);
  EXPECT_EQ(dist[0].token, 1);
}

// Random small cases with many ties and odd values against the brute-force reference.
TEST(Sampler, MatchesBruteForceReferenceBitForBit) {
  std::mt19937 rng(1234);
  auto pick = [&](auto... values) {
    const std::vector<std::common_type_t<decltype(values)...>> v = {values...};
    return v[std::uniform_int_distribution<size_t>(0, v.size() - 1)(rng)];
  };
  SamplerScratch scratch;  // shared by all cases on purpose
  int num_checked = 0;
  for (int c = 0; c < 4000; ++c) {
    const int vocab = std::uniform_int_distribution<int>(1, 40)(rng);
    std::vector<float> logits(static_cast<size_t>(vocab));
    for (float& x : logits) {
      const int kind = std::uniform_int_distribution<int>(0, 39)(rng);
      x = kind == 0                  ? kNaN
          : kind == 1                ? -kInf
          : kind == 2 && c % 50 == 0 ? kInf
                                     : static_cast<float>(std::uniform_int_distribution<int>(-6, 6)(rng)) * 0.37f;
    }
    SamplingParams p;
    p.temperature = pick(0.0f, 0.3f, 1.0f, 1.0f, 1.7f);
    p.top_k = pick(0, 0, 1, 2, 3, 7, vocab, vocab + 1);
    p.top_p = pick(1.0f, 1.0f, 0.95f, 0.7f, 0.3f, 0.05f);
    p.min_p = pick(0.0f, 0.0f, 0.05f, 0.3f, 1.0f);
    p.repetition_penalty = pick(1.0f, 1.3f, 0.8f);
    p.presence_penalty = pick(0.0f, 0.5f, -0.7f);
    p.frequency_penalty = pick(0.0f, 0.25f, -1.1f);
    if (pick(0, 1) == 1) p.logit_bias = {{0, 3.5f}, {vocab - 1, -2.25f}};
    if (vocab == 1) p.logit_bias.resize(std::min<size_t>(p.logit_bias.size(), 1));
    ASSERT_TRUE(p.validate(vocab).ok());
    std::vector<int32_t> prompt(static_cast<size_t>(std::uniform_int_distribution<int>(0, 6)(rng)));
    std::vector<int32_t> output(static_cast<size_t>(std::uniform_int_distribution<int>(0, 6)(rng)));
    for (auto& t : prompt) t = std::uniform_int_distribution<int32_t>(0, vocab - 1)(rng);
    for (auto& t : output) t = std::uniform_int_distribution<int32_t>(0, vocab - 1)(rng);

    const auto ref = reference_draw_set(logits, p, prompt, output);
    const auto dist = sampling_distribution(logits, p, prompt, output, scratch);
    if (ref.greedy >= 0) {
      ASSERT_EQ(dist.size(), 1u);
      EXPECT_EQ(dist[0].token, ref.greedy) << "case " << c;
    } else {
      std::vector<TokenProb> expected;
      for (const int32_t t : ref.kept)
        if (ref.w[t] > 0.0f) expected.push_back({t, static_cast<double>(ref.w[t]) / ref.total});
      ASSERT_EQ(dist.size(), expected.size()) << "case " << c;
      for (size_t i = 0; i < dist.size(); ++i) {
        EXPECT_EQ(dist[i].token, expected[i].token) << "case " << c;
        EXPECT_EQ(dist[i].prob, expected[i].prob) << "case " << c;
      }
    }
    for (int64_t pos = 0; pos < 4; ++pos) {
      const uint64_t seed = 77 + static_cast<uint64_t>(c);
      const int32_t want = reference_choose(ref, sampling_uniform(seed, static_cast<uint64_t>(pos)));
      EXPECT_EQ(choose_token(logits, p, seed, pos, prompt, output, scratch), want) << "case " << c;
      ++num_checked;
    }
  }
  EXPECT_EQ(num_checked, 16000);
  for (const int32_t count : scratch.counts) ASSERT_EQ(count, 0);
  for (const uint8_t mark : scratch.seen) ASSERT_EQ(mark, 0);
}

// Large vocabularies take the partial-sort paths (top-k selection, growing nucleus).
TEST(Sampler, LargeVocabularyFiltersMatchReference) {
  const size_t vocab = 152064;
  std::vector<float> logits(vocab);
  for (size_t i = 0; i < vocab; ++i) {
    const PhiloxCounter x = philox4x32_10({static_cast<uint32_t>(i), 0, 9, 0}, {5, 6});
    logits[i] = static_cast<float>(uniform_from_philox(x) * 12.0 - 6.0);
  }
  logits[100] = logits[200] = 8.0f;  // a tie at the top
  SamplerScratch scratch;
  for (const auto& [k, top_p, min_p] : std::vector<std::tuple<int32_t, float, float>>{{0, 0.9f, 0.0f},
                                                                                      {0, 0.999f, 0.0f},
                                                                                      {50, 1.0f, 0.0f},
                                                                                      {2000, 0.8f, 0.0f},
                                                                                      {0, 1.0f, 0.01f},
                                                                                      {1, 1.0f, 0.0f}}) {
    SamplingParams p;
    p.top_k = k;
    p.top_p = top_p;
    p.min_p = min_p;
    p.temperature = 0.8f;
    const auto ref = reference_draw_set(logits, p, {}, {});
    for (int64_t pos = 0; pos < 3; ++pos) {
      EXPECT_EQ(choose_token(logits, p, 99, pos, {}, {}, scratch), reference_choose(ref, sampling_uniform(99, pos)))
          << "top_k " << k << " top_p " << top_p;
    }
  }
}

TEST(Sampler, EquivalentFiltersGiveIdenticalDraws) {
  std::vector<float> logits(300);
  for (size_t i = 0; i < logits.size(); ++i) logits[i] = static_cast<float>((i * 37) % 101) * 0.05f;
  SamplerScratch scratch;
  SamplingParams off;
  SamplingParams k_all;
  k_all.top_k = 300;
  for (int64_t pos = 0; pos < 200; ++pos)
    ASSERT_EQ(choose_token(logits, off, 3, pos, {}, {}, scratch), choose_token(logits, k_all, 3, pos, {}, {}, scratch));
}

TEST(Sampler, SameSeedAndPositionGiveTheSameToken) {
  std::vector<float> logits(1000, 0.0f);  // uniform over 1000 tokens
  SamplingParams p;
  SamplerScratch scratch;
  std::set<int32_t> tokens;
  for (int64_t pos = 0; pos < 100; ++pos) {
    const int32_t t = choose_token(logits, p, 2024, pos, {}, {}, scratch);
    EXPECT_EQ(choose_token(logits, p, 2024, pos, {}, {}, scratch), t);
    SamplerScratch fresh;
    EXPECT_EQ(choose_token(logits, p, 2024, pos, {}, {}, fresh), t);
    tokens.insert(t);
  }
  EXPECT_GT(tokens.size(), 80u);  // different positions draw differently
  // Different seeds at one position also differ.
  std::set<int32_t> by_seed;
  for (uint64_t seed = 0; seed < 100; ++seed) by_seed.insert(choose_token(logits, p, seed, 0, {}, {}, scratch));
  EXPECT_GT(by_seed.size(), 80u);
}

struct Stream {
  std::vector<float> logits;
  SamplingParams params;
  uint64_t seed;
  std::vector<int32_t> prompt;
};

// Each request's tokens and logprobs are a function of its own inputs only: running it
// alone with fresh scratch or interleaved with other requests through one scratch agree.
TEST(Sampler, ResultsDoNotDependOnOtherRequestsOrScratch) {
  std::vector<Stream> streams(3);
  streams[0] = {std::vector<float>(50), SamplingParams{}, 11, {1, 2, 3}};
  streams[1] = {std::vector<float>(700), SamplingParams{}, 12, {5, 5, 600}};
  streams[2] = {std::vector<float>(9), SamplingParams{}, 13, {}};
  streams[0].params.top_k = 10;
  streams[0].params.num_top_logprobs = 5;
  streams[1].params.repetition_penalty = 1.4f;
  streams[1].params.frequency_penalty = 0.3f;
  streams[1].params.top_p = 0.9f;
  streams[2].params.temperature = 0.0f;
  streams[2].params.presence_penalty = 1.0f;
  for (size_t r = 0; r < streams.size(); ++r)
    for (size_t i = 0; i < streams[r].logits.size(); ++i)
      streams[r].logits[i] = std::sin(static_cast<float>(i * (r + 2))) * 3.0f;

  constexpr int kSteps = 40;
  auto run = [&](size_t r, std::vector<int32_t>& out, SamplerScratch& scratch, int64_t pos) {
    const Stream& s = streams[r];
    return sample_token(s.logits, s.params, s.seed, pos, s.prompt, out, scratch);
  };
  std::vector<std::vector<ScoredToken>> alone(3);
  for (size_t r = 0; r < 3; ++r) {
    std::vector<int32_t> out;
    for (int64_t pos = 0; pos < kSteps; ++pos) {
      SamplerScratch fresh;
      alone[r].push_back(run(r, out, fresh, pos));
      out.push_back(alone[r].back().token);
    }
  }
  SamplerScratch shared;
  std::vector<std::vector<int32_t>> outs(3);
  for (int64_t pos = 0; pos < kSteps; ++pos) {
    for (size_t k = 0; k < 3; ++k) {
      const size_t r = (static_cast<size_t>(pos) + k * 2) % 3;  // a different order each step
      const ScoredToken got = run(r, outs[r], shared, pos);
      const ScoredToken& want = alone[r][static_cast<size_t>(pos)];
      ASSERT_EQ(got.token, want.token);
      ASSERT_EQ(got.logprob, want.logprob);
      ASSERT_EQ(got.top.size(), want.top.size());
      for (size_t i = 0; i < got.top.size(); ++i) {
        EXPECT_EQ(got.top[i].token, want.top[i].token);
        EXPECT_EQ(got.top[i].logprob, want.top[i].logprob);
      }
      outs[r].push_back(got.token);
    }
  }
}

// The only test with a tolerance: 20k draws at distinct positions follow the distribution.
TEST(Sampler, DrawsFollowTheDistribution) {
  const std::vector<float> logits = {0.0f, 1.0f, -1.0f, 2.0f, 0.5f, -kInf};
  SamplingParams p;
  p.temperature = 1.3f;
  SamplerScratch scratch;
  const auto dist = sampling_distribution(logits, p, {}, {}, scratch);
  ASSERT_EQ(dist.size(), 5u);  // the -inf token has weight 0
  constexpr int kDraws = 20000;
  std::vector<int> counts(logits.size(), 0);
  for (int64_t pos = 0; pos < kDraws; ++pos)
    ++counts[static_cast<size_t>(choose_token(logits, p, 7, pos, {}, {}, scratch))];
  EXPECT_EQ(counts[5], 0);
  for (const TokenProb& tp : dist) {
    const double freq = counts[static_cast<size_t>(tp.token)] / static_cast<double>(kDraws);
    EXPECT_NEAR(freq, tp.prob, 0.015) << "token " << tp.token;
  }
}

TEST(Sampler, ReportsRawLogprobsNotProcessedOnes) {
  const std::vector<float> logits = {1.0f, 2.0f, 3.0f};
  SamplingParams p = greedy();
  p.logit_bias = {{0, 100.0f}};
  p.num_top_logprobs = 2;
  SamplerScratch scratch;
  const ScoredToken got = sample_token(logits, p, 0, 0, {}, {}, scratch);
  EXPECT_EQ(got.token, 0);
  const ScoredToken raw = score_token(logits, 0, 2);
  EXPECT_EQ(got.logprob, raw.logprob);
  EXPECT_NEAR(got.logprob, 1.0 - std::log(std::exp(1.0) + std::exp(2.0) + std::exp(3.0)), 1e-6);
  ASSERT_EQ(got.top.size(), 2u);
  EXPECT_EQ(got.top[0].token, 2);
  EXPECT_EQ(got.top[1].token, 1);
}

// The processed row of logprobs.h written out: s after bias, penalties and temperature, with the
// tokens the filters dropped at -inf, for a row where top-k alone filters.
TEST(Sampler, ProcessedModesReportTheRowTheSamplerDrewFrom) {
  const std::vector<float> logits = {1.0f, 2.0f, 3.0f, 0.5f, 2.5f};
  SamplingParams p;
  p.temperature = 0.5f;
  p.top_k = 2;
  p.logit_bias = {{3, 10.0f}};  // token 3: 10.5 -> 21 after temperature, the best
  p.num_top_logprobs = 4;
  const std::vector<float> s = {2.0f, 4.0f, 6.0f, 21.0f, 5.0f};  // (l + bias) / T
  std::vector<float> processed(5, -kInf);
  processed[3] = s[3];
  processed[2] = s[2];  // top-2: tokens 3 and 2
  for (uint64_t seed = 1; seed <= 8; ++seed) {
    SamplerScratch scratch;
    const ScoredToken lp = sample_token(logits, p, seed, 0, {}, {}, scratch, LogprobsMode::kProcessedLogprobs);
    const ScoredToken lg = sample_token(logits, p, seed, 0, {}, {}, scratch, LogprobsMode::kProcessedLogits);
    const ScoredToken raw = sample_token(logits, p, seed, 0, {}, {}, scratch, LogprobsMode::kRawLogprobs);
    const ScoredToken raw_values = sample_token(logits, p, seed, 0, {}, {}, scratch, LogprobsMode::kRawLogits);
    EXPECT_EQ(lp.token, raw.token);  // the mode never changes the token
    EXPECT_EQ(lg.token, raw.token);
    EXPECT_EQ(raw_values.token, raw.token);
    const ScoredToken want_lp = score_token(processed, lp.token, 4);
    EXPECT_EQ(lp.logprob, want_lp.logprob);
    EXPECT_EQ(lg.logprob, processed[static_cast<size_t>(lg.token)]);
    EXPECT_EQ(raw_values.logprob, logits[static_cast<size_t>(raw.token)]);
    EXPECT_EQ(raw.logprob, score_token(logits, raw.token, 0).logprob);
    ASSERT_EQ(lp.top.size(), 4u);
    EXPECT_EQ(lp.top[0].token, 3);
    EXPECT_EQ(lp.top[1].token, 2);
    EXPECT_EQ(lp.top[2].token, 0);  // dropped tokens rank by id: -inf
    EXPECT_EQ(lp.top[2].logprob, -kInf);
    EXPECT_EQ(lg.top[0].logprob, 21.0f);
    EXPECT_EQ(lg.top[1].logprob, 6.0f);
    EXPECT_EQ(raw_values.top[0].token, 2);
    EXPECT_EQ(raw_values.top[0].logprob, 3.0f);
  }
}

TEST(Sampler, ProcessedModesOfAGreedyRequestKeepEveryToken) {
  const std::vector<float> logits = {1.0f, 2.0f, 3.0f, kNaN};
  SamplingParams p = greedy();
  p.repetition_penalty = 2.0f;  // HF: a seen positive logit halves
  p.num_top_logprobs = 4;
  const std::vector<int32_t> prompt = {2};
  SamplerScratch scratch;
  const ScoredToken lg = sample_token(logits, p, 0, 0, prompt, {}, scratch, LogprobsMode::kProcessedLogits);
  EXPECT_EQ(lg.token, 1);  // 3 / 2 = 1.5 < 2
  ASSERT_EQ(lg.top.size(), 4u);
  EXPECT_EQ(lg.top[0].logprob, 2.0f);
  EXPECT_EQ(lg.top[1].logprob, 1.5f);
  EXPECT_EQ(lg.top[2].logprob, 1.0f);
  EXPECT_EQ(lg.top[3].logprob, -kInf);  // NaN: -inf
  // Without penalties, bias, temperature or filters the processed row is the raw one, bit for bit.
  const ScoredToken raw = sample_token(logits, greedy(), 0, 0, {}, {}, scratch, LogprobsMode::kRawLogprobs);
  const ScoredToken proc = sample_token(logits, greedy(), 0, 0, {}, {}, scratch, LogprobsMode::kProcessedLogprobs);
  EXPECT_EQ(raw.logprob, proc.logprob);
}

TEST(Sampler, MinPDropsAreMinusInfinityInTheProcessedRow) {
  const std::vector<float> logits = {0.0f, 3.0f, 2.9f, -5.0f};
  SamplingParams p;
  p.min_p = 0.5f;  // keeps tokens within ln 2 of the best: 1 and 2
  p.num_top_logprobs = 4;
  SamplerScratch scratch;
  const ScoredToken lg = sample_token(logits, p, 7, 0, {}, {}, scratch, LogprobsMode::kProcessedLogits);
  EXPECT_TRUE(lg.token == 1 || lg.token == 2);
  ASSERT_EQ(lg.top.size(), 4u);
  EXPECT_EQ(lg.top[0].logprob, 3.0f);
  EXPECT_EQ(lg.top[1].logprob, 2.9f);
  EXPECT_EQ(lg.top[2].logprob, -kInf);
  EXPECT_EQ(lg.top[3].logprob, -kInf);
}

TEST(Sampler, LogprobsModesHaveVllmsNames) {
  for (const char* name : {"raw_logprobs", "raw_logits", "processed_logprobs", "processed_logits"}) {
    LogprobsMode m{};
    ASSERT_TRUE(parse_logprobs_mode(name, m)) << name;
    EXPECT_STREQ(logprobs_mode_name(m), name);
  }
  LogprobsMode m{};
  EXPECT_FALSE(parse_logprobs_mode("processed", m));
}

TEST(Sampler, FreshSeedsDiffer) {
  std::set<uint64_t> seeds;
  for (int i = 0; i < 16; ++i) seeds.insert(fresh_seed());
  EXPECT_GT(seeds.size(), 14u);
}

}  // namespace
}  // namespace vosti
