#include "server/json_writer.h"
#include "tokenizer/utf8.h"

#include <cstring>
#include <random>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace vosti {
namespace {

TEST(JsonWriterTest, NestsAndSeparates) {
  JsonWriter w;
  w.begin_object().key("a").value(int64_t{1}).key("b").begin_array().value("x").null().value(true).end_array();
  w.key("c").begin_object().end_object().end_object();
  EXPECT_EQ(w.str(), R"({"a":1,"b":["x",null,true],"c":{}})");
}

TEST(JsonWriterTest, EscapesControlsQuotesAndInvalidUtf8) {
  std::string out;
  append_json_string(out, std::string("a\"\\\n\x01\xff", 6) + "\xC3\xA9");
  EXPECT_EQ(out, "\"a\\\"\\\\\\n\\u0001\xEF\xBF\xBD\xC3\xA9\"");
  auto parsed = nlohmann::json::parse(out);
  EXPECT_EQ(parsed.get<std::string>(), std::string("a\"\\\n\x01\xEF\xBF\xBD\xC3\xA9"));
}

TEST(JsonWriterTest, Utf8Validation) {
  EXPECT_TRUE(is_valid_utf8("plain \xE2\x82\xAC \xF0\x9F\x98\x80"));
  EXPECT_FALSE(is_valid_utf8("\xC0\xAF"));          // overlong
  EXPECT_FALSE(is_valid_utf8("\xED\xA0\x80"));      // surrogate
  EXPECT_FALSE(is_valid_utf8("\xF4\x90\x80\x80"));  // > U+10FFFF
  EXPECT_FALSE(is_valid_utf8("\xE2\x82"));          // truncated
}

// The printed float parses back (as a double, then narrowed, as clients do) to the same bits.
TEST(JsonWriterTest, FloatsRoundTripBitExactly) {
  std::mt19937 rng(7);
  for (int i = 0; i < 100000; ++i) {
    uint32_t bits = rng();
    float f;
    std::memcpy(&f, &bits, 4);
    if (!std::isfinite(f)) continue;
    const std::string s = float_to_shortest(f);
    const float back = static_cast<float>(std::strtod(s.c_str(), nullptr));
    uint32_t back_bits;
    std::memcpy(&back_bits, &back, 4);
    ASSERT_EQ(back_bits, bits) << s;
    ASSERT_TRUE(nlohmann::json::accept(s)) << s;
  }
  EXPECT_EQ(float_to_shortest(-0.1f), "-0.1");
  EXPECT_EQ(float_to_shortest(-std::numeric_limits<float>::infinity()), "-9999.0");
}

}  // namespace
}  // namespace vosti
