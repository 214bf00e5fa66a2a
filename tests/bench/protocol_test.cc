// tools/bench/http_client.h and openai_stream.h: HTTP framing, SSE events, and the reading
// of streamed chunks into request records (timestamps -> ITL).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "tools/bench/http_client.h"
#include "tools/bench/http_target.h"
#include "tools/bench/openai_stream.h"

namespace vosti::bench {
namespace {

TEST(BaseUrl, ParsesHostPortAndPrefix) {
  auto u = parse_base_url("http://127.0.0.1:8123/");
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(u->host, "127.0.0.1");
  EXPECT_EQ(u->port, 8123);
  EXPECT_EQ(u->prefix, "");
  auto v = parse_base_url("http://example:80/proxy/");
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(v->prefix, "/proxy");
  EXPECT_EQ(parse_base_url("http://localhost")->port, 80);
  auto v6 = parse_base_url("http://[::1]:8000");
  ASSERT_TRUE(v6.ok());
  EXPECT_EQ(v6->host, "::1");
  EXPECT_EQ(v6->port, 8000);
  EXPECT_EQ(v6->to_string(), "http://[::1]:8000");
  EXPECT_FALSE(parse_base_url("https://x:1").ok());
  EXPECT_FALSE(parse_base_url("127.0.0.1:8000").ok());
  EXPECT_FALSE(parse_base_url("http://x:99999").ok());
  EXPECT_FALSE(parse_base_url("http://:80").ok());
}

TEST(HttpResponseParser, DecodesAChunkedBodyFedByteByByte) {
  const std::string wire =
      "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
      "5\r\nhello\r\n7;ext=1\r\n, world\r\n0\r\n\r\n";
  HttpResponseParser p;
  std::string body;
  for (char c : wire) ASSERT_TRUE(p.feed(std::string_view(&c, 1), body).ok());
  EXPECT_TRUE(p.complete());
  EXPECT_EQ(p.status(), 200);
  EXPECT_EQ(p.header("content-type"), "text/event-stream");
  EXPECT_EQ(body, "hello, world");
}

TEST(HttpResponseParser, ContentLengthAndUntilClose) {
  HttpResponseParser a;
  std::string body;
  ASSERT_TRUE(a.feed("HTTP/1.1 404 Not Found\r\nContent-Length: 3\r\n\r\nabcEXTRA", body).ok());
  EXPECT_TRUE(a.complete());
  EXPECT_EQ(a.status(), 404);
  EXPECT_EQ(body, "abc");
  HttpResponseParser b;
  body.clear();
  ASSERT_TRUE(b.feed("HTTP/1.0 200 OK\r\n\r\nsome", body).ok());
  EXPECT_FALSE(b.complete());
  ASSERT_TRUE(b.finish_at_close().ok());
  EXPECT_EQ(body, "some");
}

TEST(HttpResponseParser, ATruncatedOrMalformedResponseIsAnError) {
  HttpResponseParser a;
  std::string body;
  ASSERT_TRUE(a.feed("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhel", body).ok());
  EXPECT_FALSE(a.finish_at_close().ok());  // the server died mid-stream
  HttpResponseParser b;
  EXPECT_FALSE(b.finish_at_close().ok());  // no response at all
  HttpResponseParser c;
  EXPECT_FALSE(c.feed("SSH-2.0-OpenSSH\r\n\r\n", body).ok());
  HttpResponseParser d;
  EXPECT_FALSE(d.feed("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", body).ok());
}

TEST(SseParser, SplitsEventsAcrossArbitraryBoundaries) {
  SseParser p;
  std::vector<std::string> events;
  const std::string stream =
      ": comment\r\ndata: {\"a\":1}\r\n\r\nevent: x\ndata: line1\ndata: line2\n\ndata: [DONE]\n\n";
  for (size_t i = 0; i < stream.size(); i += 3) {
    for (auto& e : p.feed(std::string_view(stream).substr(i, 3))) events.push_back(e);
  }
  ASSERT_EQ(events.size(), 3u);
  EXPECT_EQ(events[0], "{\"a\":1}");
  EXPECT_EQ(events[1], "line1\nline2");
  EXPECT_EQ(events[2], "[DONE]");
}

TEST(StreamReader, VostiChunksGiveTokenIdsDigestsUsageAndItl) {
  RequestRecord r;
  r.send_s = 1.0;
  StreamReader reader(&r);
  // Timestamps of the chunks as they arrived: ITL is their gaps.
  ASSERT_TRUE(reader
                  .on_event(R"({"object":"text_completion","choices":[{"index":0,"text":"Hi","token_ids":[5],
      "logits_digests":["00000000000000010000000000000002"],"logprobs":{"tokens":["Hi"],"token_logprobs":[-0.5]},
      "finish_reason":null,"seed":42}]})",
                            1.25)
                  .ok());
  ASSERT_TRUE(reader
                  .on_event(R"({"object":"text_completion","choices":[{"index":0,"text":"","token_ids":[7,8],
      "logits_digests":["a","b"],"finish_reason":null}]})",
                            1.5)
                  .ok());
  ASSERT_TRUE(reader
                  .on_event(R"({"object":"text_completion","choices":[{"index":0,"text":"!","token_ids":[9],
      "finish_reason":"length"}]})",
                            1.9)
                  .ok());
  ASSERT_TRUE(reader
                  .on_event(R"({"object":"text_completion","choices":[],"usage":{"prompt_tokens":12,
      "completion_tokens":4,"total_tokens":16,"prompt_tokens_details":{"cached_tokens":8}}})",
                            1.95)
                  .ok());
  ASSERT_TRUE(reader.on_event("[DONE]", 1.96).ok());
  EXPECT_TRUE(reader.done());
  EXPECT_EQ(reader.num_tokens_counted(), 4);
  EXPECT_EQ(r.num_prompt_tokens, 12);
  EXPECT_EQ(r.num_output_tokens, 4);
  EXPECT_EQ(r.num_cached_tokens, 8);
  EXPECT_EQ(r.seed, 42u);
  EXPECT_EQ(r.finish_reason, "length");
  EXPECT_EQ(r.content.token_ids, (std::vector<int32_t>{5, 7, 8, 9}));
  EXPECT_EQ(r.content.digests.size(), 3u);
  r.success = true;
  r.end_s = 1.96;
  const std::vector<double> itl = itl_s(r);
  ASSERT_EQ(itl.size(), 2u);
  EXPECT_DOUBLE_EQ(itl[0], 0.25);
  EXPECT_DOUBLE_EQ(itl[1], 0.4);
  EXPECT_DOUBLE_EQ(*ttft_s(r), 0.25);
  EXPECT_DOUBLE_EQ(*tpot_s(r), (1.9 - 1.25) / 3);
}

TEST(StreamReader, APeerChatStreamWithOnlyTextCountsChunks) {
  RequestRecord r;
  StreamReader reader(&r);
  // The role-only first chunk carries no output and is not a delivery.
  ASSERT_TRUE(reader
                  .on_event(R"({"object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant",
      "content":""}}]})",
                            0.1)
                  .ok());
  ASSERT_TRUE(reader
                  .on_event(R"({"object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"Hel"},
      "logprobs":{"content":[{"token":"Hel","logprob":-1.25}]}}]})",
                            0.2)
                  .ok());
  ASSERT_TRUE(reader
                  .on_event(R"({"object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"lo"}}],
      "usage":null})",
                            0.3)
                  .ok());
  EXPECT_EQ(r.delivery_s, (std::vector<double>{0.2, 0.3}));
  EXPECT_EQ(reader.num_tokens_counted(), 2);
  EXPECT_EQ(r.content.token_pieces, (std::vector<std::string>{"Hel"}));
  EXPECT_EQ(r.content.logprobs, (std::vector<double>{-1.25}));
  EXPECT_FALSE(reader.saw_usage());
}

TEST(StreamReader, ErrorsAndGarbageAreReported) {
  RequestRecord r;
  StreamReader reader(&r);
  Status s = reader.on_event("not json", 0);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("not json"), std::string::npos);
  Status e = reader.on_event(R"({"error":{"message":"engine failed","type":"internal"}})", 0);
  EXPECT_FALSE(e.ok());
  EXPECT_NE(e.message().find("engine failed"), std::string::npos);
  EXPECT_EQ(error_message(400, R"({"error":{"message":"max_tokens too large"}})"), "HTTP 400: max_tokens too large");
}

TEST(RequestBody, VostiExtensionsOnlyForVosti) {
  BenchRequest r;
  r.prompt_ids = {1, 2, 3};
  r.max_tokens = 8;
  r.seed = 77;
  SamplingOptions o;
  o.ignore_eos = true;
  o.want_content = true;
  const auto vosti = nlohmann::json::parse(request_body(r, o, "m", ServerDialect{true}));
  EXPECT_EQ(vosti["prompt"], nlohmann::json({1, 2, 3}));
  EXPECT_EQ(vosti["seed"], 77);
  EXPECT_EQ(vosti["ignore_eos"], true);
  EXPECT_EQ(vosti["return_logits_digests"], true);
  EXPECT_EQ(vosti["stream_options"]["include_usage"], true);
  const auto peer = nlohmann::json::parse(request_body(r, o, "m", ServerDialect{false}));
  EXPECT_FALSE(peer.contains("return_logits_digests"));
  EXPECT_FALSE(peer.contains("return_token_ids"));
  EXPECT_EQ(peer["logprobs"], 0);
  BenchRequest chat;
  chat.kind = PromptKind::kChat;
  chat.messages = {{"user", "hi"}};
  EXPECT_STREQ(endpoint_path(chat), "/v1/chat/completions");
  EXPECT_STREQ(endpoint_path(r), "/v1/completions");
}

TEST(Prometheus, SumsSamplesByNameAcrossLabels) {
  const auto m = parse_prometheus(
      "# HELP x y\n# TYPE vllm:prefix_cache_hits_total counter\n"
      "vllm:prefix_cache_hits_total{engine=\"0\",model_name=\"m\"} 120.0\n"
      "vllm:prefix_cache_hits_total{engine=\"1\",model_name=\"m\"} 30\n"
      "vosti_num_preemptions_total 2\n");
  EXPECT_DOUBLE_EQ(m.at("vllm:prefix_cache_hits_total"), 150);
  EXPECT_DOUBLE_EQ(m.at("vosti_num_preemptions_total"), 2);
}

}  // namespace
}  // namespace vosti::bench
