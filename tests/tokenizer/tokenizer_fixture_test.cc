// Exact agreement with Hugging Face `tokenizers` on the committed corpus
// (tests/tokenizer/make_fixtures.py): ids, decodes, skip_special_tokens, random-id
// decodes and the 100 KB strings, for SmolLM2 (from its GGUF) and five tokenizer.json
// configurations built with `tokenizers`.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "io/gguf.h"
#include "tests/test_paths.h"
#include "tokenizer/tokenizer.h"

namespace vosti {
namespace {

using nlohmann::json;

const std::string kData = vosti::testing::source_dir() + "/tests/tokenizer/data/";

json load_json(const std::string& path) {
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << "missing fixture " << path;
  std::stringstream ss;
  ss << in.rdbuf();
  return json::parse(ss.str());
}

std::string from_hex(const std::string& hex) {
  std::string out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2)
    out.push_back(static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16)));
  return out;
}

std::vector<std::string> corpus_inputs(const json& corpus) {
  std::vector<std::string> out;
  for (const auto& e : corpus.at("entries")) {
    out.push_back(e.contains("text") ? e.at("text").get<std::string>() : from_hex(e.at("hex").get<std::string>()));
  }
  return out;
}

// Must match big_string() in make_fixtures.py byte for byte.
std::string big_string(const std::vector<std::string>& fragments, uint64_t seed) {
  static const char* kSeps[] = {" ", "\n", "  ", "\t"};
  std::string out;
  uint64_t state = seed;
  while (out.size() < 100000) {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    out += fragments[(state >> 33) % fragments.size()];
    out += kSeps[(state >> 20) & 3];
  }
  return out;
}

std::string fnv1a64(const std::vector<int32_t>& ids) {
  uint64_t h = 0xCBF29CE484222325ULL;
  for (int32_t id : ids) {
    const auto u = static_cast<uint32_t>(id);
    for (int k = 0; k < 4; ++k) {
      h ^= (u >> (8 * k)) & 0xFF;
      h *= 0x100000001B3ULL;
    }
  }
  char buf[17];
  std::snprintf(buf, sizeof(buf), "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

std::string show(const std::vector<int32_t>& ids) {
  std::string s;
  for (size_t i = 0; i < ids.size() && i < 40; ++i) s += std::to_string(ids[i]) + " ";
  return s;
}

void check_against_fixture(const Tokenizer& tok, const std::string& name) {
  const json corpus = load_json(kData + "corpus.json");
  const json expected = load_json(kData + name + ".expected.json");
  const auto inputs = corpus_inputs(corpus);
  ASSERT_GE(inputs.size(), 2000u);
  EXPECT_EQ(tok.vocab_size(), expected.at("vocab_size").get<int64_t>());

  int encode_mismatch = 0, decode_mismatch = 0;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const auto want = expected.at("encode").at(i).get<std::vector<int32_t>>();
    auto got = tok.encode(inputs[i], /*add_special_tokens=*/false);
    ASSERT_TRUE(got.ok()) << got.status().to_string();
    if (*got != want && ++encode_mismatch <= 5) {
      ADD_FAILURE() << name << " encode #" << i << " " << json(inputs[i]).dump() << "\n want " << show(want)
                    << "\n got  " << show(*got);
    }
    auto text = tok.decode(want, false);
    ASSERT_TRUE(text.ok()) << text.status().to_string();
    if (*text != expected.at("decode").at(i).get<std::string>() && ++decode_mismatch <= 5) {
      ADD_FAILURE() << name << " decode #" << i << " want " << expected.at("decode").at(i).dump() << " got "
                    << json(*text).dump();
    }
    const auto& skip = expected.at("decode_skip_special");
    const std::string key = std::to_string(i);
    auto skipped = tok.decode(want, true);
    ASSERT_TRUE(skipped.ok());
    const std::string want_skip =
        skip.contains(key) ? skip.at(key).get<std::string>() : expected.at("decode").at(i).get<std::string>();
    if (*skipped != want_skip && ++decode_mismatch <= 5) {
      ADD_FAILURE() << name << " decode(skip_special) #" << i << " want " << json(want_skip).dump() << " got "
                    << json(*skipped).dump();
    }
  }
  EXPECT_EQ(encode_mismatch, 0) << name << ": encode mismatches out of " << inputs.size();
  EXPECT_EQ(decode_mismatch, 0) << name << ": decode mismatches";

  const auto& with_special = expected.at("encode_special_first100");
  for (size_t i = 0; i < with_special.size(); ++i) {
    auto got = tok.encode(inputs[i], /*add_special_tokens=*/true);
    ASSERT_TRUE(got.ok());
    EXPECT_EQ(*got, with_special.at(i).get<std::vector<int32_t>>()) << name << " encode(add_special_tokens) #" << i;
  }
  int random_mismatch = 0;
  for (const auto& r : expected.at("random_decode")) {
    const auto ids = r.at(0).get<std::vector<int32_t>>();
    auto a = tok.decode(ids, false);
    auto b = tok.decode(ids, true);
    ASSERT_TRUE(a.ok() && b.ok());
    if ((*a != r.at(1).get<std::string>() || *b != r.at(2).get<std::string>()) && ++random_mismatch <= 5) {
      ADD_FAILURE() << name << " random decode " << r.at(0).dump() << " want " << r.at(1).dump() << " got "
                    << json(*a).dump();
    }
  }
  EXPECT_EQ(random_mismatch, 0);

  const auto fragments = corpus.at("big_fragments").get<std::vector<std::string>>();
  for (const auto& big : expected.at("big")) {
    const std::string s = big_string(fragments, big.at("seed").get<uint64_t>());
    ASSERT_EQ(s.size(), big.at("num_bytes").get<size_t>());
    auto got = tok.encode(s, false);
    ASSERT_TRUE(got.ok());
    EXPECT_EQ(got->size(), big.at("num_ids").get<size_t>()) << name << " 100 KB string seed " << big.at("seed");
    EXPECT_EQ(fnv1a64(*got), big.at("fnv64").get<std::string>()) << name << " 100 KB string seed " << big.at("seed");
  }
}

std::shared_ptr<const Tokenizer> load_dir(const std::string& name) {
  auto tok = Tokenizer::from_hf_dir(kData + name);
  EXPECT_TRUE(tok.ok()) << tok.status().to_string();
  return tok.ok() ? *tok : nullptr;
}

TEST(TokenizerFixture, Llama3StyleByteLevel) {
  auto tok = load_dir("bpe_llama3");
  ASSERT_NE(tok, nullptr);
  check_against_fixture(*tok, "bpe_llama3");
}

TEST(TokenizerFixture, Qwen2StyleByteLevelWithNfc) {
  auto tok = load_dir("bpe_qwen2");
  ASSERT_NE(tok, nullptr);
  check_against_fixture(*tok, "bpe_qwen2");
}

TEST(TokenizerFixture, Gpt2StyleByteLevelWithPrefixSpace) {
  auto tok = load_dir("bpe_gpt2");
  ASSERT_NE(tok, nullptr);
  check_against_fixture(*tok, "bpe_gpt2");
}

TEST(TokenizerFixture, SentencePieceMetaspaceByteFallback) {
  auto tok = load_dir("spm_metaspace");
  ASSERT_NE(tok, nullptr);
  check_against_fixture(*tok, "spm_metaspace");
}

TEST(TokenizerFixture, SentencePieceLegacyNormalizer) {
  auto tok = load_dir("spm_legacy");
  ASSERT_NE(tok, nullptr);
  check_against_fixture(*tok, "spm_legacy");
}

TEST(TokenizerFixture, SmolLM2FromGguf) {
  const char* path = std::getenv("VOSTI_DEFAULT_MODEL");
  if (path == nullptr || !std::filesystem::exists(path)) {
    GTEST_SKIP() << "VOSTI_DEFAULT_MODEL is unset or missing; run scripts/fetch-model and scripts/test";
  }
  auto gguf = GgufFile::open(path);
  ASSERT_TRUE(gguf.ok()) << gguf.status().to_string();
  auto tok = Tokenizer::from_gguf(*gguf);
  ASSERT_TRUE(tok.ok()) << tok.status().to_string();
  check_against_fixture(**tok, "smollm2");
}

}  // namespace
}  // namespace vosti

namespace vosti {
namespace {

// SentencePiece BPE from a llama.cpp-style GGUF without merges: merges derived from scores.
TEST(TokenizerFixture, SentencePieceFromGgufScores) {
  auto gguf = GgufFile::open(kData + "spm_gguf/tokenizer.gguf");
  ASSERT_TRUE(gguf.ok()) << gguf.status().to_string();
  auto tok = Tokenizer::from_gguf(*gguf);
  ASSERT_TRUE(tok.ok()) << tok.status().to_string();
  EXPECT_TRUE((*tok)->adds_bos());
  check_against_fixture(**tok, "spm_gguf");
}

}  // namespace
}  // namespace vosti
