// Speculative decoding (engine/speculative.h): the config's errors, the n-gram drafter, and the
// promise: with speculation every token, logprob, top logprob, digest and logits row equals the
// run without it, greedy and seeded, whether drafts are always right (a drafter replaying the
// reference), always wrong, or n-gram; stops and max_tokens inside an accepted run end the
// request where it ends without speculation; aborts and finishes leave no KV block behind.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <map>

#include "engine/engine.h"
#include "engine/replay_drafter.h"
#include "engine/speculative.h"
#include "model/model.h"
#include "runner/device_model.h"
#include "runner/load_device_model.h"
#include "tests/test_paths.h"

namespace vosti {
namespace {

const std::string kModels = vosti::testing::source_dir() + "/tests/golden/models";

std::shared_ptr<const Model> load(const std::string& name) {
  static std::map<std::string, std::shared_ptr<const Model>> cache;
  auto& m = cache[name];
  if (!m) {
    auto model = Model::load(kModels + "/" + name);
    EXPECT_TRUE(model.ok()) << model.status().to_string();
    m = *model;
  }
  return m;
}

std::string ngram(int k, int min_n = 1, int max_n = 3) {
  return R"({"method": "ngram", "num_speculative_tokens": )" + std::to_string(k) + R"(, "prompt_lookup_min": )" +
         std::to_string(min_n) + R"(, "prompt_lookup_max": )" + std::to_string(max_n) + "}";
}

// What one request produced.
struct Record {
  std::vector<int32_t> tokens;
  std::vector<ScoredToken> logprobs;
  std::vector<LogitsDigest> digests;
  std::vector<std::vector<float>> logits;
  FinishReason finish = FinishReason::kNone;
  std::string error;
  int num_outputs = 0;
};

struct Outcome {
  std::vector<Record> records;
  EngineStats stats;
  int64_t max_window_blocks_used = 0;  // window-local KV: the window pool's peak after a step
};

EngineConfig base_config() {
  EngineConfig c;
  c.num_blocks = 48;
  c.max_model_len = 160;
  c.block_size = 4;  // small blocks: drafts cross block boundaries, roll-backs free blocks
  c.num_threads = 2;
  c.max_num_batched_tokens = 61;
  c.check_invariants = true;
  return c;
}

// Runs the specs together in one engine; `abort_after` > 0 aborts every request after that many steps.
Outcome run(const std::string& model, const std::vector<RequestSpec>& specs, const EngineConfig& config,
            std::shared_ptr<const Drafter> drafter = nullptr, int abort_after = 0) {
  auto engine = Engine::create(cpu_device_model(load(model)), config, nullptr, std::move(drafter));
  EXPECT_TRUE(engine.ok()) << engine.status().to_string();
  Outcome out;
  out.records.resize(specs.size());
  std::vector<RequestId> ids;
  for (size_t i = 0; i < specs.size(); ++i) {
    Record& rec = out.records[i];
    auto id = (*engine)->add_request(specs[i], [&rec](const RequestOutput& o) {
      ++rec.num_outputs;
      for (size_t k = 0; k < o.new_tokens.size(); ++k) {
        rec.tokens.push_back(o.new_tokens[k]);
        rec.logprobs.push_back(o.new_logprobs[k]);
        if (!o.new_digests.empty()) rec.digests.push_back(o.new_digests[k]);
        if (!o.new_logits.empty()) rec.logits.push_back(o.new_logits[k]);
      }
      if (o.finished) {
        rec.finish = o.finish_reason;
        rec.error = o.error;
      }
    });
    EXPECT_TRUE(id.ok()) << id.status().to_string();
    ids.push_back(*id);
  }
  for (int step = 0; step < 100000 && (*engine)->has_work(); ++step) {
    if (abort_after > 0 && step == abort_after)
      for (RequestId id : ids) (*engine)->abort(id);
    (*engine)->step();
    out.max_window_blocks_used = std::max(out.max_window_blocks_used, (*engine)->stats().num_window_blocks_used);
  }
  out.stats = (*engine)->stats();
  EXPECT_EQ(out.stats.num_blocks_used, 0) << "a finished or aborted request left KV blocks behind";
  EXPECT_EQ(out.stats.num_window_blocks_used, 0) << "a finished or aborted request left window KV blocks behind";
  return out;
}

void expect_same(const Outcome& want, const Outcome& got, const std::string& what) {
  ASSERT_EQ(want.records.size(), got.records.size());
  for (size_t r = 0; r < want.records.size(); ++r) {
    const Record& a = want.records[r];
    const Record& b = got.records[r];
    EXPECT_TRUE(b.error.empty()) << what << ": " << b.error;
    EXPECT_EQ(a.tokens, b.tokens) << what << ", request " << r;
    EXPECT_EQ(a.finish, b.finish) << what << ", request " << r;
    EXPECT_EQ(a.digests, b.digests) << what << ", request " << r;
    ASSERT_EQ(a.logprobs.size(), b.logprobs.size()) << what << ", request " << r;
    for (size_t p = 0; p < a.logprobs.size(); ++p) {
      EXPECT_EQ(std::memcmp(&a.logprobs[p].logprob, &b.logprobs[p].logprob, sizeof(float)), 0)
          << what << ", request " << r << ", position " << p;
      ASSERT_EQ(a.logprobs[p].top.size(), b.logprobs[p].top.size());
      for (size_t t = 0; t < a.logprobs[p].top.size(); ++t) {
        EXPECT_EQ(a.logprobs[p].top[t].token, b.logprobs[p].top[t].token);
        EXPECT_EQ(std::memcmp(&a.logprobs[p].top[t].logprob, &b.logprobs[p].top[t].logprob, sizeof(float)), 0);
      }
    }
    ASSERT_EQ(a.logits.size(), b.logits.size()) << what << ", request " << r;
    for (size_t p = 0; p < a.logits.size(); ++p)
      EXPECT_EQ(std::memcmp(a.logits[p].data(), b.logits[p].data(), a.logits[p].size() * sizeof(float)), 0)
          << what << ", request " << r << ", position " << p << ": logits differ";
  }
}

// Greedy and seeded (T = 0.8, top_p 0.9) requests with logprobs, digests and logits: random
// prompts, a prompt that repeats a pattern (n-gram drafts from the prompt), a short one.
std::vector<RequestSpec> request_set(int32_t max_tokens = 28) {
  std::vector<std::vector<int32_t>> prompts;
  std::vector<int32_t> pattern;
  for (int i = 0; i < 36; ++i) pattern.push_back((i % 9) * 17 + 5);
  prompts.push_back(pattern);
  std::vector<int32_t> random;
  for (int i = 0; i < 23; ++i) random.push_back((i * 131 + 7) % 311);
  prompts.push_back(random);
  prompts.push_back({3, 1, 4, 1, 5});
  std::vector<RequestSpec> specs;
  for (const auto& p : prompts)
    for (const bool seeded : {false, true}) {
      RequestSpec s;
      s.prompt = p;
      s.max_tokens = max_tokens;
      s.ignore_eos = true;
      s.sampling.temperature = seeded ? 0.8f : 0.0f;
      s.sampling.top_p = seeded ? 0.9f : 1.0f;
      s.sampling.seed = seeded ? 1234 : 0;
      s.sampling.num_top_logprobs = 2;
      s.logits_digests = true;
      s.return_logits = true;
      specs.push_back(std::move(s));
    }
  return specs;
}

// A drafter whose drafts are always right (or always wrong): the reference's outputs replayed.
std::shared_ptr<const Drafter> replay(const std::vector<RequestSpec>& specs, const Outcome& reference, bool wrong) {
  std::vector<std::pair<std::vector<int32_t>, std::vector<int32_t>>> known;
  for (size_t i = 0; i < specs.size(); ++i) known.push_back({specs[i].prompt, reference.records[i].tokens});
  return std::make_shared<const ReplayDrafter>(std::move(known), wrong, 300);
}

TEST(SpeculativeConfig, ParsesVllmsNgramConfigAndNamesEachProblem) {
  auto c = parse_speculative_config(R"({"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_max": 4})");
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ(c->method, "ngram");
  EXPECT_EQ(c->num_speculative_tokens, 4);
  EXPECT_EQ(c->prompt_lookup_min, 4);  // vLLM: the missing bound equals the given one
  EXPECT_EQ(c->prompt_lookup_max, 4);
  c = parse_speculative_config(R"({"method": "ngram", "num_speculative_tokens": 2})");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->prompt_lookup_min, 5);
  EXPECT_EQ(c->prompt_lookup_max, 5);
  c = parse_speculative_config(R"({"model": "/models/small", "num_speculative_tokens": 3})");
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ(c->method, "draft_model");  // as vLLM infers it
  EXPECT_EQ(c->model, "/models/small");
  EXPECT_EQ(c->num_speculative_tokens, 3);
  for (const char* off : {"", "  ", "{}", "null"}) {
    c = parse_speculative_config(off);
    ASSERT_TRUE(c.ok()) << off;
    EXPECT_FALSE(c->enabled()) << off;
  }
  const std::pair<const char*, const char*> bad[] = {
      {"{", "not valid JSON"},
      {"[1]", "must be a JSON object"},
      {R"({"method": "eagle", "num_speculative_tokens": 2})", "unknown method \"eagle\""},
      {R"({"num_speculative_tokens": 2})", "\"method\" is missing"},
      {R"({"method": "ngram"})", "\"num_speculative_tokens\" is missing"},
      {R"({"method": "ngram", "num_speculative_tokens": 0})", "must be in [1, 64]"},
      {R"({"method": "ngram", "num_speculative_tokens": 65})", "must be in [1, 64]"},
      {R"({"method": "ngram", "num_speculative_tokens": "4"})", "must be an integer"},
      {R"({"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_min": 0})", "\"prompt_lookup_min\" must be"},
      {R"({"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_min": 5, "prompt_lookup_max": 3})",
       "must be >= \"prompt_lookup_min\""},
      {R"({"method": "ngram", "num_speculative_tokens": 4, "lookahead": 3})", "unknown field \"lookahead\""},
      {R"({"method": "draft_model", "num_speculative_tokens": 4})", "needs \"model\""},
      {R"({"method": "ngram", "model": "/m", "num_speculative_tokens": 4})", "takes no \"model\""},
      {R"({"model": "/m", "num_speculative_tokens": 4, "prompt_lookup_max": 2})", "belong to the ngram method"},
      {R"({"model": 3, "num_speculative_tokens": 4})", "\"model\" must be the draft model's path"},
  };
  for (const auto& [text, needle] : bad) {
    c = parse_speculative_config(text);
    ASSERT_FALSE(c.ok()) << text;
    EXPECT_EQ(c.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(c.status().message().find(needle), std::string::npos) << c.status().message();
    EXPECT_NE(c.status().message().find("speculative_config"), std::string::npos) << c.status().message();
  }
}

TEST(SpeculativeConfig, EngineRejectsABadConfigByName) {
  EngineConfig c = base_config();
  c.speculative_config = R"({"method": "ngram", "num_speculative_tokens": -1})";
  auto e = Engine::create(cpu_device_model(load("qwen3-tiny")), c);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("num_speculative_tokens"), std::string::npos) << e.status().message();
}

TEST(NgramDrafter, ProposesWhatFollowedTheLongestMostRecentMatch) {
  const NgramDrafter d(1, 3);
  //                                0  1  2  3  4  5  6  7  8  9
  const std::vector<int32_t> tokens{1, 2, 3, 9, 1, 2, 3, 7, 1, 2, 3};
  // The suffix 1 2 3 occurs at 0 and 4; the most recent (4) was followed by 7 1 2 3.
  EXPECT_EQ(d.propose(tokens, 3), (std::vector<int32_t>{7, 1, 2}));
  EXPECT_EQ(d.propose(tokens, 10), (std::vector<int32_t>{7, 1, 2, 3}));  // up to the end of the tokens
  EXPECT_TRUE(d.propose(tokens, 0).empty());
  // Only the last token matches (n = 1): 5 was followed by 6 at its last occurrence.
  EXPECT_EQ(d.propose(std::vector<int32_t>{5, 6, 8, 5, 4, 0, 5}, 2), (std::vector<int32_t>{4, 0}));
  // With n >= 2 nothing matches.
  EXPECT_TRUE(NgramDrafter(2, 3).propose(std::vector<int32_t>{5, 6, 8, 5, 4, 0, 5}, 2).empty());
  EXPECT_TRUE(d.propose(std::vector<int32_t>{4}, 4).empty());
  EXPECT_TRUE(d.propose(std::vector<int32_t>{1, 2, 3}, 4).empty());
}

TEST(Speculation, NgramOutputsEqualTheOutputsWithoutIt) {
  for (const char* model : {"qwen3-tiny", "llama-tiny"}) {
    const std::vector<RequestSpec> specs = request_set();
    const Outcome plain = run(model, specs, base_config());
    for (const int k : {1, 3, 8}) {
      EngineConfig c = base_config();
      c.speculative_config = ngram(k);
      const Outcome spec = run(model, specs, c);
      expect_same(plain, spec, std::string(model) + " ngram k=" + std::to_string(k));
      EXPECT_GT(spec.stats.num_draft_tokens, 0) << model << " k=" << k << ": nothing was drafted";
      EXPECT_GT(spec.stats.num_accepted_tokens, 0) << model << " k=" << k << ": no draft was accepted";
      EXPECT_LE(spec.stats.num_accepted_tokens, spec.stats.num_draft_tokens);
      std::printf("%s ngram k=%d: %lld of %lld draft tokens accepted, %lld steps (%lld without)\n", model, k,
                  static_cast<long long>(spec.stats.num_accepted_tokens),
                  static_cast<long long>(spec.stats.num_draft_tokens), static_cast<long long>(spec.stats.num_steps),
                  static_cast<long long>(plain.stats.num_steps));
    }
  }
}

// The draft-model method: the target itself as its draft (greedy drafts always right for the
// greedy requests) and another family's model (mostly wrong): the reference output either way.
TEST(Speculation, ADraftModelGivesTheReferenceOutput) {
  const std::vector<RequestSpec> specs = request_set(20);
  const Outcome plain = run("qwen3-tiny", specs, base_config());
  for (const char* draft : {"qwen3-tiny", "llama-tiny"}) {
    EngineConfig c = base_config();
    c.speculative_config = R"({"model": ")" + kModels + "/" + draft + R"(", "num_speculative_tokens": 4})";
    const Outcome spec = run("qwen3-tiny", specs, c);
    expect_same(plain, spec, std::string("draft model ") + draft);
    EXPECT_GT(spec.stats.num_draft_tokens, 0) << draft;
    std::printf("draft model %s: %lld of %lld draft tokens accepted, %lld steps (%lld without)\n", draft,
                static_cast<long long>(spec.stats.num_accepted_tokens),
                static_cast<long long>(spec.stats.num_draft_tokens), static_cast<long long>(spec.stats.num_steps),
                static_cast<long long>(plain.stats.num_steps));
    // Its greedy drafts are right for the greedy requests (half the set), rarely for the seeded ones.
    if (std::string(draft) == "qwen3-tiny") {
      EXPECT_GT(spec.stats.num_accepted_tokens * 5, spec.stats.num_draft_tokens);
    }
  }
  EngineConfig c = base_config();
  c.speculative_config = R"({"model": "/nonexistent/draft", "num_speculative_tokens": 4})";
  auto e = Engine::create(cpu_device_model(load("qwen3-tiny")), c);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("draft model"), std::string::npos) << e.status().message();
}

TEST(Speculation, DraftsAlwaysRightOrAlwaysWrongGiveTheReferenceOutput) {
  const std::vector<RequestSpec> specs = request_set();
  const Outcome plain = run("qwen3-tiny", specs, base_config());
  EngineConfig c = base_config();
  c.speculative_config = ngram(4);
  const Outcome right = run("qwen3-tiny", specs, c, replay(specs, plain, false));
  expect_same(plain, right, "drafts always right");
  EXPECT_GT(right.stats.num_draft_tokens, 0);
  EXPECT_EQ(right.stats.num_accepted_tokens, right.stats.num_draft_tokens);
  EXPECT_LT(right.stats.num_steps * 3, plain.stats.num_steps) << "k = 4 right drafts should take ~5x fewer steps";
  const Outcome wrong = run("qwen3-tiny", specs, c, replay(specs, plain, true));
  expect_same(plain, wrong, "drafts always wrong");
  EXPECT_GT(wrong.stats.num_draft_tokens, 0);
  EXPECT_EQ(wrong.stats.num_accepted_tokens, 0);
}

// vLLM's disable_by_batch_size: while that many requests run or wait, none gets drafts; the rule
// changes when drafts happen, never a token or a digest.
TEST(Speculation, DisableByBatchSizeDraftsOnlyOnceTheBatchHasThinned) {
  std::vector<RequestSpec> specs = request_set();
  for (size_t i = 0; i < specs.size(); ++i) specs[i].max_tokens = 8 + 6 * static_cast<int32_t>(i);
  const Outcome plain = run("qwen3-tiny", specs, base_config());
  EngineConfig c = base_config();
  c.speculative_config = ngram(4);
  const Outcome always = run("qwen3-tiny", specs, c, replay(specs, plain, false));
  c.speculative_config = R"({"method": "ngram", "num_speculative_tokens": 4, "disable_by_batch_size": 3})";
  const Outcome thinned = run("qwen3-tiny", specs, c, replay(specs, plain, false));
  expect_same(plain, always, "speculation on");
  expect_same(plain, thinned, "speculation off while 3 or more requests");
  EXPECT_GT(thinned.stats.num_draft_tokens, 0) << "the last two requests speculate";
  EXPECT_LT(thinned.stats.num_draft_tokens, always.stats.num_draft_tokens);
  EXPECT_GT(thinned.stats.num_steps, always.stats.num_steps);
  auto bad =
      parse_speculative_config(R"({"method": "ngram", "num_speculative_tokens": 4, "disable_by_batch_size": 1})");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("disable_by_batch_size"), std::string::npos) << bad.status().message();
}

TEST(Speculation, StopTokensAndMaxTokensInsideAnAcceptedRunEndWhereTheyEndWithout) {
  std::vector<RequestSpec> specs = request_set(24);
  const Outcome free_run = run("qwen3-tiny", specs, base_config());
  // Each request stops at its 4th output token's first occurrence, or at max_tokens 6 / 7.
  for (size_t i = 0; i < specs.size(); ++i) {
    if (i % 3 == 0) specs[i].stop_token_ids = {free_run.records[i].tokens[3]};
    if (i % 3 == 1) specs[i].max_tokens = 6;
    if (i % 3 == 2) specs[i].max_tokens = 7;
  }
  const Outcome plain = run("qwen3-tiny", specs, base_config());
  for (size_t i = 0; i < specs.size(); i += 3) EXPECT_LE(plain.records[i].tokens.size(), 4u);
  EngineConfig c = base_config();
  c.speculative_config = ngram(8);
  const Outcome spec = run("qwen3-tiny", specs, c, replay(specs, free_run, false));
  expect_same(plain, spec, "stops inside accepted runs");
  EXPECT_GT(spec.stats.num_accepted_tokens, 0);
}

TEST(Speculation, AbortMidRunLeavesNoKvBlock) {
  const std::vector<RequestSpec> specs = request_set(60);
  const Outcome plain = run("qwen3-tiny", specs, base_config());
  for (const int abort_after : {1, 2, 3, 5}) {
    for (const bool caching : {true, false}) {
      EngineConfig c = base_config();
      c.enable_prefix_caching = caching;
      c.speculative_config = ngram(6);
      const Outcome aborted = run("qwen3-tiny", specs, c, replay(specs, plain, abort_after % 2 == 0), abort_after);
      for (const Record& r : aborted.records) EXPECT_EQ(r.finish, FinishReason::kAbort);
      // run() checks num_blocks_used == 0 after the aborts.
    }
  }
}

// Window-local KV (the sliding-window layers keep only the blocks their window reads, in a pool of
// their own): a verify chunk claims window blocks for draft positions, and a window block is let go
// only once the positions that push it out of the window are verified. Drafts always right, always
// wrong and n-gram give plain decoding's tokens, logprobs, digests and logits on a model with window
// and global layers (gemma3-tiny) and one whose every layer has the window (mistral-tiny-window,
// no full table); no window block is left behind, and the window pool really released blocks.
TEST(Speculation, WindowLocalKvGivesThePlainOutputAndLeavesNoWindowBlock) {
  // The seeded requests' prompts one token longer: every replayed draft then follows its own
  // request (a seeded output that starts as the greedy one would otherwise get the greedy drafts).
  std::vector<RequestSpec> specs = request_set();
  for (RequestSpec& s : specs)
    if (s.sampling.seed != 0) s.prompt.push_back(7);
  for (const char* model : {"gemma3-tiny", "mistral-tiny-window"}) {
    const Outcome plain = run(model, specs, base_config());
    EngineConfig c = base_config();
    c.window_local_kv = true;
    EXPECT_GT(run(model, specs, c).stats.num_window_blocks_total, 0) << model << ": no window pool";
    c.speculative_config = ngram(4);
    const Outcome right = run(model, specs, c, replay(specs, plain, false));
    expect_same(plain, right, std::string(model) + " window_kv, drafts always right");
    EXPECT_GT(right.stats.num_draft_tokens, 0) << model;
    EXPECT_EQ(right.stats.num_accepted_tokens, right.stats.num_draft_tokens) << model;
    const Outcome wrong = run(model, specs, c, replay(specs, plain, true));
    expect_same(plain, wrong, std::string(model) + " window_kv, drafts always wrong");
    EXPECT_GT(wrong.stats.num_draft_tokens, 0) << model;
    EXPECT_EQ(wrong.stats.num_accepted_tokens, 0) << model;
    for (const int k : {1, 3, 8}) {
      c.speculative_config = ngram(k);
      const Outcome spec = run(model, specs, c);
      expect_same(plain, spec, std::string(model) + " window_kv, ngram k=" + std::to_string(k));
      EXPECT_GT(spec.stats.num_accepted_tokens, 0) << model << " k=" << k;
    }
    // One request of 36 + 100 tokens (34 blocks of 4): its window table (window 24) holds the
    // prompt's 9 blocks at most, then a decode step's 6 to 8, drafts included.
    std::vector<RequestSpec> one(specs.begin(), specs.begin() + 1);
    one[0].max_tokens = 100;
    const Outcome one_plain = run(model, one, base_config());
    for (const bool wrong_drafts : {false, true}) {
      c.speculative_config = ngram(4);
      const Outcome alone = run(model, one, c, replay(one, one_plain, wrong_drafts));
      expect_same(one_plain, alone, std::string(model) + " window_kv, one long request");
      EXPECT_GT(alone.max_window_blocks_used, 0) << model;
      EXPECT_LE(alone.max_window_blocks_used, 9) << model << ": window blocks were not released";
      std::printf("%s window_kv, drafts always %s: %lld of %lld accepted, window pool peak %lld blocks for 34\n", model,
                  wrong_drafts ? "wrong" : "right", static_cast<long long>(alone.stats.num_accepted_tokens),
                  static_cast<long long>(alone.stats.num_draft_tokens),
                  static_cast<long long>(alone.max_window_blocks_used));
    }
  }
}

TEST(Speculation, ATinyCacheAndAWarmPrefixCacheChangeNothing) {
  const std::vector<RequestSpec> specs = request_set();
  const Outcome plain = run("qwen3-tiny", specs, base_config());
  EngineConfig c = base_config();
  c.speculative_config = ngram(3);
  c.num_blocks = 40;  // the least that fits one request: preemptions with drafts in flight
  c.max_num_batched_tokens = 7;
  const Outcome tiny = run("qwen3-tiny", specs, c, replay(specs, plain, false));
  expect_same(plain, tiny, "tiny cache, budget 7");
  std::vector<RequestSpec> twice = specs;
  twice.insert(twice.end(), specs.begin(), specs.end());
  c = base_config();
  c.speculative_config = ngram(3);
  c.num_blocks = 200;
  const Outcome warm = run("qwen3-tiny", twice, c, replay(specs, plain, false));
  Outcome second;
  second.records.assign(warm.records.begin() + static_cast<std::ptrdiff_t>(specs.size()), warm.records.end());
  expect_same(plain, second, "prefix cache shared with speculating requests");
}

}  // namespace
}  // namespace vosti
