// Tokenizer behaviour beyond the HF fixtures: streaming detokenisation, bad input,
// loader errors, UTF-8 repair, and the default model's special tokens.
#include "tokenizer/tokenizer.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "io/gguf.h"
#include "tests/test_paths.h"
#include "tokenizer/utf8.h"

namespace vosti {
namespace {

const std::string kData = vosti::testing::source_dir() + "/tests/tokenizer/data/";

std::shared_ptr<const Tokenizer> load(const std::string& name) {
  auto tok = Tokenizer::from_hf_dir(kData + name);
  EXPECT_TRUE(tok.ok()) << tok.status().to_string();
  return tok.ok() ? *tok : nullptr;
}

std::vector<std::string> corpus_texts(size_t limit) {
  std::ifstream in(kData + "corpus.json");
  std::stringstream ss;
  ss << in.rdbuf();
  const auto j = nlohmann::json::parse(ss.str());
  std::vector<std::string> out;
  for (const auto& e : j.at("entries")) {
    if (e.contains("text")) out.push_back(e.at("text").get<std::string>());
    if (out.size() >= limit) break;
  }
  return out;
}

TEST(Utf8, RepairMatchesPythonReplace) {
  // Expected strings from bytes.decode("utf-8", errors="replace").
  const std::string r(kReplacementChar);
  EXPECT_EQ(repair_utf8("\xed\xa0\x80"), r + r + r);  // a surrogate's encoding: three maximal subparts
  EXPECT_EQ(repair_utf8("\xe2\x82"), r);              // truncated sequence: one
  EXPECT_EQ(repair_utf8("a\xf0\x9f\x98"
                        "b"),
            "a" + r + "b");
  EXPECT_EQ(repair_utf8("\xc0\xaf"), r + r);                  // overlong
  EXPECT_EQ(repair_utf8("\xf4\x90\x80\x80"), r + r + r + r);  // above U+10FFFF
  EXPECT_EQ(repair_utf8("ok \xc3\xa9"), "ok \xc3\xa9");
  EXPECT_TRUE(is_valid_utf8("\xf0\x9f\x98\x80"));
  EXPECT_FALSE(is_valid_utf8("\xf0\x9f\x98"));
  EXPECT_EQ(utf8_complete_prefix_length("ab\xf0\x9f\x98"), 2u);
  EXPECT_EQ(utf8_complete_prefix_length("ab\xff"), 3u);
}

TEST(Tokenizer, InvalidUtf8EncodesLikeItsRepairedForm) {
  auto tok = load("bpe_llama3");
  ASSERT_NE(tok, nullptr);
  for (const std::string& bad : {std::string("\xff\xfe"), std::string("a\xed\xa0\x80z"), std::string("\x80", 1),
                                 std::string("nul\0byte", 8), std::string("\x1b[31m\x07")}) {
    auto ids = tok->encode(bad, false);
    ASSERT_TRUE(ids.ok());
    auto want = tok->encode(repair_utf8(bad), false);
    EXPECT_EQ(*ids, *want);
    for (int32_t id : *ids) EXPECT_TRUE(id >= 0 && id < tok->vocab_size());
  }
}

TEST(Tokenizer, DecodeRejectsIdsOutsideTheVocabulary) {
  auto tok = load("spm_metaspace");
  ASSERT_NE(tok, nullptr);
  const std::vector<int32_t> bad = {5, static_cast<int32_t>(tok->vocab_size()), 7};
  auto r = tok->decode(bad);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kOutOfRange);
  EXPECT_NE(r.status().message().find("position 1"), std::string::npos);
  EXPECT_FALSE(tok->decode(std::vector<int32_t>{-1}).ok());
  EXPECT_EQ(tok->decode_lenient(bad), tok->decode_lenient(std::vector<int32_t>{5, 7}));  // HF drops them
}

TEST(Tokenizer, SpecialTokensAreMatchedWholeAndSkippable) {
  auto tok = load("bpe_qwen2");
  ASSERT_NE(tok, nullptr);
  const auto im_start = tok->piece_to_id("<|im_start|>");
  const auto think = tok->piece_to_id("<think>");
  ASSERT_TRUE(im_start && think);
  auto ids = tok->encode("<|im_start|>user<think>x</think>", false);
  ASSERT_TRUE(ids.ok());
  EXPECT_EQ(ids->front(), *im_start);
  EXPECT_TRUE(tok->is_special(*im_start));
  EXPECT_FALSE(tok->is_special(*think));  // an added, non-special token
  EXPECT_EQ(*tok->decode(*ids, /*skip_special_tokens=*/true), "user<think>x</think>");
  EXPECT_EQ(*tok->decode(*ids, false), "<|im_start|>user<think>x</think>");
  // A partial special token is ordinary text.
  auto partial = tok->encode("<|im_sta", false);
  ASSERT_TRUE(partial.ok());
  EXPECT_EQ(std::count(partial->begin(), partial->end(), *im_start), 0);
  EXPECT_TRUE(tok->is_stop(*tok->piece_to_id("<|im_end|>")));
}

void check_streaming(const Tokenizer& tok, bool skip_special) {
  for (const auto& text : corpus_texts(400)) {
    auto ids = tok.encode(text, false);
    ASSERT_TRUE(ids.ok());
    StreamingDecoder stream(tok, skip_special);
    std::string joined;
    for (int32_t id : *ids) {
      const std::string piece = stream.push(id);
      EXPECT_TRUE(is_valid_utf8(piece));
      EXPECT_EQ(piece.find(kReplacementChar) == std::string::npos || text.find(kReplacementChar) != std::string::npos,
                true)
          << "streamed a replacement character for " << text;
      joined += piece;
    }
    joined += stream.flush();
    EXPECT_EQ(joined, *tok.decode(*ids, skip_special)) << "text: " << text;
  }
}

TEST(StreamingDecoder, ConcatenationEqualsDecodeByteLevel) {
  auto tok = load("bpe_llama3");
  ASSERT_NE(tok, nullptr);
  check_streaming(*tok, false);
  check_streaming(*tok, true);
}

TEST(StreamingDecoder, ConcatenationEqualsDecodeSentencePieceByteFallback) {
  auto tok = load("spm_metaspace");
  ASSERT_NE(tok, nullptr);
  check_streaming(*tok, false);
  // Byte-fallback pieces of one character come out only when the character is complete.
  auto ids = tok->encode("\xF0\x9F\xA6\x99", false);  // an emoji absent from the small vocabulary
  ASSERT_TRUE(ids.ok());
  ASSERT_GE(ids->size(), 4u);
  StreamingDecoder stream(*tok);
  std::string out;
  for (size_t i = 0; i < ids->size(); ++i) {
    const std::string piece = stream.push((*ids)[i]);
    if (i + 1 < ids->size()) {
      EXPECT_EQ(piece.find("\xF0\x9F\xA6\x99"), std::string::npos);
    }
    out += piece;
  }
  EXPECT_EQ(out + stream.flush(), *tok->decode(*ids));
}

TEST(TokenizerLoad, ErrorsNameTheProblem) {
  auto missing = Tokenizer::from_hf_dir("/nonexistent/dir");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  auto bad_json = Tokenizer::from_hf_json("{not json", "", "test");
  ASSERT_FALSE(bad_json.ok());
  EXPECT_EQ(bad_json.status().code(), StatusCode::kInvalidArgument);
  auto wordpiece = Tokenizer::from_hf_json(R"({"model": {"type": "WordPiece", "vocab": {}}})", "", "test");
  ASSERT_FALSE(wordpiece.ok());
  EXPECT_EQ(wordpiece.status().code(), StatusCode::kUnimplemented);
  auto bad_merge =
      Tokenizer::from_hf_json(R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": ["a b"]}})", "", "test");
  ASSERT_FALSE(bad_merge.ok());
  EXPECT_NE(bad_merge.status().message().find("not in the vocabulary"), std::string::npos);
  auto bad_pre = Tokenizer::from_hf_json(
      R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": []}, "pre_tokenizer": {"type": "Split", "pattern": {"Regex": "(unclosed"}, "behavior": "Isolated"}})",
      "", "test");
  ASSERT_FALSE(bad_pre.ok());
  EXPECT_NE(bad_pre.status().message().find("(unclosed"), std::string::npos);
  auto not_model = Tokenizer::load_for_model("/nonexistent/model.gguf");
  ASSERT_FALSE(not_model.ok());
  EXPECT_EQ(not_model.status().code(), StatusCode::kNotFound);
}

TEST(TokenizerLoad, SmolLM2GgufSpecialTokens) {
  const char* path = std::getenv("VOSTI_DEFAULT_MODEL");
  if (path == nullptr || !std::filesystem::exists(path)) GTEST_SKIP() << "VOSTI_DEFAULT_MODEL is unset or missing";
  auto tok = Tokenizer::load_for_model(path);
  ASSERT_TRUE(tok.ok()) << tok.status().to_string();
  const Tokenizer& t = **tok;
  EXPECT_EQ(t.vocab_size(), 49152);
  EXPECT_EQ(t.bos_id(), 1);
  EXPECT_EQ(t.eos_id(), 2);
  EXPECT_TRUE(t.is_stop(2));  // <|im_end|>
  EXPECT_TRUE(t.is_stop(0));  // <|endoftext|>
  EXPECT_FALSE(t.adds_bos());
  ASSERT_TRUE(t.chat_template().has_value());
  EXPECT_NE(t.chat_template()->find("<|im_start|>"), std::string::npos);
  EXPECT_EQ(t.bos_token(), "<|im_start|>");
  auto ids = t.encode("<|im_start|>user\n2024", true);
  ASSERT_TRUE(ids.ok());
  EXPECT_EQ(ids->front(), 1);
  EXPECT_EQ(ids->size(), 1u + 2u + 4u);  // special, "user" "\n", four single digits
}

}  // namespace
}  // namespace vosti

#include <random>

#include "tokenizer/split_patterns.h"
#include "tokenizer/regex.h"

namespace vosti {
namespace {

// The native GPT-2 / Llama 3 / Qwen2 / digit matchers agree with Oniguruma on the corpus and on random
// strings drawn from characters of every class the patterns distinguish.
TEST(SplitPatterns, NativeMatchersAgreeWithOniguruma) {
  auto gpt2 = Regex::compile(kGpt2SplitPattern);
  auto num = Regex::compile(kNumberCharPattern);
  auto llama3 = Regex::compile(kLlama3SplitPattern);
  auto qwen2 = Regex::compile(kQwen2SplitPattern);
  ASSERT_TRUE(gpt2.ok() && num.ok() && llama3.ok() && qwen2.ok());
  auto same = [](const std::vector<RegexMatch>& a, const std::vector<RegexMatch>& b) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i) {
      if (a[i].start != b[i].start || a[i].end != b[i].end) return false;
    }
    return true;
  };
  std::vector<std::string> texts = corpus_texts(100000);
  const char32_t alphabet[] = {' ',    ' ',    ' ',          '\n',   '\t',    '\r', 0x0B,  0x0C, 0x85, 0xA0,   0x1680,
                               0x2003, 0x2028, 0x3000,       0x200B, 0x1C,    0x00, 'a',   'Z',  's',  't',    'r',
                               'e',    'v',    'l',          'm',    'd',     '\'', '\'',  '1',  '9',  0x0663, 0x2167,
                               0xBD,   0x00E9, 0x0301,       0x4E2D, 0x1F600, '.',  '!',   '_',  '-',  0x05D0, 0x01C5,
                               0x02B0, 0xFFFD, 0x10FFFF - 2, 'S',    'T',     'R',  'E',   'V',  'L',  'M',    'D',
                               0x17F,  0x212A, 0xFB06,       '\n',   '\r',    '(',  0x3002};
  std::mt19937 rng(1234);
  for (int n = 0; n < 40000; ++n) {
    std::string s;
    const int len = static_cast<int>(rng() % 24);
    for (int k = 0; k < len; ++k) append_utf8(s, alphabet[rng() % (sizeof(alphabet) / sizeof(alphabet[0]))]);
    texts.push_back(std::move(s));
  }
  int mismatches = 0;
  for (const auto& t : texts) {
    if (!same(gpt2_split_matches(t), (*gpt2)->find_all(t)) && ++mismatches <= 5) {
      ADD_FAILURE() << "gpt2 split differs for " << nlohmann::json(t).dump();
    }
    if (!same(llama3_split_matches(t, 3), (*llama3)->find_all(t)) && ++mismatches <= 5) {
      ADD_FAILURE() << "llama3 split differs for " << nlohmann::json(t).dump();
    }
    if (!same(llama3_split_matches(t, 1), (*qwen2)->find_all(t)) && ++mismatches <= 5) {
      ADD_FAILURE() << "qwen2 split differs for " << nlohmann::json(t).dump();
    }
    if (!same(number_char_matches(t), (*num)->find_all(t)) && ++mismatches <= 5) {
      ADD_FAILURE() << "\\p{N} split differs for " << nlohmann::json(t).dump();
    }
  }
  EXPECT_EQ(mismatches, 0);
}

}  // namespace
}  // namespace vosti
