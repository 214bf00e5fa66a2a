#include "sample/stop_checker.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace vosti {
namespace {

// Feeds text pieces one token each and records what a streaming caller would release.
struct Stream {
  explicit Stream(StopConditions c) : checker(std::move(c)) {}

  StopDecision push(int32_t token, const std::string& piece) {
    tokens.push_back(token);
    text += piece;
    const StopDecision d = checker.check(tokens, text, checked);
    checked = text.size();
    EXPECT_GE(d.text_size, released) << "released text must never shrink";
    released = d.text_size;
    return d;
  }
  std::string visible() const { return text.substr(0, released); }

  StopChecker checker;
  std::vector<int32_t> tokens;
  std::string text;
  size_t checked = 0;
  size_t released = 0;
};

StopConditions with_stops(std::vector<std::string> stops) {
  StopConditions c;
  c.stop_strings = std::move(stops);
  c.max_tokens = 100;
  return c;
}

TEST(StopChecker, EosAndStopTokens) {
  StopConditions c;
  c.eos_token_ids = {2};
  c.stop_token_ids = {7};
  c.max_tokens = 10;
  const StopChecker checker(c);
  const std::vector<int32_t> eos = {5, 2};
  StopDecision d = checker.check(eos, "ab", 0);
  EXPECT_EQ(d.reason, StopReason::kEosToken);
  EXPECT_EQ(d.stop_token, 2);
  EXPECT_EQ(d.text_size, 2u);
  const std::vector<int32_t> stop = {5, 7};
  EXPECT_EQ(checker.check(stop, "ab", 0).reason, StopReason::kStopToken);
  EXPECT_FALSE(checker.check(std::vector<int32_t>{2, 5}, "ab", 0).finished());  // only the last token counts

  c.ignore_eos = true;
  const StopChecker ignoring(c);
  EXPECT_FALSE(ignoring.check(eos, "ab", 0).finished());
  EXPECT_EQ(ignoring.check(stop, "ab", 0).reason, StopReason::kStopToken);  // still stops
}

TEST(StopChecker, MaxTokensFinishesWithLengthAndReleasesEverything) {
  StopConditions c = with_stops({"END"});
  c.max_tokens = 2;
  Stream s(c);
  EXPECT_FALSE(s.push(1, "xE").finished());
  EXPECT_EQ(s.visible(), "x");  // "E" could start "END"
  const StopDecision d = s.push(1, "N");
  EXPECT_EQ(d.reason, StopReason::kMaxTokens);
  EXPECT_EQ(s.visible(), "xEN");
  // max_tokens 0: finished before any token.
  c.max_tokens = 0;
  EXPECT_EQ(StopChecker(c).check({}, "", 0).reason, StopReason::kMaxTokens);
}

TEST(StopChecker, TokenStopWinsOverLength) {
  StopConditions c;
  c.eos_token_ids = {2};
  c.max_tokens = 1;
  EXPECT_EQ(StopChecker(c).check(std::vector<int32_t>{2}, "", 0).reason, StopReason::kEosToken);
}

TEST(StopChecker, StopStringSplitAcrossTokensIsHeldBackThenCut) {
  Stream s(with_stops({"</end>"}));
  EXPECT_FALSE(s.push(1, "Hello <").finished());
  EXPECT_EQ(s.visible(), "Hello ");
  EXPECT_FALSE(s.push(1, "/en").finished());
  EXPECT_EQ(s.visible(), "Hello ");
  const StopDecision d = s.push(1, "d> tail");
  EXPECT_EQ(d.reason, StopReason::kStopString);
  EXPECT_EQ(d.stop_string, 0);
  EXPECT_EQ(s.visible(), "Hello ");
}

TEST(StopChecker, FalseStartIsReleasedOnceItCannotMatch) {
  Stream s(with_stops({"</end>"}));
  s.push(1, "a </e");
  EXPECT_EQ(s.visible(), "a ");
  s.push(1, "x");
  EXPECT_EQ(s.visible(), "a </ex");
}

TEST(StopChecker, IncludeStopStringInOutput) {
  StopConditions c = with_stops({"STOP"});
  c.include_stop_str_in_output = true;
  Stream s(c);
  s.push(1, "abST");
  const StopDecision d = s.push(1, "OPcd");
  EXPECT_EQ(d.reason, StopReason::kStopString);
  EXPECT_EQ(s.visible(), "abSTOP");
}

TEST(StopChecker, EarliestOfSeveralStopStringsWins) {
  Stream s(with_stops({"cd", "bcde", "xyz"}));
  EXPECT_FALSE(s.push(1, "ab").finished());
  EXPECT_EQ(s.visible(), "a");  // "b" starts "bcde"
  const StopDecision d = s.push(1, "cdef");
  EXPECT_EQ(d.reason, StopReason::kStopString);
  EXPECT_EQ(d.stop_string, 1);  // "bcde" starts at 1, before "cd" at 2
  EXPECT_EQ(s.visible(), "a");
  // Same start: the one listed first.
  Stream t(with_stops({"abc", "ab"}));
  const StopDecision e = t.push(1, "xabc");
  EXPECT_EQ(e.stop_string, 0);
  EXPECT_EQ(t.visible(), "x");
}

TEST(StopChecker, HoldsBackOnlyTheLongestPossibleStart) {
  Stream s(with_stops({"aab"}));
  s.push(1, "xaa");
  EXPECT_EQ(s.visible(), "x");
  s.push(1, "a");  // "xaaa": only the last "aa" can still start "aab"
  EXPECT_EQ(s.visible(), "xa");
  EXPECT_EQ(s.push(1, "b").reason, StopReason::kStopString);
  EXPECT_EQ(s.visible(), "xa");
}

TEST(StopChecker, UnicodeStopStrings) {
  Stream s(with_stops({"世界", "é!"}));
  s.push(1, "你好世");
  EXPECT_EQ(s.visible(), "你好");
  s.push(1, "人");  // 世人: no match, released whole
  EXPECT_EQ(s.visible(), "你好世人");
  // A multi-byte character arriving byte by byte.
  s.push(1, "caf\xC3");
  EXPECT_EQ(s.visible(), "你好世人caf");
  s.push(1, "\xA9");
  EXPECT_EQ(s.visible(), "你好世人caf");  // "é" may still become "é!"
  const StopDecision d = s.push(1, "!");
  EXPECT_EQ(d.reason, StopReason::kStopString);
  EXPECT_EQ(d.stop_string, 1);
  EXPECT_EQ(s.visible(), "你好世人caf");
}

TEST(StopChecker, MatchAcrossTheCheckedBoundaryIsFound) {
  const StopChecker checker(with_stops({"abc"}));
  const std::vector<int32_t> tokens = {1, 1};
  // "ab" was checked before; "c" completes the match that starts in old text.
  const StopDecision d = checker.check(tokens, "zzabc", 4);
  EXPECT_EQ(d.reason, StopReason::kStopString);
  EXPECT_EQ(d.text_size, 2u);
}

TEST(StopChecker, ValidateNamesTheField) {
  StopConditions c = with_stops({"ok", ""});
  Status s = c.validate(10);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("stop string 1 is empty"), std::string::npos) << s.message();
  c = with_stops({});
  c.stop_token_ids = {10};
  s = c.validate(10);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("stop_token_ids"), std::string::npos) << s.message();
  c.stop_token_ids = {};
  c.eos_token_ids = {-1};
  EXPECT_NE(c.validate(10).message().find("eos_token_ids"), std::string::npos);
  c.eos_token_ids = {};
  c.max_tokens = -1;
  EXPECT_NE(c.validate(10).message().find("max_tokens"), std::string::npos);
  c.max_tokens = 0;
  EXPECT_TRUE(c.validate(10).ok());
  EXPECT_STREQ(stop_reason_name(StopReason::kStopString), "stop_string");
}

}  // namespace
}  // namespace vosti
