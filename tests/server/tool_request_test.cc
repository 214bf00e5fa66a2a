// The tool fields of a chat request (server/tool_request.h, through parse_generation_request): what
// each tool_choice becomes, the structural tag that forces a call in each family's format (over a
// real byte-level vocabulary: it accepts exactly that format, and the family's parser reads it
// back), and a 400 naming the problem for each malformed input (the template fallback:
// tests/tokenizer/chat_tools_test.cc).
#include "server/tool_request.h"

#include <gtest/gtest.h>

#include "server/openai_request.h"
#include "server/tool_call_parser.h"
#include "sample/token_bitmask.h"
#include "structured/grammar.h"
#include "tests/test_paths.h"
#include "tokenizer/tokenizer.h"

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
  ASSERT_TRUE(r.tools);
  EXPECT_EQ(r.tools->choice, ToolChoice::kRequired);
  EXPECT_FALSE(r.tools->parallel_tool_calls);
  EXPECT_FALSE(r.structured) << "the server sets the grammar in the served format (forced_constraint)";

  r = ok(std::string(kTools) + R"(,"tool_choice":{"type":"function","function":{"name":"get_weather"}})");
  ASSERT_TRUE(r.tools);
  EXPECT_EQ(r.tools->choice, ToolChoice::kNamed);
  EXPECT_EQ(r.tools->named_function, "get_weather");
  EXPECT_FALSE(ok(R"("tools":[],"tool_choice":"none")").tools);
}

// Whether the grammar of `spec` accepts `text` whole: spelt by the allowed token whose text is the
// longest prefix of what is left, step by step, ending where the grammar may end.
bool accepts(GrammarCache& cache, const Tokenizer& tok, const StructuredOutputs& spec, std::string text) {
  auto grammar = cache.compile(spec);
  EXPECT_TRUE(grammar.ok()) << grammar.status().to_string() << "\n" << spec.text;
  if (!grammar.ok()) return false;
  GrammarState state(*grammar);
  std::vector<uint32_t> mask(static_cast<size_t>(state.mask_words()));
  while (!text.empty()) {
    state.fill_next_mask(mask);
    int32_t best = -1;
    size_t best_len = 0;
    for (int32_t id = 0; id < tok.vocab_size(); ++id) {
      if (!token_allowed(mask.data(), id)) continue;
      const std::string piece = tok.decode_lenient(std::vector<int32_t>{id});
      if (piece.size() > best_len && text.starts_with(piece)) {
        best = id;
        best_len = piece.size();
      }
    }
    if (best < 0 || !state.accept(best)) return false;
    text = text.substr(best_len);
  }
  return state.completed();
}

TEST(ToolRequestTest, ForcedCallsAreTheFamilysFormatAndParseBack) {
  auto tok = Tokenizer::from_hf_dir(vosti::testing::source_dir() + "/tests/tokenizer/data/bpe_gpt2");
  ASSERT_TRUE(tok.ok()) << tok.status().to_string();
  std::vector<int32_t> stops = (*tok)->stop_ids();
  if ((*tok)->eos_id()) stops.push_back(*(*tok)->eos_id());
  auto cache = GrammarCache::create(**tok, (*tok)->vocab_size(), stops);
  ASSERT_TRUE(cache.ok()) << cache.status().to_string();
  const GenerationRequest required = ok(std::string(kTools) + R"(,"tool_choice":"required")");
  GenerationRequest one = required;
  one.tools->parallel_tool_calls = false;
  const GenerationRequest named =
      ok(std::string(kTools) + R"(,"tool_choice":{"type":"function","function":{"name":"get_weather"}})");
  struct Case {
    const char* parser;
    std::string weather, now, joined;  // a call of each function, and both as one parallel answer
  };
  const Case cases[] = {
      {"hermes", "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Rome\"}}\n</tool_call>",
       "<tool_call>\n{\"name\": \"now\", \"arguments\": {}}\n</tool_call>", "\n"},
      {"llama3_json", R"({"name": "get_weather", "parameters": {"city": "Rome"}})",
       R"({"name": "now", "parameters": {}})", "; "},
      {"mistral", R"({"name": "get_weather", "arguments": {"city": "Rome"}})", R"({"name": "now", "arguments": {}})",
       ", "},
  };
  for (const Case& c : cases) {
    const std::optional<ToolCallFormat> format = tool_call_format(c.parser);
    ASSERT_TRUE(format) << c.parser;
    const auto list = [&](const std::string& calls) { return format->list_begin + calls + format->list_end; };
    const StructuredOutputs any = forced_constraint(*required.tools, *format);
    EXPECT_EQ(any.kind, StructuredKind::kStructuralTag);
    EXPECT_TRUE(accepts(**cache, **tok, any, list(c.weather))) << c.parser << "\n" << any.text;
    EXPECT_TRUE(accepts(**cache, **tok, any, list(c.now))) << c.parser;
    const std::string both = list(c.weather + c.joined + c.now);
    EXPECT_TRUE(accepts(**cache, **tok, any, both)) << c.parser;
    EXPECT_FALSE(accepts(**cache, **tok, forced_constraint(*one.tools, *format), both)) << c.parser;
    EXPECT_FALSE(accepts(**cache, **tok, any, "")) << c.parser << ": at least one call";
    EXPECT_FALSE(accepts(**cache, **tok, any, "Sure! " + list(c.weather))) << c.parser << ": only calls";
    const std::string no_city = list(c.now).replace(list(c.now).find("now"), 3, "get_weather");
    EXPECT_FALSE(accepts(**cache, **tok, any, no_city)) << c.parser << ": 'city' is required";
    const StructuredOutputs only_weather = forced_constraint(*named.tools, *format);
    EXPECT_TRUE(accepts(**cache, **tok, only_weather, list(c.weather))) << c.parser;
    EXPECT_FALSE(accepts(**cache, **tok, only_weather, list(c.now))) << c.parser << ": the named function only";
    // The family's parser reads the forced text back.
    const ToolCallParse parsed = make_tool_call_parser(c.parser)->parse(both, /*final=*/true);
    EXPECT_EQ(parsed.content, "") << c.parser;
    ASSERT_EQ(parsed.calls.size(), 2u) << c.parser;
    EXPECT_EQ(parsed.calls[0].name, "get_weather");
    EXPECT_EQ(parsed.calls[0].arguments, R"({"city": "Rome"})");
    EXPECT_EQ(parsed.calls[1].name, "now");
  }
  // Compiled once per distinct tag (three a format: any calls, one call, the named function), as schemas are.
  EXPECT_EQ((*cache)->num_compiled(), 9);
  EXPECT_FALSE(tool_call_format("forced_array"));
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
