// Structured outputs in the engine (RequestSpec::structured), on the default model (skipped when
// VOSTI_DEFAULT_MODEL is not set): JSON-schema outputs parse and keep the schema's constraints,
// regex and choice outputs match, a constrained request gives the same tokens and digests alone
// as in a crowd of 64 mixed requests (chunked prefill, prefix-cache hits), under preemption and
// with speculative drafts; a constrained row's digest hashes the masked row; a grammar with no
// first token is refused. (tests/python/test_structured.py validates with the jsonschema package.)
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <regex>

#include "engine/engine.h"
#include "model/model.h"
#include "runner/device_model.h"
#include "sample/logits_digest.h"
#include "tokenizer/tokenizer.h"

namespace vosti {
namespace {

struct Served {
  std::shared_ptr<const Model> model;
  std::shared_ptr<const Tokenizer> tokenizer;
};

// The default model and its tokenizer, or null ones when VOSTI_DEFAULT_MODEL is not set.
const Served& served() {
  static const Served s = [] {
    Served out;
    const char* path = std::getenv("VOSTI_DEFAULT_MODEL");
    if (path == nullptr || *path == '\0') return out;
    auto m = Model::load(path);
    auto t = Tokenizer::load_for_model(path);
    EXPECT_TRUE(m.ok() && t.ok());
    if (m.ok() && t.ok()) out = {*m, *t};
    return out;
  }();
  return s;
}

#define REQUIRE_DEFAULT_MODEL() \
  if (!served().model) GTEST_SKIP() << "VOSTI_DEFAULT_MODEL is not set"

EngineConfig config() {
  EngineConfig c;
  c.num_blocks = 2048;
  c.max_model_len = 128;
  c.block_size = 4;  // small blocks: the tiny cache below preempts, drafts cross block boundaries
  c.num_threads = 2;
  c.max_num_seqs = 64;
  c.max_num_batched_tokens = 256;
  c.check_invariants = true;
  return c;
}

struct Record {
  std::vector<int32_t> tokens;
  std::vector<LogitsDigest> digests;
  std::vector<std::vector<float>> logits;
  std::string text;
  FinishReason finish = FinishReason::kNone;
  std::string error;
};

struct Outcome {
  std::vector<Record> records;
  EngineStats stats;
};

Outcome run_with_stats(const std::vector<RequestSpec>& specs, const EngineConfig& c) {
  auto engine = Engine::create(served().model, c, served().tokenizer);
  EXPECT_TRUE(engine.ok()) << engine.status().to_string();
  Outcome outcome;
  std::vector<Record>& out = outcome.records;
  out.resize(specs.size());
  for (size_t i = 0; i < specs.size(); ++i) {
    Record& rec = out[i];
    auto id = (*engine)->add_request(specs[i], [&rec](const RequestOutput& o) {
      rec.tokens.insert(rec.tokens.end(), o.new_tokens.begin(), o.new_tokens.end());
      rec.digests.insert(rec.digests.end(), o.new_digests.begin(), o.new_digests.end());
      rec.logits.insert(rec.logits.end(), o.new_logits.begin(), o.new_logits.end());
      rec.text += o.new_text;
      if (o.finished) {
        rec.finish = o.finish_reason;
        rec.error = o.error;
      }
    });
    EXPECT_TRUE(id.ok()) << id.status().to_string();
  }
  while ((*engine)->step()) {
  }
  outcome.stats = (*engine)->stats();
  return outcome;
}

std::vector<Record> run(const std::vector<RequestSpec>& specs, const EngineConfig& c) {
  return run_with_stats(specs, c).records;
}

RequestSpec spec(const std::string& prompt, std::optional<StructuredOutputs> so, float temperature, uint64_t seed,
                 int32_t max_tokens = 96) {
  RequestSpec s;
  s.prompt = *served().tokenizer->encode(prompt);
  s.sampling.temperature = temperature;
  s.sampling.seed = seed;
  s.max_tokens = max_tokens;
  s.logits_digests = true;
  s.structured = std::move(so);
  return s;
}

StructuredOutputs schema(const std::string& text) { return {StructuredKind::kJsonSchema, text, {}}; }

const char* const kPrompt = "Here is one record as JSON: ";

// Each schema with a check of what the JSON it allows must satisfy beyond parsing.
struct SchemaCase {
  const char* schema;
  std::function<bool(const nlohmann::json&)> ok;
};

std::vector<SchemaCase> schema_cases() {
  using J = nlohmann::json;
  return {
      {R"({"type":"object","properties":{"name":{"type":"string","maxLength":12},
          "address":{"type":"object","properties":{"city":{"type":"string","maxLength":10},"zip":{"type":"integer"}},
          "required":["city","zip"]}},"required":["name","address"]})",
       [](const J& j) {
         return j.is_object() && j.size() == 2 && j["name"].is_string() && j["name"].get<std::string>().size() <= 12 &&
                j["address"].is_object() && j["address"]["zip"].is_number_integer() && j["address"]["city"].is_string();
       }},
      {R"({"type":"object","properties":{"color":{"enum":["red","green","blue"]}},"required":["color"]})",
       [](const J& j) {
         return j.is_object() && (j["color"] == "red" || j["color"] == "green" || j["color"] == "blue");
       }},
      {R"({"type":"array","items":{"type":"integer","minimum":0,"maximum":9},"minItems":2,"maxItems":4})",
       [](const J& j) {
         if (!j.is_array() || j.size() < 2 || j.size() > 4) return false;
         for (const J& x : j)
           if (!x.is_number_integer() || x.get<int64_t>() < 0 || x.get<int64_t>() > 9) return false;
         return true;
       }},
      {R"({"anyOf":[{"type":"integer","minimum":0,"maximum":1000},
          {"type":"object","properties":{"k":{"type":"boolean"}},"required":["k"]}]})",
       [](const J& j) {
         return (j.is_number_integer() && j.get<int64_t>() >= 0 && j.get<int64_t>() <= 1000) ||
                (j.is_object() && j.size() == 1 && j["k"].is_boolean());
       }},
      {R"({"type":"object","properties":{"age":{"type":"integer","minimum":18,"maximum":99}},"required":["age"]})",
       [](const J& j) {
         return j.is_object() && j["age"].is_number_integer() && j["age"].get<int64_t>() >= 18 &&
                j["age"].get<int64_t>() <= 99;
       }},
      {R"({"type":"object","properties":{"id":{"type":"string","pattern":"^[A-Z]{3}-[0-9]{2}$"}},"required":["id"]})",
       [](const J& j) {
         return j.is_object() && j["id"].is_string() &&
                std::regex_match(j["id"].get<std::string>(), std::regex("[A-Z]{3}-[0-9]{2}"));
       }},
  };
}

TEST(StructuredEngine, JsonSchemaOutputsParseAndKeepTheSchemasConstraints) {
  REQUIRE_DEFAULT_MODEL();
  std::vector<RequestSpec> specs;
  const std::vector<SchemaCase> cases = schema_cases();
  for (const SchemaCase& c : cases) {
    specs.push_back(spec(kPrompt, schema(c.schema), 0.0f, 1));
    specs.push_back(spec(kPrompt, schema(c.schema), 0.8f, 7));
  }
  const std::vector<Record> out = run(specs, config());
  for (size_t i = 0; i < out.size(); ++i) {
    SCOPED_TRACE(cases[i / 2].schema);
    EXPECT_EQ(out[i].finish, FinishReason::kStop) << out[i].text << " " << out[i].error;
    const nlohmann::json j = nlohmann::json::parse(out[i].text, nullptr, false);
    ASSERT_FALSE(j.is_discarded()) << out[i].text;
    EXPECT_TRUE(cases[i / 2].ok(j)) << out[i].text;
  }
}

TEST(StructuredEngine, RegexChoiceJsonObjectAndGrammarOutputsMatch) {
  REQUIRE_DEFAULT_MODEL();
  const std::vector<RequestSpec> specs = {
      spec("The date is ", StructuredOutputs{StructuredKind::kRegex, "[0-9]{4}-[0-9]{2}-[0-9]{2}", {}}, 0.0f, 1),
      spec("The date is ", StructuredOutputs{StructuredKind::kRegex, "[0-9]{4}-[0-9]{2}-[0-9]{2}", {}}, 1.0f, 3),
      spec("Is the sky blue? ", StructuredOutputs{StructuredKind::kChoice, "", {"yes", "no", "maybe \"so\""}}, 0.0f, 1),
      spec("Is the sky blue? ", StructuredOutputs{StructuredKind::kChoice, "", {"yes", "no", "maybe \"so\""}}, 1.0f, 5),
      spec(kPrompt, StructuredOutputs{StructuredKind::kJsonObject, "", {}}, 0.0f, 1, 110),
      spec("Say hi: ",
           StructuredOutputs{StructuredKind::kGrammar,
                             R"(root ::= "hi" (" " name)? "!"
name ::= [a-z] [a-z]? [a-z]? [a-z]?)",
                             {}},
           0.7f, 2),
  };
  const std::vector<Record> out = run(specs, config());
  for (const Record& r : out) EXPECT_EQ(r.finish, FinishReason::kStop) << r.text << " " << r.error;
  EXPECT_TRUE(std::regex_match(out[0].text, std::regex("[0-9]{4}-[0-9]{2}-[0-9]{2}"))) << out[0].text;
  EXPECT_TRUE(std::regex_match(out[1].text, std::regex("[0-9]{4}-[0-9]{2}-[0-9]{2}"))) << out[1].text;
  for (const Record& r : {out[2], out[3]})
    EXPECT_TRUE(r.text == "yes" || r.text == "no" || r.text == "maybe \"so\"") << r.text;
  const nlohmann::json j = nlohmann::json::parse(out[4].text, nullptr, false);
  EXPECT_TRUE(!j.is_discarded()) << out[4].text;
  EXPECT_TRUE(std::regex_match(out[5].text, std::regex("hi( [a-z]{1,4})?!"))) << out[5].text;
}

// The mask is applied to the row the digest and the logits report: disallowed tokens at -inf.
TEST(StructuredEngine, AConstrainedRowsDigestHashesTheMaskedRow) {
  REQUIRE_DEFAULT_MODEL();
  RequestSpec s = spec("Is the sky blue? ", StructuredOutputs{StructuredKind::kChoice, "", {"yes", "no"}}, 0.0f, 1);
  s.return_logits = true;
  RequestSpec plain = s;
  plain.structured.reset();
  plain.max_tokens = 1;
  const std::vector<Record> out = run({s, plain}, config());
  ASSERT_FALSE(out[0].logits.empty());
  ASSERT_EQ(out[0].logits.size(), out[0].digests.size());
  for (size_t i = 0; i < out[0].logits.size(); ++i) EXPECT_EQ(logits_digest(out[0].logits[i]), out[0].digests[i]);
  const std::vector<float>& masked = out[0].logits[0];
  const std::vector<float>& raw = out[1].logits[0];
  ASSERT_EQ(masked.size(), raw.size());
  int64_t finite = 0;
  for (size_t t = 0; t < masked.size(); ++t) {
    if (std::isinf(masked[t])) continue;
    ++finite;
    EXPECT_EQ(masked[t], raw[t]);  // allowed tokens keep the model's logit, bit for bit
  }
  EXPECT_GT(finite, 0);
  EXPECT_LT(finite, static_cast<int64_t>(masked.size()) / 100);
  EXPECT_NE(out[0].digests[0], out[1].digests[0]);
}

// 64 mixed requests: constrained (every kind) and plain, sampled and greedy, sharing a long
// prompt prefix (prefix-cache hits) under a small token budget (chunked prefill, prefill mixed
// with decodes), the crowd's grammars advanced on a thread pool. Each equals itself run alone (on
// the step thread), tokens and digests.
TEST(StructuredEngine, AConstrainedRequestInACrowdOf64EqualsItselfAlone) {
  REQUIRE_DEFAULT_MODEL();
  const std::string shared = "You are a careful assistant. Answer in the format asked, with nothing else. ";
  std::vector<RequestSpec> crowd;
  const std::vector<SchemaCase> cases = schema_cases();
  for (int i = 0; i < 64; ++i) {
    const std::string prompt = shared + "Request " + std::to_string(i) + ": ";
    std::optional<StructuredOutputs> so;
    switch (i % 4) {
      case 0:
        so = schema(cases[static_cast<size_t>(i / 4) % cases.size()].schema);
        break;
      case 1:
        so = StructuredOutputs{StructuredKind::kRegex, "[a-z]{2,6}( [a-z]{2,6}){0,3}\\.", {}};
        break;
      case 2:
        so = StructuredOutputs{StructuredKind::kChoice, "", {"alpha", "beta", "gamma delta"}};
        break;
      default:
        break;  // unconstrained
    }
    crowd.push_back(spec(prompt, so, i % 3 == 0 ? 0.0f : 0.9f, 100 + static_cast<uint64_t>(i), 24 + i % 17));
  }
  EngineConfig busy = config();
  busy.max_num_batched_tokens = 61;
  busy.structured_output_threads = 3;  // the step's grammars advance on a pool (>= 16 of them a step)
  const Outcome crowded = run_with_stats(crowd, busy);
  const std::vector<Record>& together = crowded.records;
  EXPECT_GT(crowded.stats.num_prefix_hits, 0);  // the shared prefix was served from the cache
  for (const size_t i : {0u, 1u, 2u, 4u, 13u, 40u, 63u}) {
    SCOPED_TRACE(i);
    const std::vector<Record> alone = run({crowd[i]}, config());
    EXPECT_EQ(alone[0].tokens, together[i].tokens);
    EXPECT_EQ(alone[0].digests, together[i].digests);
    EXPECT_EQ(alone[0].finish, together[i].finish);
  }
}

// A cache too small for the crowd preempts requests and recomputes them; speculative drafts
// verify several masked rows at once: both give the tokens and digests of the plain run.
TEST(StructuredEngine, PreemptionAndSpeculativeDraftsKeepTokensAndDigests) {
  REQUIRE_DEFAULT_MODEL();
  std::vector<RequestSpec> specs;
  for (int i = 0; i < 8; ++i) {
    std::optional<StructuredOutputs> so =
        i % 2 == 0 ? std::optional<StructuredOutputs>(schema(schema_cases()[static_cast<size_t>(i / 2)].schema))
                   : std::optional<StructuredOutputs>(StructuredOutputs{StructuredKind::kJsonObject, "", {}});
    // Examples in the prompt give the n-gram drafter something the outputs repeat.
    specs.push_back(spec("Records: {\"color\": \"red\"}, {\"age\": 30}, [1, 2, 3], {\"id\": \"ABC-12\"}. Record " +
                             std::to_string(i) + " as JSON: ",
                         so, i % 3 == 0 ? 0.0f : 0.8f, static_cast<uint64_t>(i), 64));
  }
  std::vector<Record> reference;
  for (const RequestSpec& s : specs) reference.push_back(run({s}, config())[0]);
  EngineConfig tiny = config();
  tiny.num_blocks = 32;  // 128 tokens for 8 requests of ~40 to ~100
  tiny.max_num_batched_tokens = 32;
  EngineConfig speculative = config();
  speculative.speculative_config = R"({"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_max": 3})";
  for (const EngineConfig& c : {tiny, speculative}) {
    const Outcome outcome = run_with_stats(specs, c);
    const std::vector<Record>& out = outcome.records;
    if (c.speculative_config.empty()) {
      EXPECT_GT(outcome.stats.num_preemptions, 0);
    } else {
      EXPECT_GT(outcome.stats.num_draft_tokens, 0);
      EXPECT_GT(outcome.stats.num_accepted_tokens, 0);
    }
    for (size_t i = 0; i < specs.size(); ++i) {
      SCOPED_TRACE(i);
      EXPECT_EQ(out[i].tokens, reference[i].tokens);
      EXPECT_EQ(out[i].digests, reference[i].digests);
      EXPECT_EQ(out[i].finish, reference[i].finish);
    }
  }
}

TEST(StructuredEngine, BadGrammarsAreRefusedAtAdmissionNamingTheProblem) {
  REQUIRE_DEFAULT_MODEL();
  auto engine = Engine::create(served().model, config(), served().tokenizer);
  ASSERT_TRUE(engine.ok());
  const std::pair<StructuredOutputs, const char*> bad[] = {
      {schema("{\"type\": 12}"), "json"},
      {StructuredOutputs{StructuredKind::kRegex, "[a-", {}}, "regex"},
      {StructuredOutputs{StructuredKind::kGrammar, "root ::= nothing_here", {}}, "grammar"},
      {StructuredOutputs{StructuredKind::kChoice, "", {}}, "choice"},
  };
  for (const auto& [so, word] : bad) {
    auto id = (*engine)->add_request(spec("x", so, 0.0f, 1), nullptr);
    ASSERT_FALSE(id.ok()) << word;
    EXPECT_EQ(id.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(id.status().message().find(word), std::string::npos) << id.status().message();
  }
  // An engine without a tokenizer cannot map tokens to text: refused, named.
  auto bare = Engine::create(served().model, config());
  ASSERT_TRUE(bare.ok());
  RequestSpec s = spec("x", StructuredOutputs{StructuredKind::kJsonObject, "", {}}, 0.0f, 1);
  auto id = (*bare)->add_request(s, nullptr);
  ASSERT_FALSE(id.ok());
  EXPECT_NE(id.status().message().find("tokenizer"), std::string::npos);
}

}  // namespace
}  // namespace vosti
