// The tool fields of a chat request (server/tool_request.h, through parse_generation_request): what
// each tool_choice becomes, the grammar that forces a call, the template fallback, and a 400
// naming the problem for each malformed input (the template fallback: tests/tokenizer/chat_tools_test.cc).
#include "server/tool_request.h"

#include <gtest/gtest.h>

#include "server/openai_request.h"

namespace vosti {
namespace {

constexpr const char* kTools =
    R"("tools":[{"type":"function","function":{"name":"get_weather","description":"d","parameters":{"type":"object",
    "properties":{"city":{"type":"string"}},"required":["city"]}}},{"type":"function","function":{"name":"now"}}])";

std::variant<GenerationRequest, ApiError> chat(const std::string& extra) {
  return parse_generation_request(R"({"messages":[{"role":"user","content":"hi"}],)" + extra + "}",
                                  Endpoint::kChatCompletions);
}

GenerationRequest ok(const std::string& extra) {
  auto r = chat(extra);
  if (auto* e = std::get_if<ApiError>(&r)) ADD_FAILURE() << extra << " -> " << e->message;
  return std::holds_alternative<GenerationRequest>(r) ? std::get<GenerationRequest>(r) : GenerationRequest{};
}

std::string bad_param(const std::string& extra) {
  auto r = chat(extra);
  if (!std::holds_alternative<ApiError>(r)) {
    ADD_FAILURE() << extra << " was accepted";
    return "";
  }
  EXPECT_EQ(std::get<ApiError>(r).http_status, 400);
  return std::get<ApiError>(r).param;
}

TEST(ToolRequestTest, ChoicesAndTheirGrammars) {
  auto r = ok(kTools);
  ASSERT_TRUE(r.tools);
  EXPECT_EQ(r.tools->choice, ToolChoice::kAuto);  // OpenAI's default with tools
  EXPECT_FALSE(r.structured);
  EXPECT_EQ(r.tools->tools.size(), 2u);
  EXPECT_EQ(r.tools->tools[0].dump().find(R"({"type":"function","function":{"name":"get_weather","description")"), 0u)
      << "the tools keep the order sent";

  r = ok(std::string(kTools) + R"(,"tool_choice":"none")");
  ASSERT_TRUE(r.tools);  // kept for the prompt, as vLLM does
  EXPECT_EQ(r.tools->choice, ToolChoice::kNone);
  EXPECT_FALSE(r.structured);

  r = ok(std::string(kTools) + R"(,"tool_choice":"required","parallel_tool_calls":false)");
  ASSERT_TRUE(r.structured);
  EXPECT_EQ(r.structured->kind, StructuredKind::kJsonSchema);
  const auto schema = nlohmann::json::parse(r.structured->text);
  EXPECT_EQ(schema["type"], "array");
  EXPECT_EQ(schema["minItems"], 1);
  EXPECT_EQ(schema["maxItems"], 1);
  ASSERT_EQ(schema["items"]["anyOf"].size(), 2u);
  EXPECT_EQ(schema["items"]["anyOf"][0]["properties"]["name"]["enum"][0], "get_weather");
  EXPECT_EQ(schema["items"]["anyOf"][1]["properties"]["parameters"]["type"], "object");
  EXPECT_TRUE(check_json_schema(r.structured->text).ok());

  r = ok(std::string(kTools) + R"(,"tool_choice":{"type":"function","function":{"name":"get_weather"}})");
  ASSERT_TRUE(r.tools);
  EXPECT_EQ(r.tools->choice, ToolChoice::kNamed);
  EXPECT_EQ(r.tools->named_function, "get_weather");
  ASSERT_TRUE(r.structured);
  EXPECT_EQ(r.structured->text, R"({"type":"object","properties":{"city":{"type":"string"}},"required":["city"]})");

  EXPECT_FALSE(ok(R"("tools":[],"tool_choice":"none")").tools);
}

TEST(ToolRequestTest, BadToolsAndChoicesNameTheProblem) {
  EXPECT_EQ(bad_param(R"("tools":{"type":"function"})"), "tools");
  EXPECT_EQ(bad_param(R"("tools":[{"type":"retrieval","function":{"name":"a"}}])"), "tools[0].type");
  EXPECT_EQ(bad_param(R"("tools":[{"type":"function","function":{"name":"a b"}}])"), "tools[0].function.name");
  EXPECT_EQ(
      bad_param(R"("tools":[{"type":"function","function":{"name":"a"}},{"type":"function","function":{"name":"a"}}])"),
      "tools[1].function.name");
  EXPECT_EQ(bad_param(R"("tools":[{"type":"function","function":{"name":"a","parameters":"x"}}])"),
            "tools[0].function.parameters");
  EXPECT_EQ(bad_param(R"("tools":[{"type":"function","function":{"name":"a","parameters":{"not":{}}}}])"),
            "tools[0].function.parameters");
  EXPECT_EQ(bad_param(R"("tools":[{"type":"function","function":{"name":"a","colour":1}}])"), "tools[0].function");
  EXPECT_EQ(bad_param(std::string(kTools) + R"(,"tool_choice":{"type":"function","function":{"name":"nope"}})"),
            "tool_choice");
  EXPECT_EQ(bad_param(std::string(kTools) + R"(,"tool_choice":"sometimes")"), "tool_choice");
  EXPECT_EQ(bad_param(R"("tool_choice":"required")"), "tool_choice");
  EXPECT_EQ(bad_param(R"("tools":[],"tool_choice":{"type":"function","function":{"name":"a"}})"), "tool_choice");
  EXPECT_EQ(bad_param(std::string(kTools) + R"(,"parallel_tool_calls":"yes")"), "parallel_tool_calls");
  EXPECT_EQ(bad_param(std::string(kTools) + R"(,"tool_choice":"required","response_format":{"type":"json_object"})"),
            "tool_choice");
}

TEST(ToolRequestTest, ToolTurnsAreReadForTheTemplate) {
  auto r = parse_generation_request(
      R"({"messages":[{"role":"user","content":"weather?"},
        {"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function",
          "function":{"name":"get_weather","arguments":"{\"city\": \"Paris\", \"a\": 1}"}}]},
        {"role":"tool","tool_call_id":"call_1","content":"18 C"}]})",
      Endpoint::kChatCompletions);
  ASSERT_TRUE(std::holds_alternative<GenerationRequest>(r)) << std::get<ApiError>(r).message;
  const auto& m = std::get<GenerationRequest>(r).messages;
  ASSERT_EQ(m.size(), 3u);
  EXPECT_EQ(m[1].content, "");
  ASSERT_TRUE(m[1].tool_calls.is_array());
  EXPECT_EQ(
      m[1].tool_calls[0].dump(),
      R"({"id":"call_1","type":"function","function":{"name":"get_weather","arguments":{"city":"Paris","a":1}}})");
  EXPECT_EQ(m[2].tool_call_id, "call_1");

  const auto bad_message = [](const std::string& messages) {
    auto b = parse_generation_request(R"({"messages":)" + messages + "}", Endpoint::kChatCompletions);
    return std::holds_alternative<ApiError>(b) ? std::get<ApiError>(b).param : std::string("accepted");
  };
  EXPECT_EQ(bad_message(R"([{"role":"tool","content":"x"}])"), "messages[0].tool_call_id");
  EXPECT_EQ(bad_message(R"([{"role":"user","content":"x","tool_call_id":"c"}])"), "messages[0].tool_call_id");
  EXPECT_EQ(bad_message(R"([{"role":"user","content":"x","tool_calls":[]}])"), "messages[0].tool_calls");
  EXPECT_EQ(bad_message(R"([{"role":"assistant","tool_calls":[{"function":{"name":"f","arguments":"{oops"}}]}])"),
            "messages[0].tool_calls[0].function.arguments");
  EXPECT_EQ(bad_message(R"([{"role":"assistant","tool_calls":[{"function":{"arguments":"{}"}}]}])"),
            "messages[0].tool_calls[0].function.name");
  EXPECT_EQ(bad_message(R"([{"role":"assistant"}])"), "messages[0].content");
}

}  // namespace
}  // namespace vosti
