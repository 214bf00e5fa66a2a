#include "server/server_metrics.h"

#include <gtest/gtest.h>

namespace vosti {
namespace {

TEST(ServerMetricsTest, HistogramBucketsAreCumulative) {
  Histogram hist({0.1, 1.0});
  hist.observe(0.05);
  hist.observe(0.5);
  hist.observe(0.5);
  hist.observe(7);
  std::string out;
  hist.append_to(out, "x", "help");
  EXPECT_NE(out.find("x_bucket{le=\"0.10000000000000001\"} 1\n"), std::string::npos) << out;
  EXPECT_NE(out.find("x_bucket{le=\"1\"} 3\n"), std::string::npos) << out;
  EXPECT_NE(out.find("x_bucket{le=\"+Inf\"} 4\n"), std::string::npos) << out;
  EXPECT_NE(out.find("x_count 4\n"), std::string::npos) << out;
  EXPECT_NE(out.find("x_sum 8.0500000000000007\n"), std::string::npos) << out;
}

TEST(ServerMetricsTest, RendersEngineStatsAndCounters) {
  ServerMetrics m;
  m.observe_http_status(200);
  m.observe_http_status(200);
  m.observe_http_status(400);
  m.observe_finish("length");
  m.add_tokens(5, 7);
  m.observe_ttft(0.2);
  EngineLoopStats s;
  s.engine.num_running = 3;
  s.engine.num_blocks_used = 10;
  s.engine.num_blocks_total = 40;
  s.engine.num_window_blocks_used = 5;
  s.engine.num_window_blocks_total = 20;
  s.engine.num_prefix_queries = 8;
  s.engine.num_prefix_hits = 2;
  s.engine.num_drafts = 3;
  s.engine.num_draft_tokens = 12;
  s.engine.num_accepted_tokens = 9;
  const std::string out = m.render(s, 4, 2);
  EXPECT_NE(out.find("vosti_spec_decode_num_drafts_total 3\n"), std::string::npos) << out;
  EXPECT_NE(out.find("vosti_spec_decode_num_draft_tokens_total 12\n"), std::string::npos);
  EXPECT_NE(out.find("vosti_spec_decode_num_accepted_tokens_total 9\n"), std::string::npos);
  EXPECT_NE(out.find("vosti_spec_decode_acceptance_rate 0.75\n"), std::string::npos);
  EXPECT_NE(out.find("vosti_num_requests_running 3\n"), std::string::npos);
  EXPECT_NE(out.find("vosti_kv_blocks_used 10\n"), std::string::npos);
  EXPECT_NE(out.find("vosti_kv_cache_usage_ratio 0.25\n"), std::string::npos);
  EXPECT_NE(out.find("vosti_kv_window_blocks_used 5\n"), std::string::npos);
  EXPECT_NE(out.find("vosti_kv_window_blocks_total 20\n"), std::string::npos);
  EXPECT_NE(out.find("vosti_prefix_cache_hit_rate 0.25\n"), std::string::npos);
  EXPECT_NE(out.find("vosti_http_responses_total{code=\"200\"} 2\n"), std::string::npos);
  EXPECT_NE(out.find("vosti_request_finished_total{finished_reason=\"length\"} 1\n"), std::string::npos);
  EXPECT_NE(out.find("vosti_generation_tokens_total 7\n"), std::string::npos);
  EXPECT_NE(out.find("vosti_time_to_first_token_seconds_count 1\n"), std::string::npos);
  EXPECT_NE(out.find("vosti_http_connections_open 4\n"), std::string::npos);
}

TEST(ServerMetricsTest, RendersTheSchedulingLimitsAClientInducesChunkingWith) {
  ServerMetrics m;
  EngineConfig c;
  c.max_num_batched_tokens = 4096;
  c.max_num_seqs = 8;
  c.block_size = 16;
  c.max_model_len = 2048;
  c.enable_prefix_caching = false;
  const std::string out = m.render(EngineLoopStats{}, 0, 0, nullptr, &c);
  EXPECT_NE(out.find("vosti_max_num_batched_tokens 4096\n"), std::string::npos) << out;
  EXPECT_NE(out.find("vosti_max_num_seqs 8\n"), std::string::npos);
  EXPECT_NE(out.find("vosti_block_size 16\n"), std::string::npos);
  EXPECT_NE(out.find("vosti_max_model_len 2048\n"), std::string::npos);
  EXPECT_NE(out.find("vosti_prefix_caching_enabled 0\n"), std::string::npos);
  EXPECT_EQ(m.render(EngineLoopStats{}, 0, 0).find("vosti_max_num_batched_tokens"), std::string::npos);
}

}  // namespace
}  // namespace vosti
