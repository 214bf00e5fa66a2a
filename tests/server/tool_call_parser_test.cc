// Tool-call parsers (server/tool_call_parser.h) and their streaming (server/tool_call_stream.h)
// on fixed texts: complete calls, parallel calls, malformed JSON as plain content, and streams cut
// at every byte joining to the non-streamed answer.
#include "server/tool_call_parser.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "server/tool_call_stream.h"
#include "tests/test_paths.h"

namespace vosti {
namespace {

ToolCallParse parse(std::string_view parser, std::string_view text) {
  auto p = make_tool_call_parser(parser);
  EXPECT_NE(p, nullptr) << parser;
  return p ? p->parse(text, /*final=*/true) : ToolCallParse{};
}

TEST(ToolCallParserTest, HermesOneCall) {
  const auto r = parse("hermes",
                       "Let me look.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": "
                       "\"Paris\", \"unit\": \"c\"}}\n</tool_call>");
  EXPECT_EQ(r.content, "Let me look.\n");
  ASSERT_EQ(r.calls.size(), 1u);
  EXPECT_EQ(r.calls[0].name, "get_weather");
  EXPECT_EQ(r.calls[0].arguments, R"({"city": "Paris", "unit": "c"})");
  EXPECT_TRUE(r.calls[0].complete);
}

TEST(ToolCallParserTest, HermesParallelCallsAndNoClosingTag) {
  const auto r = parse("hermes",
                       "<tool_call>{\"name\":\"a\",\"arguments\":{}}</tool_call>\n<tool_call>\n"
                       "{\"arguments\": {\"x\": [1, {\"y\": \"}\"}]}, \"name\": \"b\"}");
  EXPECT_EQ(r.content, "");
  ASSERT_EQ(r.calls.size(), 2u);
  EXPECT_EQ(r.calls[0].name, "a");
  EXPECT_EQ(r.calls[0].arguments, "{}");
  EXPECT_EQ(r.calls[1].name, "b");
  EXPECT_EQ(r.calls[1].arguments, R"({"x": [1, {"y": "}"}]})");
}

TEST(ToolCallParserTest, HermesArgumentsAsJsonText) {
  const auto r = parse("hermes", R"(<tool_call>{"name": "f", "arguments": "{\"a\": 1}"}</tool_call>)");
  ASSERT_EQ(r.calls.size(), 1u);
  EXPECT_EQ(r.calls[0].arguments, R"({"a": 1})");
}

TEST(ToolCallParserTest, MalformedCallsAreContent) {
  for (const char* text : {"<tool_call>{\"name\": \"f\", \"arguments\": {\"a\": }}</tool_call>",
                           "<tool_call>{\"arguments\": {}}</tool_call>", "<tool_call>{\"name\": 3}</tool_call>",
                           "<tool_call>{\"name\": \"f\", \"arguments\": [1]}</tool_call>",
                           "<tool_call>{\"name\": \"f\", \"arguments\": {\"a\": 1}", "just text", "<tool_call>"}) {
    const auto r = parse("hermes", text);
    EXPECT_TRUE(r.calls.empty()) << text;
    EXPECT_EQ(r.content, text);
  }
}

TEST(ToolCallParserTest, Llama3Json) {
  auto r = parse("llama3_json", R"({"name": "get_weather", "parameters": {"city": "Oslo"}})");
  EXPECT_EQ(r.content, "");
  ASSERT_EQ(r.calls.size(), 1u);
  EXPECT_EQ(r.calls[0].name, "get_weather");
  EXPECT_EQ(r.calls[0].arguments, R"({"city": "Oslo"})");
  r = parse("llama3_json",
            "<|python_tag|>{\"name\": \"a\", \"arguments\": {\"n\": 1}}; {\"name\": \"b\", "
            "\"parameters\": {}}");
  ASSERT_EQ(r.calls.size(), 2u);
  EXPECT_EQ(r.calls[0].arguments, R"({"n": 1})");
  EXPECT_EQ(r.calls[1].name, "b");
  for (const char* text : {"The answer is 4.", "{\"answer\": 4}", "{\"name\": \"a\", \"parameters\": {", "{} then"}) {
    r = parse("llama3_json", text);
    EXPECT_TRUE(r.calls.empty()) << text;
    EXPECT_EQ(r.content, text);
  }
}

TEST(ToolCallParserTest, MistralBothForms) {
  auto r = parse("mistral",
                 R"(Sure. [TOOL_CALLS] [{"name": "a", "arguments": {"q": "x"}}, {"name": "b", "arguments": {}}])");
  EXPECT_EQ(r.content, "Sure. ");
  ASSERT_EQ(r.calls.size(), 2u);
  EXPECT_EQ(r.calls[0].arguments, R"({"q": "x"})");
  EXPECT_EQ(r.calls[1].name, "b");
  r = parse("mistral", R"([TOOL_CALLS]get_weather[ARGS]{"city": "Rome"}[TOOL_CALLS]now[ARGS]{})");
  ASSERT_EQ(r.calls.size(), 2u);
  EXPECT_EQ(r.calls[0].name, "get_weather");
  EXPECT_EQ(r.calls[0].arguments, R"({"city": "Rome"})");
  EXPECT_EQ(r.calls[1].name, "now");
  r = parse("mistral", R"([TOOL_CALLS] [{"name": "a", "arguments": {"q": }])");
  EXPECT_TRUE(r.calls.empty());
}

TEST(ToolCallParserTest, FamilyTable) {
  EXPECT_EQ(tool_call_parser_for_template("{% if tools %}<tool_call>{% endif %}"), "hermes");
  EXPECT_EQ(tool_call_parser_for_template("{% if tools %}[TOOL_CALLS]{% endif %}"), "mistral");
  EXPECT_EQ(tool_call_parser_for_template("{% if tools %}<|python_tag|>{% endif %}"), "llama3_json");
  EXPECT_EQ(tool_call_parser_for_template("{{ messages }}"), "hermes");  // no tools: the fallback's format
  EXPECT_EQ(make_tool_call_parser("nope"), nullptr);
}

// The real templates the tokenizer tests carry pick their families' parsers.
TEST(ToolCallParserTest, FamilyTableOnRealTemplates) {
  const auto read = [](const std::string& name) {
    std::ifstream in(vosti::testing::source_dir() + "/tests/fuzz/corpus/chat_template_fuzz/" + name);
    std::stringstream text;
    text << in.rdbuf();
    EXPECT_FALSE(text.str().empty()) << name;
    return text.str();
  };
  EXPECT_EQ(tool_call_parser_for_template(read("template_qwen3")), "hermes");
  EXPECT_EQ(tool_call_parser_for_template(read("template_llama3_2")), "llama3_json");
  EXPECT_EQ(tool_call_parser_for_template(read("template_smollm2")), "hermes");  // no tools: the fallback
}

TEST(ToolCallParserTest, ScanJsonValue) {
  EXPECT_EQ(scan_json_value(R"({"a": "}"} x)", 0).kind, JsonExtent::kComplete);
  EXPECT_EQ(scan_json_value(R"({"a": "}"} x)", 0).end, 10u);
  EXPECT_EQ(scan_json_value(R"({"a": [1, 2)", 0).kind, JsonExtent::kIncomplete);
  EXPECT_EQ(scan_json_value(R"({"a": ]})", 0).kind, JsonExtent::kMalformed);
  EXPECT_EQ(scan_json_value("12,", 0).end, 2u);
}

// Streamed byte by byte (and in a few other cuts), the deltas join to the non-streamed answer, and
// no content is sent that turns out to be part of a call.
struct StreamJoin {
  std::string content;
  std::vector<std::string> names, arguments;
  int num_ids = 0;
};

StreamJoin stream(std::shared_ptr<const ToolCallParser> parser, std::string_view text, size_t cut) {
  int next_id = 0;
  ToolCallStream s(std::move(parser), [&] { return "call_" + std::to_string(next_id++); });
  StreamJoin out;
  auto take = [&](const ToolDelta& d) {
    out.content += d.content;
    for (const ToolCallOut& c : d.calls) {
      if (!c.id.empty()) {
        EXPECT_EQ(c.index, static_cast<int32_t>(out.names.size()));
        out.names.push_back(c.name);
        out.arguments.emplace_back();
        ++out.num_ids;
      }
      out.arguments.at(static_cast<size_t>(c.index)) += c.arguments;
    }
  };
  for (size_t i = 0; i < text.size(); i += cut) take(s.push(text.substr(i, cut)));
  take(s.finish());
  return out;
}

TEST(ToolCallStreamTest, FragmentsJoinToTheWholeAnswer) {
  const std::pair<const char*, const char*> cases[] = {
      {"hermes",
       "Checking both.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n"
       "</tool_call>\n<tool_call>\n{\"name\": \"get_time\", \"arguments\": {\"tz\": \"CET\"}}\n</tool_call>"},
      {"hermes", "No tools needed: 2 + 2 = 4. A <tag> is not a call."},
      {"llama3_json", R"({"name": "search", "parameters": {"q": "deterministic \"inference\""}})"},
      {"llama3_json", "Plain answer."},
      {"mistral", R"([TOOL_CALLS] [{"name": "a", "arguments": {"k": [1, 2, 3]}}])"},
      {"llama3_json", R"({"name": "a", "parameters": {"x": {"y": 2}}}; {"name": "b", "parameters": {}})"},
  };
  for (const auto& [name, text] : cases) {
    std::shared_ptr<const ToolCallParser> parser = make_tool_call_parser(name);
    const ToolCallParse whole = parser->parse(text, true);
    for (size_t cut : {1u, 3u, 7u, 1000u}) {
      const StreamJoin s = stream(parser, text, cut);
      EXPECT_EQ(s.content, whole.content) << name << " cut " << cut;
      ASSERT_EQ(s.names.size(), whole.calls.size()) << name << " cut " << cut;
      for (size_t i = 0; i < whole.calls.size(); ++i) {
        EXPECT_EQ(s.names[i], whole.calls[i].name);
        EXPECT_EQ(s.arguments[i], whole.calls[i].arguments) << name << " cut " << cut;
      }
    }
  }
}

TEST(ToolCallStreamTest, ContentIsHeldWhileACallMayStart) {
  ToolCallStream s(make_tool_call_parser("hermes"), [] { return std::string("call_0"); });
  EXPECT_EQ(s.push("Hello <tool").content, "Hello ");
  const ToolDelta d = s.push("_call>{\"name\": \"f\", \"arguments\": {\"a\"");
  EXPECT_EQ(d.content, "");
  ASSERT_EQ(d.calls.size(), 1u);
  EXPECT_EQ(d.calls[0].id, "call_0");
  EXPECT_EQ(d.calls[0].name, "f");
  EXPECT_EQ(d.calls[0].arguments, "{\"a\"");
  EXPECT_TRUE(s.called());
  // A "<" that turns out to be text goes out once it can no longer start the tag.
  ToolCallStream t(make_tool_call_parser("hermes"), [] { return std::string("x"); });
  EXPECT_EQ(t.push("a <").content, "a ");
  EXPECT_EQ(t.push("b").content, "<b");
  EXPECT_FALSE(t.called());
}

}  // namespace
}  // namespace vosti
