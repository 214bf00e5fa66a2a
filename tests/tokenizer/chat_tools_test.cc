// Where a chat request's tools go (tokenizer/chat_tools.h): the template's `tools` variable, or the
// fallback system turn for a template without tools, with calls and results written as text.
#include "tokenizer/chat_tools.h"

#include <gtest/gtest.h>

namespace vosti {
namespace {

TEST(ChatToolsTest, FallbackPutsToolsInTheSystemTurn) {
  using ordered = nlohmann::ordered_json;
  const ordered tools = ordered::parse(R"([{"type":"function","function":{"name":"f"}}])");
  const ordered messages = ordered::parse(R"([{"role":"user","content":"q"},
      {"role":"assistant","content":"","tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":{"a":1}}}]},
      {"role":"tool","tool_call_id":"c","content":"r1"},{"role":"tool","tool_call_id":"d","content":"r2"}])");
  const ordered out = tool_fallback_messages(messages, tools);
  ASSERT_EQ(out.size(), 4u);
  EXPECT_EQ(out[0]["role"], "system");
  EXPECT_NE(out[0]["content"].get<std::string>().find(R"({"type":"function","function":{"name":"f"}})"),
            std::string::npos);
  EXPECT_EQ(out[2]["content"], "<tool_call>\n{\"name\":\"f\",\"arguments\":{\"a\":1}}\n</tool_call>");
  EXPECT_EQ(out[3]["role"], "user");
  EXPECT_EQ(out[3]["content"], "<tool_response>\nr1\n</tool_response>\n<tool_response>\nr2\n</tool_response>");
  EXPECT_TRUE(template_takes_tools("{% if tools %}x{% endif %}"));
  EXPECT_FALSE(template_takes_tools("{{ messages[0].content }}"));
}

TEST(ChatToolsTest, PlaceToolsPicksTheTemplateOrTheFallback) {
  using ordered = nlohmann::ordered_json;
  const ordered tools = ordered::parse(R"([{"type":"function","function":{"name":"f"}}])");
  const ordered question = ordered::parse(R"([{"role":"user","content":"q"}])");
  ToolPlacement p = place_tools("{% if tools %}{{ tools }}{% endif %}", question, tools);
  EXPECT_EQ(p.messages, question);
  EXPECT_EQ(p.tools, tools);
  p = place_tools("{% if tools %}{{ tools }}{% endif %}", question, ordered::array());
  EXPECT_TRUE(p.tools.is_null());
  p = place_tools("{{ messages }}", question, tools);
  EXPECT_TRUE(p.tools.is_null());
  ASSERT_EQ(p.messages.size(), 2u);
  EXPECT_EQ(p.messages[0]["role"], "system");
  // No tools and no tool turns: the messages as sent; a tool turn without tools: still rewritten.
  EXPECT_EQ(place_tools("{{ messages }}", question, ordered::array()).messages, question);
  const ordered result = ordered::parse(R"([{"role":"user","content":"q"},{"role":"tool","content":"r"}])");
  p = place_tools("{{ messages }}", result, ordered::array());
  ASSERT_EQ(p.messages.size(), 3u);
  EXPECT_EQ(p.messages[2]["content"], "<tool_response>\nr\n</tool_response>");
}

}  // namespace
}  // namespace vosti
