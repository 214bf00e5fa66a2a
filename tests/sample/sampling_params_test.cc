#include "sample/sampling_params.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <string>

namespace vosti {
namespace {

constexpr int64_t kVocab = 100;

// Expects INVALID_ARGUMENT whose message names `field`.
void expect_rejected(const std::function<void(SamplingParams&)>& edit, const std::string& field) {
  SamplingParams p;
  edit(p);
  const Status s = p.validate(kVocab);
  ASSERT_FALSE(s.ok()) << field;
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find(field), std::string::npos) << s.message();
}

TEST(SamplingParams, DefaultsAndBoundariesAreValid) {
  EXPECT_TRUE(SamplingParams{}.validate(kVocab).ok());
  SamplingParams p;
  p.temperature = 0.0f;
  p.top_k = 1;
  p.top_p = 1e-6f;
  p.min_p = 1.0f;
  p.repetition_penalty = 1e-3f;
  p.presence_penalty = -2.0f;
  p.frequency_penalty = 2.0f;
  p.logit_bias = {{0, -100.0f}, {99, 100.0f}};
  p.num_top_logprobs = kMaxTopLogprobs;
  p.top_k = 1000;  // larger than the vocabulary: keeps everything
  EXPECT_TRUE(p.validate(kVocab).ok());
}

TEST(SamplingParams, EachBadFieldIsNamed) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  expect_rejected([](SamplingParams& p) { p.temperature = -0.5f; }, "temperature");
  expect_rejected([&](SamplingParams& p) { p.temperature = nan; }, "temperature");
  expect_rejected([&](SamplingParams& p) { p.temperature = inf; }, "temperature");
  expect_rejected([](SamplingParams& p) { p.top_k = -1; }, "top_k");
  expect_rejected([](SamplingParams& p) { p.top_p = 0.0f; }, "top_p");
  expect_rejected([](SamplingParams& p) { p.top_p = 1.5f; }, "top_p");
  expect_rejected([&](SamplingParams& p) { p.top_p = nan; }, "top_p");
  expect_rejected([](SamplingParams& p) { p.min_p = -0.1f; }, "min_p");
  expect_rejected([](SamplingParams& p) { p.min_p = 1.1f; }, "min_p");
  expect_rejected([](SamplingParams& p) { p.repetition_penalty = 0.0f; }, "repetition_penalty");
  expect_rejected([&](SamplingParams& p) { p.repetition_penalty = inf; }, "repetition_penalty");
  expect_rejected([](SamplingParams& p) { p.presence_penalty = 2.5f; }, "presence_penalty");
  expect_rejected([&](SamplingParams& p) { p.presence_penalty = nan; }, "presence_penalty");
  expect_rejected([](SamplingParams& p) { p.frequency_penalty = -3.0f; }, "frequency_penalty");
  expect_rejected([](SamplingParams& p) { p.logit_bias = {{100, 1.0f}}; }, "logit_bias token id 100");
  expect_rejected([](SamplingParams& p) { p.logit_bias = {{-1, 1.0f}}; }, "logit_bias token id -1");
  expect_rejected([](SamplingParams& p) { p.logit_bias = {{5, 101.0f}}; }, "logit_bias for token id 5");
  expect_rejected([&](SamplingParams& p) { p.logit_bias = {{5, nan}}; }, "logit_bias for token id 5");
  expect_rejected([](SamplingParams& p) { p.logit_bias = {{5, 1.0f}, {5, 2.0f}}; }, "token id 5 twice");
  expect_rejected([](SamplingParams& p) { p.num_top_logprobs = 21; }, "num_top_logprobs");
  expect_rejected([](SamplingParams& p) { p.num_top_logprobs = -1; }, "num_top_logprobs");
}

TEST(SamplingParams, RejectsEmptyVocabulary) {
  const Status s = SamplingParams{}.validate(0);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("vocab_size"), std::string::npos);
}

}  // namespace
}  // namespace vosti
