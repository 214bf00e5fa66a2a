// Grammars for structured outputs (structured/grammar.h) over real vocabularies: a byte-level BPE
// (tests/tokenizer/data/bpe_gpt2) and a SentencePiece byte-fallback one (spm_gguf): the masks allow
// exactly the tokens that continue the grammar, accept/rollback keep the mask a function of the
// accepted tokens, compiled grammars are cached per distinct spec, and bad input is
// INVALID_ARGUMENT naming the problem.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "io/gguf.h"
#include "sample/token_bitmask.h"
#include "structured/grammar.h"
#include "tests/test_paths.h"
#include "tokenizer/tokenizer.h"

namespace vosti {
namespace {

const std::string kData = vosti::testing::source_dir() + "/tests/tokenizer/data";

std::shared_ptr<const Tokenizer> gpt2() {
  static auto t = Tokenizer::from_hf_dir(kData + "/bpe_gpt2");
  EXPECT_TRUE(t.ok()) << t.status().to_string();
  return *t;
}

std::shared_ptr<const Tokenizer> spm() {
  static std::shared_ptr<const Tokenizer> tok = [] {
    auto gguf = GgufFile::open(kData + "/spm_gguf/tokenizer.gguf");
    EXPECT_TRUE(gguf.ok()) << gguf.status().to_string();
    auto t = Tokenizer::from_gguf(*gguf);
    EXPECT_TRUE(t.ok()) << t.status().to_string();
    return *t;
  }();
  return tok;
}

std::vector<int32_t> stop_ids(const Tokenizer& t) {
  std::vector<int32_t> ids = t.stop_ids();
  if (t.eos_id()) ids.push_back(*t.eos_id());
  return ids;
}

StructuredOutputs choice(std::vector<std::string> c) { return StructuredOutputs{StructuredKind::kChoice, "", c}; }

std::vector<int32_t> allowed_ids(const std::vector<uint32_t>& mask, int64_t vocab) {
  std::vector<int32_t> ids;
  for (int32_t t = 0; t < vocab; ++t)
    if (token_allowed(mask.data(), t)) ids.push_back(t);
  return ids;
}

// Spells `text` through the grammar: at each step the allowed token whose text is the longest
// prefix of what is left (every step must find one). Returns the ids accepted.
std::vector<int32_t> spell(GrammarState& state, const Tokenizer& tok, int64_t vocab, std::string text) {
  std::vector<uint32_t> mask(static_cast<size_t>(state.mask_words()));
  std::vector<int32_t> ids;
  while (!text.empty()) {
    state.fill_next_mask(mask);
    int32_t best = -1;
    size_t best_len = 0;
    for (const int32_t id : allowed_ids(mask, vocab)) {
      const std::string piece = tok.decode_lenient(std::vector<int32_t>{id});
      if (piece.size() > best_len && text.starts_with(piece)) {
        best = id;
        best_len = piece.size();
      }
    }
    EXPECT_GE(best, 0) << tok.source() << ": no allowed token spells the start of '" << text << "'";
    if (best < 0) break;
    EXPECT_TRUE(state.accept(best));
    ids.push_back(best);
    text = text.substr(best_len);
  }
  return ids;
}

TEST(StructuredOutputs, ChoiceGrammarEscapesQuotesBackslashesAndControls) {
  EXPECT_EQ(choice({"a\"b", "c\\d", "e\nf"}).choice_grammar(), R"(root ::= "a\"b" | "c\\d" | "e\nf")");
  EXPECT_NE(choice({"a"}).cache_key(), choice({"b"}).cache_key());
  EXPECT_NE((StructuredOutputs{StructuredKind::kRegex, "a", {}}).cache_key(),
            (StructuredOutputs{StructuredKind::kGrammar, "a", {}}).cache_key());
  EXPECT_FALSE(choice({}).validate().ok());
  EXPECT_FALSE(choice({""}).validate().ok());
  EXPECT_FALSE((StructuredOutputs{StructuredKind::kJsonSchema, "", {}}).validate().ok());
}

// Keywords xgrammar would silently ignore are refused, naming the keyword and where it is;
// property names that happen to be keywords, and supported formats, are fine.
TEST(StructuredOutputs, UnsupportedSchemaKeywordsAreRefusedNamingThem) {
  const std::pair<std::string, const char*> bad[] = {
      {R"({"type":"array","uniqueItems":true})", "'uniqueItems' (at /)"},
      {R"({"type":"object","properties":{"a":{"not":{"type":"string"}}}})", "'not' (at /properties/a)"},
      {R"({"anyOf":[{"type":"string","format":"credit-card"}]})", "format 'credit-card' (at /anyOf/0)"},
      {R"({"if":{"type":"string"},"then":{"maxLength":3}})", "'if'"},
      {R"({"type":"number","multipleOf":0.5})", "multipleOf"},
      {R"([1, 2])", "must be an object"},
      {R"({"type":)", "not valid JSON"},
      {std::string(100000, '[') + std::string(100000, ']'), "deeper than 64"},
  };
  for (const auto& [schema, words] : bad) {
    const Status s = check_json_schema(schema);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << schema;
    EXPECT_NE(s.message().find(words), std::string::npos) << s.message();
  }
  EXPECT_TRUE(check_json_schema(R"({"type":"object","properties":{"not":{"type":"string","format":"date-time"},
      "if":{"enum":["not","if"]}},"$defs":{"then":{"type":"integer","multipleOf":3}}})")
                  .ok());
  EXPECT_TRUE(check_json_schema("true").ok());
}

// Walks "yes" + a stop token through the grammar of choice [yes, no] on both vocabulary types:
// every token of the text is allowed where it comes, the first mask allows only tokens that
// begin "yes" or "no", and the stop token ends the grammar.
TEST(GrammarState, ChoiceMasksFollowTheTextOnByteLevelAndByteFallbackVocabularies) {
  for (const auto& tok : {gpt2(), spm()}) {
    const int64_t vocab = tok->vocab_size() + 7;  // padded ids past the tokenizer's are never allowed
    auto cache = GrammarCache::create(*tok, vocab, stop_ids(*tok));
    ASSERT_TRUE(cache.ok()) << cache.status().to_string();
    auto grammar = (*cache)->compile(choice({"yes", "no"}));
    ASSERT_TRUE(grammar.ok()) << grammar.status().to_string();
    GrammarState state(*grammar);
    std::vector<uint32_t> mask(static_cast<size_t>(state.mask_words()));
    state.fill_next_mask(mask);
    const std::vector<int32_t> first = allowed_ids(mask, vocab);
    ASSERT_FALSE(first.empty()) << tok->source();
    for (const int32_t id : first) {
      const std::string text = tok->decode_lenient(std::vector<int32_t>{id});
      EXPECT_TRUE(std::string("yes").starts_with(text) || std::string("no").starts_with(text))
          << tok->source() << ": token " << id << " '" << text << "'";
    }
    for (int64_t id = tok->vocab_size(); id < vocab; ++id) EXPECT_FALSE(token_allowed(mask.data(), id));
    spell(state, *tok, vocab, "yes");
    EXPECT_TRUE(state.completed());
    EXPECT_FALSE(state.terminated());
    state.fill_next_mask(mask);
    const std::vector<int32_t> stops = stop_ids(*tok);
    ASSERT_FALSE(stops.empty());
    EXPECT_TRUE(token_allowed(mask.data(), stops[0]));
    EXPECT_TRUE(state.accept(stops[0]));
    EXPECT_TRUE(state.terminated());
  }
}

TEST(GrammarState, RollbackRestoresTheMaskOfTheAcceptedTokens) {
  auto tok = gpt2();
  auto cache = GrammarCache::create(*tok, tok->vocab_size(), stop_ids(*tok));
  ASSERT_TRUE(cache.ok());
  auto grammar = (*cache)->compile({StructuredKind::kJsonObject, "", {}});
  ASSERT_TRUE(grammar.ok()) << grammar.status().to_string();
  GrammarState state(*grammar);
  const size_t words = static_cast<size_t>(state.mask_words());
  std::vector<uint32_t> start(words), after(words), again(words);
  state.fill_next_mask(start);
  const std::vector<int32_t> ids = spell(state, *tok, tok->vocab_size(), "{\"a\": [1, 2");
  ASSERT_GE(ids.size(), 4u);
  state.fill_next_mask(after);
  EXPECT_NE(after, start);
  state.rollback(static_cast<int32_t>(ids.size()));
  state.fill_next_mask(again);
  EXPECT_EQ(again, start);
  for (const int32_t id : ids) ASSERT_TRUE(state.accept(id));
  state.fill_next_mask(again);
  EXPECT_EQ(again, after);
  // A token the grammar does not allow is refused and changes nothing.
  const std::optional<int32_t> close = tok->piece_to_id("}");
  ASSERT_TRUE(close.has_value());
  EXPECT_FALSE(token_allowed(after.data(), *close));
  EXPECT_FALSE(state.accept(*close));
  state.fill_next_mask(again);
  EXPECT_EQ(again, after);
}

TEST(GrammarCache, CompilesOncePerDistinctSpecAndEvictsTheLeastRecentlyUsed) {
  auto tok = gpt2();
  auto cache = GrammarCache::create(*tok, tok->vocab_size(), stop_ids(*tok), /*capacity=*/2);
  ASSERT_TRUE(cache.ok());
  GrammarCache& c = **cache;
  auto a1 = c.compile(choice({"a"}));
  auto a2 = c.compile(choice({"a"}));
  ASSERT_TRUE(a1.ok() && a2.ok());
  EXPECT_EQ(a1->get(), a2->get());
  EXPECT_EQ(c.num_compiled(), 1);
  ASSERT_TRUE(c.compile(choice({"b"})).ok());
  ASSERT_TRUE(c.compile(choice({"a"})).ok());  // a is now the most recent
  ASSERT_TRUE(c.compile(choice({"c"})).ok());  // evicts b
  EXPECT_EQ(c.num_compiled(), 3);
  EXPECT_EQ(c.size(), 2u);
  ASSERT_TRUE(c.compile(choice({"a"})).ok());
  EXPECT_EQ(c.num_compiled(), 3);
  ASSERT_TRUE(c.compile(choice({"b"})).ok());
  EXPECT_EQ(c.num_compiled(), 4);
}

// A plain (non-special) added token decodes as its content, so a grammar may use it where that text
// fits (Qwen's <tool_call>, 'naïve' in the fixture, byte-level); special ones never.
TEST(GrammarCache, PlainAddedTokensAreTheirTextSpecialOnesNever) {
  auto tok = Tokenizer::from_hf_dir(kData + "/bpe_qwen2");
  ASSERT_TRUE(tok.ok()) << tok.status().to_string();
  auto cache = GrammarCache::create(**tok, (*tok)->vocab_size(), stop_ids(**tok));
  ASSERT_TRUE(cache.ok()) << cache.status().to_string();
  const auto first_allowed = [&](const StructuredOutputs& spec, const std::string& piece) {
    auto started = start_grammar(**cache, spec);
    EXPECT_TRUE(started.ok()) << started.status().to_string();
    const std::optional<int32_t> id = (*tok)->piece_to_id(piece);
    EXPECT_TRUE(id.has_value()) << piece;
    return started.ok() && id && token_allowed(started->first_mask.data(), *id);
  };
  EXPECT_TRUE(first_allowed(choice({"<tool_call>x"}), "<tool_call>"));
  EXPECT_TRUE(first_allowed(choice({"naïve"}), "naïve"));
  EXPECT_FALSE(first_allowed(choice({"<|im_start|>x"}), "<|im_start|>"));  // special
  EXPECT_FALSE(first_allowed(choice({"<tool_call>x"}), "<|im_start|>"));
  // Spelt through the grammar, the added token's text is the output's.
  auto started = start_grammar(**cache, choice({"<tool_call>x"}));
  ASSERT_TRUE(started.ok());
  EXPECT_TRUE(started->state->accept(*(*tok)->piece_to_id("<tool_call>")));
  const std::vector<int32_t> rest = spell(*started->state, **tok, (*tok)->vocab_size(), "x");
  EXPECT_EQ(rest.size(), 1u);
  EXPECT_TRUE(started->state->completed());
}

TEST(GrammarCache, BadSchemasRegexesAndGrammarsAreInvalidArgument) {
  auto tok = gpt2();
  auto cache = GrammarCache::create(*tok, tok->vocab_size(), stop_ids(*tok));
  ASSERT_TRUE(cache.ok());
  const StructuredOutputs bad[] = {
      {StructuredKind::kJsonSchema, "{not json", {}},
      {StructuredKind::kJsonSchema, R"({"type": "no-such-type"})", {}},
      {StructuredKind::kRegex, "a(b", {}},
      {StructuredKind::kGrammar, "root ::= undefined_rule", {}},
      {StructuredKind::kGrammar, "root ::= \"a", {}},
  };
  for (const StructuredOutputs& s : bad) {
    auto g = (*cache)->compile(s);
    ASSERT_FALSE(g.ok()) << s.text;
    EXPECT_EQ(g.status().code(), StatusCode::kInvalidArgument) << s.text;
    EXPECT_NE(g.status().message().find(structured_kind_name(s.kind)), std::string::npos) << g.status().message();
  }
  EXPECT_EQ((*cache)->size(), 0u);
}

}  // namespace
}  // namespace vosti
