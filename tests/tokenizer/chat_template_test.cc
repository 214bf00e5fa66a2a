// Chat templates rendered exactly as transformers' apply_chat_template renders them
// (fixtures from make_fixtures.py), plus the interpreter's own semantics and errors.
#include "tokenizer/chat_template.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "tests/test_paths.h"

namespace vosti {
namespace {

using json = nlohmann::ordered_json;

const std::string kData = vosti::testing::source_dir() + "/tests/tokenizer/data/";

std::string read(const std::string& path) {
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << "missing " << path;
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST(ChatTemplate, MatchesTransformersOnEveryFixtureCase) {
  const json cases = json::parse(read(kData + "chat_templates.json")).at("cases");
  ASSERT_GE(cases.size(), 100u);
  int matched = 0, errors_expected = 0;
  for (const auto& c : cases) {
    const std::string name = c.at("template").get<std::string>();
    auto tmpl = ChatTemplate::parse(read(kData + "templates/" + name + ".jinja"));
    ASSERT_TRUE(tmpl.ok()) << name << ": " << tmpl.status().to_string();
    ChatOptions opt;
    opt.add_generation_prompt = c.at("add_generation_prompt").get<bool>();
    if (c.at("bos_token").is_string()) opt.bos_token = c.at("bos_token").get<std::string>();
    if (c.at("eos_token").is_string()) opt.eos_token = c.at("eos_token").get<std::string>();
    opt.extra_context = c.at("extra");
    if (c.contains("tools")) opt.tools = c.at("tools");
    auto out = tmpl->render(c.at("messages"), opt);
    if (c.contains("error")) {
      ++errors_expected;
      EXPECT_FALSE(out.ok()) << name << " should fail like jinja2 (" << c.at("error") << ") for "
                             << c.at("messages").dump();
      continue;
    }
    ASSERT_TRUE(out.ok()) << name << " " << c.at("messages").dump() << ": " << out.status().to_string();
    EXPECT_EQ(*out, c.at("expected").get<std::string>())
        << name << " extra=" << c.at("extra").dump() << " gen=" << opt.add_generation_prompt
        << " messages=" << c.at("messages").dump();
    matched += *out == c.at("expected").get<std::string>();
  }
  EXPECT_EQ(matched + errors_expected, static_cast<int>(cases.size()));
}

std::string render_expr(const std::string& source, const json& vars = json::object()) {
  auto tmpl = ChatTemplate::parse(source);
  if (!tmpl.ok()) return "PARSE ERROR: " + tmpl.status().message();
  ChatOptions opt;
  opt.extra_context = vars;
  auto out = tmpl->render(json::array(), opt);
  return out.ok() ? *out : "RENDER ERROR: " + out.status().message();
}

TEST(ChatTemplate, ExpressionSemanticsFollowJinja2) {
  const json vars = {
      {"items", {"x", "y", "z"}}, {"s", "abcdef"}, {"n", 7}, {"d", {{"b", 2}, {"a", 1}}}, {"nothing", nullptr}};
  EXPECT_EQ(render_expr("{{ s[1:] }}|{{ s[:-1] }}|{{ s[::-1] }}|{{ s[4:2] }}", vars), "bcdef|abcde|fedcba|");
  EXPECT_EQ(render_expr("{{ items[-1] }}{{ items|length }}{{ items[1:]|join(',') }}", vars), "z3y,z");
  EXPECT_EQ(render_expr("{{ 7 // 2 }} {{ -7 // 2 }} {{ -7 % 3 }} {{ 7 / 2 }} {{ 2 ** 10 }} {{ 1.0 }} {{ 1e20 }}"),
            "3 -4 2 3.5 1024 1.0 1e+20");
  EXPECT_EQ(render_expr("{{ nope is defined }}{{ nothing is none }}{{ n is number }}{{ d is mapping }}", vars),
            "FalseTrueTrueTrue");
  EXPECT_EQ(render_expr("{{ nope or 'fb' }}|{{ '' and 'never' }}|{{ n if n > 3 else 0 }}", vars), "fb||7");
  EXPECT_EQ(render_expr("{{ d|tojson }}|{{ d|tojson(indent=2) }}", vars),
            "{\"b\": 2, \"a\": 1}|{\n  \"b\": 2,\n  \"a\": 1\n}");
  EXPECT_EQ(render_expr("{{ items }}{{ nothing }}{{ true }}{{ d }}", vars), "['x', 'y', 'z']NoneTrue{'b': 2, 'a': 1}");
  EXPECT_EQ(render_expr("{{ '  a b  '.strip() }}|{{ 'a,b,,c'.split(',') }}|{{ ' x  y '.split() }}|{{ 'abc'.upper() }}"),
            "a b|['a', 'b', '', 'c']|['x', 'y']|ABC");
  EXPECT_EQ(render_expr("{{ 'é' | length }}{{ 'x' ~ 1 ~ none }}{{ 'ab' in 'cabd' }}{{ 'q' not in items }}", vars),
            "1x1NoneTrueTrue");
  EXPECT_EQ(render_expr("{% for k, v in d|items %}{{ k }}={{ v }}{% if not loop.last %},{% endif %}{% endfor %}", vars),
            "b=2,a=1");
  EXPECT_EQ(render_expr("{% set ns = namespace(c=0) %}{% for i in range(5) %}{% if i == 3 %}{% break %}{% endif %}"
                        "{% set ns.c = ns.c + i %}{% endfor %}{{ ns.c }}"),
            "3");
  EXPECT_EQ(render_expr("{% for x in [] %}a{% else %}empty{% endfor %}"), "empty");
  EXPECT_EQ(render_expr("{% for x in items if x != 'y' %}{{ loop.index }}{{ x }}{% endfor %}", vars), "1x2z");
  EXPECT_EQ(render_expr("{% set x = 1 %}{% for i in [1] %}{% set x = 2 %}{% endfor %}{{ x }}"), "1");
  EXPECT_EQ(render_expr("{{ items|select('equalto', 'y')|list }}{{ items|reject('equalto', 'y')|join }}", vars),
            "['y']xz");
  EXPECT_EQ(render_expr("{% set t %}in{{ 1 }}{% endset %}{{ t }}"), "in1");
}

TEST(ChatTemplate, WhitespaceControlMatchesHfEnvironment) {
  // trim_blocks removes the newline after a block tag; lstrip_blocks the indentation before it.
  EXPECT_EQ(render_expr("a\n  {% if true %}\n  b\n  {% endif %}\nc"), "a\n  b\nc");
  EXPECT_EQ(render_expr("a  {%- if true -%}  b  {%- endif %}"), "ab");
  EXPECT_EQ(render_expr("x {{- ' y ' -}} z"), "x y z");
  EXPECT_EQ(render_expr("{# comment #}\nq\n"), "q");
  EXPECT_EQ(render_expr("  {%+ if true %}k{% endif %}"), "  k");
}

TEST(ChatTemplate, ErrorsNameTheProblem) {
  EXPECT_NE(render_expr("{% macro m() %}x{% endmacro %}").find("'{% macro %}' statement is not supported"),
            std::string::npos);
  EXPECT_NE(render_expr("line1\n{{ x + }}").find("line 2"), std::string::npos);
  EXPECT_NE(render_expr("{% if x %}never closed").find("syntax error"), std::string::npos);
  EXPECT_NE(render_expr("{{ 'unterminated }}").find("unterminated string"), std::string::npos);
  EXPECT_NE(render_expr("{{ raise_exception('boom') }}").find("boom"), std::string::npos);
  EXPECT_NE(render_expr("{{ nope.attr }}").find("'nope' is undefined"), std::string::npos);
  EXPECT_NE(render_expr("{{ x|nosuchfilter }}").find("'nosuchfilter' filter is not supported"), std::string::npos);
  EXPECT_NE(render_expr("{{ 1 + 'a' }}").find("TypeError"), std::string::npos);
  EXPECT_NE(render_expr("{{ [1].append(2) }}").find("SecurityError"), std::string::npos);
  // Number literals beyond int64 (found by the chat template fuzzer: an uncaught std::out_of_range).
  EXPECT_NE(render_expr("{{ 99999999999999999999999 }}").find("out of range"), std::string::npos);
  EXPECT_NE(render_expr("{{ loop.99999999999999999999999 }}").find("out of range"), std::string::npos);
  // Integer results beyond int64 are an OverflowError, never undefined behaviour (fuzzer: 888**1107).
  EXPECT_NE(render_expr("{{ 888 ** 1107 }}").find("OverflowError"), std::string::npos);
  EXPECT_NE(render_expr("{{ 9223372036854775807 + 1 }}").find("OverflowError"), std::string::npos);
  EXPECT_NE(render_expr("{{ -9223372036854775807 - 2 }}").find("OverflowError"), std::string::npos);
  EXPECT_NE(render_expr("{{ 4294967296 * 4294967296 }}").find("OverflowError"), std::string::npos);
  EXPECT_NE(render_expr("{{ (-9223372036854775807 - 1) // -1 }}").find("OverflowError"), std::string::npos);
  EXPECT_EQ(
      render_expr("{{ 2 ** 62 }} {{ (-2) ** 63 }} {{ 1 ** 100000000000 }} {{ [1, 2, 3][1::9223372036854775807] }}"),
      "4611686018427387904 -9223372036854775808 1 [2]");
  EXPECT_EQ(render_expr("{{ nope }}{{ nope|length }}{{ nope|default('dflt') }}"), "0dflt");
}

TEST(ChatTemplate, ChatMessageStructRendersLikeJson) {
  const std::string smol = read(kData + "templates/smollm2.jinja");
  ChatOptions opt;
  opt.add_generation_prompt = true;
  auto out = render_chat(smol, {{"user", "Hi there", std::nullopt}}, opt);
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  EXPECT_EQ(*out,
            "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n"
            "<|im_start|>user\nHi there<|im_end|>\n<|im_start|>assistant\n");
  auto bad = render_chat(smol, {}, opt);
  EXPECT_TRUE(bad.ok());  // SmolLM2's template accepts an empty conversation
  auto not_utf8 = ChatTemplate::parse(std::string("{{ '\xff' }}"));
  EXPECT_FALSE(not_utf8.ok());
}

}  // namespace
}  // namespace vosti
