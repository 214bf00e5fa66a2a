#include "server/openai_request.h"

#include <gtest/gtest.h>

namespace vosti {
namespace {

GenerationRequest ok(std::string_view body, Endpoint e = Endpoint::kCompletions) {
  auto r = parse_generation_request(body, e);
  if (auto* err = std::get_if<ApiError>(&r)) ADD_FAILURE() << body << " -> " << err->message;
  return std::holds_alternative<GenerationRequest>(r) ? std::get<GenerationRequest>(r) : GenerationRequest{};
}

ApiError bad(std::string_view body, Endpoint e = Endpoint::kCompletions) {
  auto r = parse_generation_request(body, e);
  if (!std::holds_alternative<ApiError>(r)) {
    ADD_FAILURE() << body << " was accepted";
    return {};
  }
  return std::get<ApiError>(r);
}

TEST(OpenAiRequestTest, CompletionFields) {
  auto r = ok(R"({"model":"m","prompt":"hi","max_tokens":5,"temperature":0.5,"top_p":0.9,"top_k":40,"min_p":0.1,
    "presence_penalty":0.5,"frequency_penalty":-0.5,"repetition_penalty":1.1,"stop":["a","b"],"seed":42,"n":3,
    "stream":true,"stream_options":{"include_usage":true},"logprobs":2,"echo":true,"logit_bias":{"7":-100,"9":3.5},
    "return_token_ids":true,"return_logits_digests":true,"user":"u"})");
  EXPECT_EQ(r.model, "m");
  ASSERT_EQ(r.prompts.size(), 1u);
  EXPECT_TRUE(r.prompts[0].is_text);
  EXPECT_EQ(r.prompts[0].text, "hi");
  EXPECT_EQ(r.max_tokens, 5);
  EXPECT_FLOAT_EQ(r.sampling.temperature, 0.5f);
  EXPECT_FLOAT_EQ(r.sampling.top_p, 0.9f);
  EXPECT_EQ(r.sampling.top_k, 40);
  EXPECT_FLOAT_EQ(r.sampling.min_p, 0.1f);
  EXPECT_FLOAT_EQ(r.sampling.repetition_penalty, 1.1f);
  EXPECT_EQ(r.stop, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(r.sampling.seed, 42u);
  EXPECT_EQ(r.n, 3);
  EXPECT_TRUE(r.stream && r.include_usage && r.echo && r.logprobs && r.return_token_ids && r.return_logits_digests);
  EXPECT_EQ(r.sampling.num_top_logprobs, 2);
  ASSERT_EQ(r.sampling.logit_bias.size(), 2u);
}

TEST(OpenAiRequestTest, PromptShapes) {
  EXPECT_EQ(ok(R"({"prompt":[1,2,3]})").prompts[0].ids, (std::vector<int32_t>{1, 2, 3}));
  auto batch = ok(R"({"prompt":[[1],[2,3]]})");
  ASSERT_EQ(batch.prompts.size(), 2u);
  EXPECT_FALSE(batch.prompts[1].is_text);
  EXPECT_EQ(ok(R"({"prompt":["a","b","c"]})").prompts.size(), 3u);
  EXPECT_EQ(bad(R"({"prompt":[1,"a"]})").param, "prompt");
  EXPECT_EQ(bad(R"({"prompt":[-1]})").param, "prompt");
  EXPECT_EQ(bad(R"({"prompt":[1.5]})").param, "prompt");
  EXPECT_EQ(bad(R"({"prompt":[]})").param, "prompt");
  EXPECT_EQ(bad(R"({"prompt":[[]]})").param, "prompt");
  EXPECT_EQ(bad(R"({"prompt":[99999999999]})").param, "prompt");
  EXPECT_EQ(bad(R"({"max_tokens":3})").param, "prompt");
  EXPECT_EQ(bad(R"({"prompt":{"a":1}})").param, "prompt");
}

TEST(OpenAiRequestTest, RangesAndTypes) {
  EXPECT_EQ(bad(R"({"prompt":"x","temperature":-0.1})").param, "temperature");
  EXPECT_EQ(bad(R"({"prompt":"x","temperature":"hot"})").param, "temperature");
  EXPECT_EQ(bad(R"({"prompt":"x","top_p":0})").param, "top_p");
  EXPECT_EQ(bad(R"({"prompt":"x","top_p":1.01})").param, "top_p");
  EXPECT_EQ(bad(R"({"prompt":"x","max_tokens":-1})").param, "max_tokens");
  EXPECT_EQ(bad(R"({"prompt":"x","max_tokens":1e30})").param, "max_tokens");
  EXPECT_EQ(bad(R"({"prompt":"x","max_tokens":99999999999999})").param, "max_tokens");
  EXPECT_EQ(bad(R"({"prompt":"x","max_tokens":2.5})").param, "max_tokens");
  EXPECT_EQ(bad(R"({"prompt":"x","n":0})").param, "n");
  EXPECT_EQ(bad(R"({"prompt":"x","n":1000})").param, "n");
  EXPECT_EQ(bad(R"({"prompt":"x","seed":-3})").param, "seed");
  EXPECT_EQ(bad(R"({"prompt":"x","logprobs":21})").param, "logprobs");
  EXPECT_EQ(bad(R"({"prompt":"x","stream":"yes"})").param, "stream");
  EXPECT_EQ(bad(R"({"prompt":"x","stream_options":{"include_usage":true}})").param, "stream_options");
  EXPECT_EQ(bad(R"({"prompt":"x","logit_bias":{"abc":1}})").param, "logit_bias");
  EXPECT_EQ(bad(R"({"prompt":"x","logit_bias":{"1":101}})").param, "logit_bias");
  EXPECT_EQ(bad(R"({"prompt":"x","stop":[""]})").param, "stop");
  EXPECT_EQ(bad(R"({"prompt":"x","best_of":3})").param, "best_of");
  EXPECT_EQ(ok(R"({"prompt":"x","max_tokens":0,"echo":true})").max_tokens, 0);
  EXPECT_EQ(ok(R"({"prompt":"x","top_k":-1})").sampling.top_k, 0);
  EXPECT_EQ(ok(R"({"prompt":"x","seed":18446744073709551615})").sampling.seed, UINT64_MAX);
  EXPECT_FALSE(ok(R"({"prompt":"x","temperature":null})").sampling.seed.has_value());
}

TEST(OpenAiRequestTest, UnknownFieldsAndBadBodies) {
  EXPECT_EQ(bad(R"({"prompt":"x","temprature":0.5})").param, "temprature");
  EXPECT_EQ(bad(R"({"prompt":"x",)").message, "the request body is not valid JSON");
  EXPECT_EQ(bad("[1,2]").message, "the request body must be a JSON object");
  EXPECT_NE(bad("{\"prompt\":\"\xff\"}").message.find("UTF-8"), std::string::npos);
  EXPECT_EQ(bad("").http_status, 400);
  EXPECT_EQ(bad(R"({"prompt":"x","echo":true})", Endpoint::kChatCompletions).param, "echo");
}

TEST(OpenAiRequestTest, ChatFields) {
  auto r = ok(R"({"messages":[{"role":"system","content":"be brief"},
    {"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}],
    "max_completion_tokens":7,"logprobs":true,"top_logprobs":3,"seed":1})",
              Endpoint::kChatCompletions);
  ASSERT_EQ(r.messages.size(), 2u);
  EXPECT_EQ(r.messages[1].content, "ab");
  EXPECT_EQ(r.max_tokens, 7);
  EXPECT_TRUE(r.logprobs);
  EXPECT_EQ(r.sampling.num_top_logprobs, 3);
  EXPECT_EQ(bad(R"({"messages":[]})", Endpoint::kChatCompletions).param, "messages");
  EXPECT_EQ(bad(R"({"messages":[{"role":"wizard","content":"x"}]})", Endpoint::kChatCompletions).param,
            "messages[0].role");
  EXPECT_EQ(bad(R"({"messages":[{"role":"user","content":5}]})", Endpoint::kChatCompletions).param,
            "messages[0].content");
  EXPECT_EQ(bad(R"({"messages":[{"role":"user","content":"x"}],"top_logprobs":2})", Endpoint::kChatCompletions).param,
            "top_logprobs");
  EXPECT_EQ(bad(R"({"messages":[{"role":"user","content":"x"}],"max_tokens":0})", Endpoint::kChatCompletions).param,
            "max_tokens");
  EXPECT_EQ(
      bad(R"({"messages":[{"role":"user","content":"x"}],"tools":[{"type":"function"}]})", Endpoint::kChatCompletions)
          .param,
      "tools[0].function");
}

// response_format, vLLM's structured_outputs and the guided_* fields: one constraint, its kind
// and text; malformed ones are 400 naming the field.
TEST(OpenAiRequestTest, StructuredOutputFields) {
  auto r = ok(R"({"prompt":"x","response_format":{"type":"json_schema","json_schema":{"name":"n",
    "schema":{"type":"object","properties":{"a":{"type":"integer"}}}}}})");
  ASSERT_TRUE(r.structured.has_value());
  EXPECT_EQ(r.structured->kind, StructuredKind::kJsonSchema);
  // The schema's keys keep the order sent (the order of the output's keys).
  EXPECT_EQ(r.structured->text, R"({"type":"object","properties":{"a":{"type":"integer"}}})");
  r = ok(R"({"prompt":"x","structured_outputs":{"json":{"properties":{"z":{},"a":{}}}}})");
  EXPECT_EQ(r.structured->text, R"({"properties":{"z":{},"a":{}}})");
  r = ok(R"({"messages":[{"role":"user","content":"x"}],"response_format":{"type":"json_object"}})",
         Endpoint::kChatCompletions);
  EXPECT_EQ(r.structured->kind, StructuredKind::kJsonObject);
  EXPECT_FALSE(ok(R"({"prompt":"x","response_format":{"type":"text"}})").structured.has_value());
  r = ok(R"({"prompt":"x","structured_outputs":{"choice":["a","b"]}})");
  EXPECT_EQ(r.structured->kind, StructuredKind::kChoice);
  EXPECT_EQ(r.structured->choices, (std::vector<std::string>{"a", "b"}));
  r = ok(R"({"prompt":"x","structured_outputs":{"regex":"[0-9]+","choice":null}})");
  EXPECT_EQ(r.structured->kind, StructuredKind::kRegex);
  EXPECT_EQ(ok(R"({"prompt":"x","structured_outputs":{"grammar":"root ::= \"a\""}})").structured->kind,
            StructuredKind::kGrammar);
  EXPECT_EQ(ok(R"({"prompt":"x","structured_outputs":{"json_object":true}})").structured->kind,
            StructuredKind::kJsonObject);
  r = ok(R"({"prompt":"x","guided_json":"{\"type\": \"string\"}"})");
  EXPECT_EQ(r.structured->text, R"({"type": "string"})");  // a string schema is kept as sent
  EXPECT_EQ(ok(R"({"prompt":"x","guided_regex":"a+"})").structured->text, "a+");
  EXPECT_EQ(ok(R"({"prompt":"x","guided_choice":["y"]})").structured->choices, std::vector<std::string>{"y"});
  EXPECT_EQ(ok(R"({"prompt":"x","guided_grammar":"root ::= \"a\""})").structured->kind, StructuredKind::kGrammar);

  EXPECT_EQ(bad(R"({"prompt":"x","response_format":{"type":"xml"}})").param, "response_format.type");
  EXPECT_EQ(bad(R"({"prompt":"x","response_format":{"type":"json_schema","json_schema":{"name":"n"}}})").param,
            "response_format.json_schema.schema");
  EXPECT_EQ(bad(R"({"prompt":"x","response_format":{"type":"json_schema"}})").param, "response_format.json_schema");
  EXPECT_EQ(bad(R"({"prompt":"x","structured_outputs":{"regex":"a","choice":["b"]}})").param,
            "structured_outputs.regex");
  EXPECT_EQ(bad(R"({"prompt":"x","guided_regex":"a","guided_choice":["b"]})").param, "guided_choice");
  EXPECT_EQ(bad(R"({"prompt":"x","structured_outputs":{"lark":"x"}})").param, "structured_outputs.lark");
  EXPECT_EQ(bad(R"({"prompt":"x","structured_outputs":5})").param, "structured_outputs");
  EXPECT_EQ(bad(R"({"prompt":"x","guided_json":"{oops"})").param, "guided_json");
  EXPECT_EQ(bad(R"({"prompt":"x","guided_json":3})").param, "guided_json");
  EXPECT_EQ(bad(R"({"prompt":"x","guided_choice":[]})").param, "guided_choice");
  EXPECT_EQ(bad(R"({"prompt":"x","guided_choice":["a",1]})").param, "guided_choice");
  EXPECT_EQ(bad(R"({"prompt":"x","guided_regex":""})").param, "guided_regex");
  // A schema nested 100000 deep is refused before anything recurses over it.
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  EXPECT_EQ(bad(R"({"prompt":"x","guided_json":{"a":)" + deep + "}}").param, "guided_json");
}

TEST(OpenAiRequestTest, TokenizeAndDetokenize) {
  auto t = parse_tokenize_request(R"({"prompt":"hello","add_special_tokens":false})");
  ASSERT_TRUE(std::holds_alternative<TokenizeRequest>(t));
  EXPECT_EQ(std::get<TokenizeRequest>(t).prompt, "hello");
  EXPECT_FALSE(std::get<TokenizeRequest>(t).add_special_tokens);
  EXPECT_TRUE(std::holds_alternative<ApiError>(parse_tokenize_request(R"({"text":"x"})")));
  auto d = parse_detokenize_request(R"({"tokens":[1,2]})");
  ASSERT_TRUE(std::holds_alternative<DetokenizeRequest>(d));
  EXPECT_EQ(std::get<DetokenizeRequest>(d).tokens.size(), 2u);
  EXPECT_TRUE(std::holds_alternative<ApiError>(parse_detokenize_request(R"({"tokens":[-1]})")));
  EXPECT_TRUE(std::holds_alternative<ApiError>(parse_detokenize_request(R"({"tokens":"1"})")));
}

}  // namespace
}  // namespace vosti
