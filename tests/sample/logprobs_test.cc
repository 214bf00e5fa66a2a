#include "sample/logprobs.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

namespace vosti {
namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

// The definition in logprobs.h, written out directly.
float reference_logprob(const std::vector<float>& logits, size_t token) {
  std::vector<float> l = logits;
  for (float& x : l) x = std::isnan(x) ? -kInf : x;
  float m = -kInf;
  for (const float x : l) m = x > m ? x : m;
  double lanes[128] = {};  // lane sums: ids i % 128 == j in ascending order (kSumLanes)
  for (size_t i = 0; i < l.size(); ++i) lanes[i % 128] += exp_from_max(l[i], m);
  double z = 0.0;
  for (const double lane : lanes) z += lane;
  const float d = l[token] == m ? 0.0f : l[token] - m;
  return static_cast<float>(static_cast<double>(d) - std::log(z));
}

TEST(Logprobs, MatchTheDefinitionBitForBit) {
  const std::vector<float> logits = {0.3f, -1.25f, 4.0f, 4.0f, kNaN, -kInf, 2.5f, -30.0f};
  for (size_t t = 0; t < logits.size(); ++t) {
    const ScoredToken s = score_token(logits, static_cast<int32_t>(t), 0);
    EXPECT_EQ(s.logprob, reference_logprob(logits, t)) << t;
  }
  EXPECT_EQ(score_token(logits, 4, 0).logprob, -kInf);  // NaN logit: -inf
  EXPECT_EQ(score_token(logits, 5, 0).logprob, -kInf);
}

TEST(Logprobs, LongRowsMatchTheDefinitionBitForBit) {
  std::vector<float> logits(1234);  // spans several 512-wide chunks and a ragged tail
  for (size_t i = 0; i < logits.size(); ++i) logits[i] = std::sin(static_cast<float>(i) * 0.37f) * 9.0f;
  logits[700] = kNaN;
  for (const size_t t : {0ul, 1ul, 511ul, 512ul, 700ul, 1233ul})
    EXPECT_EQ(score_token(logits, static_cast<int32_t>(t), 0).logprob, reference_logprob(logits, t)) << t;
  // The top list against a full sort.
  const ScoredToken s = score_token(logits, 0, 20);
  std::vector<int32_t> ids(logits.size());
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>(i);
  auto value = [&](int32_t i) { return std::isnan(logits[i]) ? -kInf : logits[i]; };
  std::sort(ids.begin(), ids.end(),
            [&](int32_t a, int32_t b) { return value(a) > value(b) || (value(a) == value(b) && a < b); });
  ASSERT_EQ(s.top.size(), 20u);
  for (size_t i = 0; i < 20; ++i) EXPECT_EQ(s.top[i].token, ids[i]) << i;
}

TEST(Logprobs, AgreeWithExactSoftmax) {
  const std::vector<float> logits = {1.0f, 2.0f, 3.0f, -1.0f};
  double z = 0.0;
  for (const float x : logits) z += std::exp(static_cast<double>(x));
  for (size_t t = 0; t < logits.size(); ++t)
    EXPECT_NEAR(score_token(logits, static_cast<int32_t>(t), 0).logprob, logits[t] - std::log(z), 1e-6);
}

TEST(Logprobs, TopListIsBestFirstWithTiesByLowestId) {
  const std::vector<float> logits = {1.0f, 5.0f, kNaN, 5.0f, 3.0f, 5.0f, -kInf};
  const ScoredToken s = score_token(logits, 0, 4);
  ASSERT_EQ(s.top.size(), 4u);
  const int32_t want[] = {1, 3, 5, 4};
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(s.top[i].token, want[i]);
    EXPECT_EQ(s.top[i].logprob, reference_logprob(logits, static_cast<size_t>(want[i])));
  }
  // Asking for more than the vocabulary gives all tokens; NaN (as -inf) ranks with -inf by id.
  const ScoredToken all = score_token(logits, 0, 20);
  ASSERT_EQ(all.top.size(), logits.size());
  EXPECT_EQ(all.top[4].token, 0);
  EXPECT_EQ(all.top[5].token, 2);
  EXPECT_EQ(all.top[6].token, 6);
  EXPECT_TRUE(score_token(logits, 0, 0).top.empty());
}

TEST(Logprobs, DegenerateRowsStayDefined) {
  // All -inf: every token equally likely.
  const ScoredToken s = score_token(std::vector<float>{-kInf, -kInf}, 1, 0);
  EXPECT_EQ(s.logprob, static_cast<float>(-std::log(2.0)));
  // +inf dominates: the +inf tokens share the mass, finite ones get -inf.
  const std::vector<float> inf_row = {kInf, 0.0f, kInf};
  EXPECT_EQ(score_token(inf_row, 0, 0).logprob, static_cast<float>(-std::log(2.0)));
  EXPECT_EQ(score_token(inf_row, 1, 0).logprob, -kInf);
}

}  // namespace
}  // namespace vosti
