#include "server/openai_response.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "server/api_error.h"

namespace vosti {
namespace {

using nlohmann::json;

ResponseContext context(Endpoint e) {
  ResponseContext ctx;
  ctx.endpoint = e;
  ctx.id = std::string("cmpl-1");
  ctx.created = 123;
  ctx.model = std::string("model");
  ctx.piece = [](int32_t id) { return id == 9 ? std::string("\xE2\x82") : std::string("t") + std::to_string(id); };
  return ctx;
}

ChoiceOutput choice() {
  ChoiceOutput c;
  c.index = 1;
  c.seed = 77;
  c.text = "t5t9";
  c.token_ids = {5, 9};
  c.logprobs = {{5, -0.1f, {{5, -0.1f}, {6, -2.5f}}}, {9, -1e-7f, {{9, -1e-7f}, {3, -20.25f}}}};
  c.digests = {{0x0123456789abcdefull, 1}, {2, 3}};
  c.finish_reason = FinishReason::kLength;
  return c;
}

TEST(OpenAiResponseTest, CompletionBodyWithExtensions) {
  auto ctx = context(Endpoint::kCompletions);
  ctx.logprobs = ctx.return_token_ids = ctx.logits_digests = true;
  std::vector<int32_t> prompt = {1, 2};
  auto c = choice();
  c.prompt_token_ids = &prompt;
  const std::string body = full_response_body(ctx, {c}, {2, 2, 1});
  const json j = json::parse(body);
  EXPECT_EQ(j["object"], "text_completion");
  const json& ch = j["choices"][0];
  EXPECT_EQ(ch["index"], 1);
  EXPECT_EQ(ch["seed"], 77);
  EXPECT_EQ(ch["finish_reason"], "length");
  EXPECT_EQ(ch["token_ids"], json({5, 9}));
  EXPECT_EQ(ch["prompt_token_ids"], json({1, 2}));
  EXPECT_EQ(ch["logits_digests"][0], "00000000000000010123456789abcdef");  // high64 first
  EXPECT_EQ(ch["logprobs"]["tokens"][1], "\xEF\xBF\xBD\xEF\xBF\xBD");      // half a UTF-8 character: U+FFFD per byte
  EXPECT_EQ(ch["logprobs"]["text_offset"], json({0, 2}));
  EXPECT_EQ(static_cast<float>(ch["logprobs"]["token_logprobs"][1].get<double>()), -1e-7f);
  EXPECT_NE(body.find("\"t6\":-2.5"), std::string::npos);
  EXPECT_NE(body.find("-1e-07"), std::string::npos);  // shortest float form, not the double's
  EXPECT_EQ(j["usage"]["total_tokens"], 4);
  EXPECT_EQ(j["usage"]["prompt_tokens_details"]["cached_tokens"], 1);
}

TEST(OpenAiResponseTest, EchoScoresThePromptWithNullFirst) {
  auto ctx = context(Endpoint::kCompletions);
  ctx.logprobs = true;
  ChoiceOutput c;
  c.text = "t1t2";
  c.prompt_logprobs = {{1, 0.0f, {}}, {2, -3.0f, {{4, -1.0f}}}};
  const json j = json::parse(full_response_body(ctx, {c}, {}));
  const json& lp = j["choices"][0]["logprobs"];
  EXPECT_TRUE(lp["token_logprobs"][0].is_null());
  EXPECT_TRUE(lp["top_logprobs"][0].is_null());
  EXPECT_EQ(lp["token_logprobs"][1], -3.0);
  EXPECT_EQ(lp["tokens"], json({"t1", "t2"}));
}

TEST(OpenAiResponseTest, EchoDigestsAlignWithEchoLogprobs) {
  auto ctx = context(Endpoint::kCompletions);
  ctx.logits_digests = true;
  ChoiceOutput c;
  c.prompt_digests = {{0, 0}, {4, 5}, {6, 7}};  // [0]: the first prompt token has no row
  c.token_ids = {9};
  c.digests = {{8, 9}};
  const json j = json::parse(full_response_body(ctx, {c}, {}));
  const json& d = j["choices"][0]["logits_digests"];
  ASSERT_EQ(d.size(), 4u);  // prompt positions, then the output position
  EXPECT_TRUE(d[0].is_null());
  EXPECT_EQ(d[1], "00000000000000050000000000000004");
  EXPECT_EQ(d[2], "00000000000000070000000000000006");
  EXPECT_EQ(d[3], "00000000000000090000000000000008");
}

// return_routed_experts: [position][MoE layer][k], in the finished body and the last chunk only.
TEST(OpenAiResponseTest, RoutedExpertsNestByPositionLayerAndK) {
  auto ctx = context(Endpoint::kChatCompletions);
  ctx.routed_experts = true;
  auto c = choice();
  c.routed_experts.num_layers = 2;
  c.routed_experts.top_k = 2;
  c.routed_experts.ids = {0, 3, 1, 2, 5, 7, 4, 6, 1, 2, 0, 1};  // 3 positions
  const json full = json::parse(full_response_body(ctx, {c}, {1, 2, 0}));
  EXPECT_EQ(full["choices"][0]["routed_experts"], json::parse("[[[0,3],[1,2]],[[5,7],[4,6]],[[1,2],[0,1]]]"));
  ChoiceOutput delta = c;
  delta.finish_reason.reset();
  EXPECT_FALSE(json::parse(chunk_body(ctx, delta, true))["choices"][0].contains("routed_experts"));
  EXPECT_EQ(json::parse(chunk_body(ctx, c, false))["choices"][0]["routed_experts"][2][1], json({0, 1}));
  ctx.routed_experts = false;
  EXPECT_FALSE(json::parse(full_response_body(ctx, {c}, {1, 2, 0}))["choices"][0].contains("routed_experts"));
}

TEST(OpenAiResponseTest, ChatBodyAndChunks) {
  auto ctx = context(Endpoint::kChatCompletions);
  ctx.logprobs = true;
  const json j = json::parse(full_response_body(ctx, {choice()}, {}));
  EXPECT_EQ(j["object"], "chat.completion");
  EXPECT_EQ(j["choices"][0]["message"]["role"], "assistant");
  EXPECT_EQ(j["choices"][0]["message"]["content"], "t5t9");
  const json& content = j["choices"][0]["logprobs"]["content"];
  EXPECT_EQ(content[1]["bytes"], json({0xE2, 0x82}));
  EXPECT_EQ(content[0]["top_logprobs"][1]["token"], "t6");

  ChoiceOutput delta;
  delta.text = "hi";
  const json first = json::parse(chunk_body(ctx, delta, true));
  EXPECT_EQ(first["object"], "chat.completion.chunk");
  EXPECT_EQ(first["choices"][0]["delta"]["role"], "assistant");
  EXPECT_EQ(first["choices"][0]["delta"]["content"], "hi");
  EXPECT_TRUE(first["choices"][0]["finish_reason"].is_null());
  ChoiceOutput last;
  last.finish_reason = FinishReason::kStop;
  const json end = json::parse(chunk_body(ctx, last, false));
  EXPECT_EQ(end["choices"][0]["delta"], json::object());
  EXPECT_EQ(end["choices"][0]["finish_reason"], "stop");
  const json usage = json::parse(usage_chunk_body(ctx, {3, 4, 0}));
  EXPECT_TRUE(usage["choices"].empty());
  EXPECT_EQ(usage["usage"]["completion_tokens"], 4);
  EXPECT_EQ(sse_event("{}"), "data: {}\n\n");
}

TEST(OpenAiResponseTest, ErrorJsonShape) {
  const json j = json::parse(error_json(bad_request("'top_p' must be in (0, 1]", "top_p")));
  EXPECT_EQ(j["error"]["type"], "invalid_request_error");
  EXPECT_EQ(j["error"]["param"], "top_p");
  EXPECT_TRUE(j["error"]["code"].is_null());
}

}  // namespace
}  // namespace vosti
