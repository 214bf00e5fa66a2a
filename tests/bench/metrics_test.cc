// tools/bench/metrics.h against hand-computed cases.
#include "tools/bench/metrics.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace vosti::bench {
namespace {

RequestRecord request(double send, std::vector<double> deliveries, double end, int64_t out_tokens,
                      int64_t prompt = 10) {
  RequestRecord r;
  r.sent = true;
  r.success = true;
  r.send_s = send;
  r.delivery_s = std::move(deliveries);
  r.end_s = end;
  r.num_output_tokens = out_tokens;
  r.num_prompt_tokens = prompt;
  return r;
}

TEST(Percentile, InterpolatesLinearlyBetweenRanks) {
  const std::vector<double> v = {1, 2, 3, 4};
  EXPECT_DOUBLE_EQ(percentile(v, 0), 1);
  EXPECT_DOUBLE_EQ(percentile(v, 100), 4);
  EXPECT_DOUBLE_EQ(percentile(v, 50), 2.5);   // rank 1.5
  EXPECT_DOUBLE_EQ(percentile(v, 90), 3.7);   // rank 2.7
  EXPECT_DOUBLE_EQ(percentile(v, 99), 3.97);  // rank 2.97
  const std::vector<double> one = {7};
  EXPECT_DOUBLE_EQ(percentile(one, 99), 7);
  const std::vector<double> eleven = {0, 10, 20, 30, 40, 50, 60, 70, 80, 90, 100};
  EXPECT_DOUBLE_EQ(percentile(eleven, 90), 90);
  EXPECT_DOUBLE_EQ(percentile(eleven, 95), 95);
}

TEST(Summarize, MeanMedianAndPercentilesOfUnsortedValues) {
  const Distribution d = summarize({4, 1, 3, 2});
  EXPECT_EQ(d.count, 4);
  EXPECT_DOUBLE_EQ(d.mean, 2.5);
  EXPECT_DOUBLE_EQ(d.median, 2.5);
  EXPECT_DOUBLE_EQ(d.p90, 3.7);
  EXPECT_DOUBLE_EQ(d.min, 1);
  EXPECT_DOUBLE_EQ(d.max, 4);
  EXPECT_DOUBLE_EQ(d.std, std::sqrt(1.25));
  EXPECT_EQ(summarize({}).count, 0);
}

TEST(RequestLatencies, TpotExcludesTheFirstToken) {
  // Sent at 1.0; first token at 1.5 (TTFT 0.5 s); then tokens at 1.6, 1.8, 2.1; response ends at 2.2.
  const RequestRecord r = request(1.0, {1.5, 1.6, 1.8, 2.1}, 2.2, 4);
  EXPECT_DOUBLE_EQ(*ttft_s(r), 0.5);
  EXPECT_DOUBLE_EQ(*tpot_s(r), (2.1 - 1.5) / 3);  // 3 gaps after the first token, not 4 tokens
  EXPECT_DOUBLE_EQ(*e2e_s(r), 1.2);
  const std::vector<double> itl = itl_s(r);
  ASSERT_EQ(itl.size(), 3u);
  EXPECT_NEAR(itl[0], 0.1, 1e-12);
  EXPECT_NEAR(itl[1], 0.2, 1e-12);
  EXPECT_NEAR(itl[2], 0.3, 1e-12);
}

TEST(RequestLatencies, AChunkOfSeveralTokensIsOneGap) {
  // 5 tokens in 3 chunks (1, 3, 1 tokens): ITL has 2 gaps; TPOT spreads over the 4 later tokens.
  const RequestRecord r = request(0, {0.2, 0.5, 0.6}, 0.6, 5);
  EXPECT_EQ(itl_s(r).size(), 2u);
  EXPECT_DOUBLE_EQ(*tpot_s(r), 0.4 / 4);
}

TEST(RequestLatencies, UndefinedWhereTheRequestDoesNotDefineThem) {
  const RequestRecord one = request(0, {0.3}, 0.3, 1);
  EXPECT_TRUE(ttft_s(one).has_value());
  EXPECT_FALSE(tpot_s(one).has_value());  // one token: no time per output token
  EXPECT_TRUE(itl_s(one).empty());
  RequestRecord failed = request(0, {0.3, 0.4}, 0.5, 2);
  failed.success = false;
  EXPECT_FALSE(ttft_s(failed).has_value());
  EXPECT_FALSE(e2e_s(failed).has_value());
  EXPECT_TRUE(itl_s(failed).empty());
}

TEST(ComputeMetrics, ThroughputAndDistributionsOverSuccessfulRequests) {
  std::vector<RequestRecord> rs;
  rs.push_back(request(0.0, {0.1, 0.2, 0.3}, 0.3, 3, 100));
  rs.push_back(request(0.5, {0.9, 1.3}, 1.4, 2, 50));
  RequestRecord failed = request(1.0, {}, 1.1, 0, 70);
  failed.success = false;
  failed.error = "HTTP 500";
  rs.push_back(failed);
  RequestRecord unsent;
  rs.push_back(unsent);
  const BenchMetrics m = compute_metrics(rs, 2.0);
  EXPECT_EQ(m.num_requests, 4);
  EXPECT_EQ(m.num_completed, 2);
  EXPECT_EQ(m.num_failed, 1);
  EXPECT_EQ(m.num_not_sent, 1);
  EXPECT_EQ(m.total_input_tokens, 150);
  EXPECT_EQ(m.total_output_tokens, 5);
  EXPECT_DOUBLE_EQ(m.request_throughput, 1.0);
  EXPECT_DOUBLE_EQ(m.input_throughput, 75.0);
  EXPECT_DOUBLE_EQ(m.output_throughput, 2.5);
  EXPECT_DOUBLE_EQ(m.total_throughput, 77.5);
  // TTFT 100 ms and 400 ms; TPOT 100 ms (0.2 s / 2) and 400 ms (0.4 s / 1); ITL 100, 100, 400 ms.
  EXPECT_NEAR(m.ttft_ms.mean, 250, 1e-9);
  EXPECT_NEAR(m.tpot_ms.mean, 250, 1e-9);
  EXPECT_EQ(m.itl_ms.count, 3);
  EXPECT_NEAR(m.itl_ms.median, 100, 1e-9);
  EXPECT_NEAR(m.itl_ms.mean, 200, 1e-9);
  EXPECT_NEAR(m.e2e_ms.p99, 300 + (900 - 300) * 0.99, 1e-9);
  EXPECT_FALSE(m.cached_token_fraction.has_value());
}

TEST(ComputeMetrics, CachedTokenFractionFromTheRequestsThatReportIt) {
  std::vector<RequestRecord> rs = {request(0, {0.1}, 0.1, 1, 100), request(0, {0.1}, 0.1, 1, 300)};
  rs[0].num_cached_tokens = 0;
  rs[1].num_cached_tokens = 240;
  const BenchMetrics m = compute_metrics(rs, 1.0);
  ASSERT_TRUE(m.cached_token_fraction.has_value());
  EXPECT_DOUBLE_EQ(*m.cached_token_fraction, 0.6);
}

}  // namespace
}  // namespace vosti::bench
