// Engine API: request validation, outputs and their order, abort, prompt scoring,
// digests, and bit-equality with the foundation's single-sequence forward.
#include "engine/engine.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <thread>

#include "core/thread_pool.h"
#include "model/model.h"
#include "runner/single_sequence.h"
#include "sample/logprobs.h"
#include "sample/sampler.h"
#include "tests/test_paths.h"

namespace vosti {
namespace {

const std::string kModels = vosti::testing::source_dir() + "/tests/golden/models";

std::shared_ptr<const Model> tiny_model() {
  static auto model = Model::load(kModels + "/qwen3-tiny");
  EXPECT_TRUE(model.ok()) << model.status().to_string();
  return *model;
}

std::unique_ptr<Engine> make_engine(EngineConfig c = {}) {
  if (c.num_blocks == 0) c.num_blocks = 64;
  if (c.max_model_len == 0) c.max_model_len = 256;
  c.num_threads = 2;
  c.check_invariants = true;
  auto e = Engine::create(tiny_model(), c);
  EXPECT_TRUE(e.ok()) << e.status().to_string();
  return std::move(e).value();
}

struct Collected {
  std::vector<RequestOutput> outputs;
  std::vector<int32_t> tokens;
  bool finished = false;
};

OutputCallback collect(Collected& c) {
  return [&c](const RequestOutput& out) {
    EXPECT_FALSE(c.finished) << "output after the final one";
    c.outputs.push_back(out);
    c.tokens.insert(c.tokens.end(), out.new_tokens.begin(), out.new_tokens.end());
    c.finished = out.finished;
  };
}

void run_to_completion(Engine& e) {
  for (int i = 0; i < 100000 && e.has_work(); ++i) e.step();
  EXPECT_FALSE(e.has_work());
}

std::vector<int32_t> prompt_of(int n, int salt = 0) {
  std::vector<int32_t> p(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) p[static_cast<size_t>(i)] = (i * 31 + salt * 7 + 3) % 320;
  return p;
}

TEST(Engine, BadRequestsAreRejectedWithClearErrorsAndDisturbNothing) {
  auto e = make_engine();
  Collected good;
  RequestSpec ok;
  ok.prompt = prompt_of(10);
  ok.max_tokens = 5;
  ok.sampling.temperature = 0;
  ASSERT_TRUE(e->add_request(ok, collect(good)).ok());

  auto expect_error = [&](RequestSpec spec, const std::string& needle) {
    auto r = e->add_request(spec, nullptr);
    ASSERT_FALSE(r.ok()) << needle;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find(needle), std::string::npos) << r.status().message();
  };
  RequestSpec s = ok;
  s.prompt.clear();
  expect_error(s, "empty");
  s = ok;
  s.prompt[3] = 320;
  expect_error(s, "outside the vocabulary");
  s = ok;
  s.prompt[0] = -1;
  expect_error(s, "outside the vocabulary");
  s = ok;
  s.prompt = prompt_of(256);
  expect_error(s, "maximum context length is 256");
  s = ok;
  s.max_tokens = -1;
  expect_error(s, "max_tokens");
  s = ok;
  s.sampling.temperature = -0.5f;
  expect_error(s, "temperature");
  s = ok;
  s.sampling.top_p = 0.0f;
  expect_error(s, "top_p");
  s = ok;
  s.stop = {"x"};
  expect_error(s, "tokenizer");

  run_to_completion(*e);
  ASSERT_TRUE(good.finished);
  EXPECT_EQ(good.tokens.size(), 5u);
  EXPECT_EQ(good.outputs.back().finish_reason, FinishReason::kLength);
}

// Engine output in the reference configuration equals the single-sequence forward
// fed one token at a time (F_D), bit for bit, and its greedy tokens.
TEST(Engine, ReferenceConfigurationEqualsSingleSequenceForward) {
  EngineConfig c;
  c.max_num_seqs = 1;
  c.max_num_batched_tokens = 1;
  c.enable_prefix_caching = false;
  auto e = make_engine(c);
  RequestSpec spec;
  spec.prompt = prompt_of(21);
  spec.max_tokens = 9;
  spec.sampling.temperature = 0;
  spec.return_logits = true;
  spec.ignore_eos = true;
  Collected got;
  ASSERT_TRUE(e->add_request(spec, collect(got)).ok());
  run_to_completion(*e);
  ASSERT_EQ(got.tokens.size(), 9u);

  ThreadPool pool(2);
  auto kernels = make_cpu_backend(&pool);
  SingleSequence seq(*tiny_model(), *kernels, 64);
  std::vector<float> logits;
  for (int32_t t : spec.prompt) logits = seq.append(std::span<const int32_t>(&t, 1));
  size_t k = 0;
  for (const auto& out : got.outputs) {
    for (size_t i = 0; i < out.new_tokens.size(); ++i, ++k) {
      ASSERT_EQ(out.new_logits[i].size(), logits.size());
      EXPECT_EQ(std::memcmp(out.new_logits[i].data(), logits.data(), logits.size() * sizeof(float)), 0) << k;
      const int32_t argmax = static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
      EXPECT_EQ(out.new_tokens[i], argmax);
      const int32_t tok = out.new_tokens[i];
      logits = seq.append(std::span<const int32_t>(&tok, 1));
    }
  }
}

TEST(Engine, AbortAtAnyTimeFreesEverythingAndSendsOneFinalOutput) {
  auto e = make_engine();
  Collected a, b, c;
  RequestSpec spec;
  spec.prompt = prompt_of(40);
  spec.max_tokens = 30;
  spec.ignore_eos = true;
  auto ia = e->add_request(spec, collect(a));
  spec.prompt = prompt_of(33, 1);
  auto ib = e->add_request(spec, collect(b));
  auto ic = e->add_request(spec, collect(c));
  ASSERT_TRUE(ia.ok() && ib.ok() && ic.ok());
  e->abort(*ic);  // before it ever ran
  e->step();
  e->step();
  e->abort(*ia);    // mid-generation
  e->abort(12345);  // unknown: ignored
  run_to_completion(*e);
  EXPECT_TRUE(a.finished);
  EXPECT_EQ(a.outputs.back().finish_reason, FinishReason::kAbort);
  EXPECT_LT(a.tokens.size(), 30u);
  EXPECT_TRUE(c.finished);
  EXPECT_EQ(c.outputs.back().finish_reason, FinishReason::kAbort);
  EXPECT_TRUE(c.tokens.empty());
  EXPECT_EQ(b.tokens.size(), 30u);
  EXPECT_EQ(e->stats().num_blocks_used, 0);
}

TEST(Engine, PromptLogprobsAndDigestsAreDeterministicAndMatchScoring) {
  RequestSpec spec;
  spec.prompt = prompt_of(37);
  spec.max_tokens = 0;  // score the prompt only (echo + logprobs, max_tokens 0)
  spec.prompt_logprobs = true;
  spec.sampling.num_top_logprobs = 3;
  std::vector<PositionLogprobs> first;
  for (int32_t budget : {1, 7, 512}) {
    EngineConfig c;
    c.max_num_batched_tokens = budget;
    auto e = make_engine(c);
    Collected got;
    ASSERT_TRUE(e->add_request(spec, collect(got)).ok());
    run_to_completion(*e);
    ASSERT_TRUE(got.finished);
    EXPECT_EQ(got.outputs.back().finish_reason, FinishReason::kLength);
    std::vector<PositionLogprobs> lp;
    for (const auto& o : got.outputs) lp.insert(lp.end(), o.prompt_logprobs.begin(), o.prompt_logprobs.end());
    ASSERT_EQ(lp.size(), spec.prompt.size());
    for (size_t i = 0; i < lp.size(); ++i) {
      EXPECT_EQ(lp[i].token, spec.prompt[i]);
      if (i > 0) {
        EXPECT_LE(lp[i].logprob, 0.0f);
        EXPECT_EQ(lp[i].top.size(), 3u);
      }
    }
    if (first.empty()) {
      first = lp;
    } else {
      for (size_t i = 0; i < lp.size(); ++i)
        EXPECT_EQ(std::memcmp(&lp[i].logprob, &first[i].logprob, sizeof(float)), 0)
            << "budget " << budget << " pos " << i;
    }
  }
}

TEST(Engine, EchoDigestsAreTheDigestsOfThePromptRows) {
  RequestSpec spec;
  spec.prompt = prompt_of(23);
  spec.max_tokens = 1;
  spec.prompt_logprobs = true;
  spec.logits_digests = true;
  spec.sampling.temperature = 0;
  ThreadPool pool(2);
  auto kernels = make_cpu_backend(&pool);
  SingleSequence seq(*tiny_model(), *kernels, 64);
  const std::vector<float> rows = seq.append(spec.prompt, /*all_logits=*/true);  // [prompt, vocab]
  const size_t vocab = rows.size() / spec.prompt.size();
  auto row = [&](size_t p) { return std::span<const float>(rows.data() + p * vocab, vocab); };
  for (int32_t budget : {5, 512}) {
    EngineConfig c;
    c.max_num_batched_tokens = budget;
    auto e = make_engine(c);
    Collected got;
    ASSERT_TRUE(e->add_request(spec, collect(got)).ok());
    run_to_completion(*e);
    std::vector<LogitsDigest> prompt_digests;
    std::vector<LogitsDigest> digests;
    for (const auto& o : got.outputs) {
      if (!o.prompt_digests.empty()) prompt_digests = o.prompt_digests;
      digests.insert(digests.end(), o.new_digests.begin(), o.new_digests.end());
    }
    ASSERT_EQ(prompt_digests.size(), spec.prompt.size()) << budget;
    EXPECT_EQ(prompt_digests[0], LogitsDigest{});  // no row scored the first token
    for (size_t i = 1; i < spec.prompt.size(); ++i)
      EXPECT_EQ(prompt_digests[i], logits_digest(row(i - 1))) << "budget " << budget << " position " << i;
    ASSERT_EQ(digests.size(), 1u);
    EXPECT_EQ(digests[0], logits_digest(row(spec.prompt.size() - 1)));  // the last row: output position 0
  }
}

TEST(Engine, ResetPrefixCacheMakesTheNextRequestCold) {
  auto e = make_engine();  // prefix caching on
  RequestSpec spec;
  spec.prompt = prompt_of(50);
  spec.max_tokens = 3;
  spec.ignore_eos = true;
  spec.sampling.temperature = 0;
  spec.logits_digests = true;
  struct Run {
    int32_t cached = -1;
    std::vector<LogitsDigest> digests;
  };
  auto run = [&] {
    Collected got;
    EXPECT_TRUE(e->add_request(spec, collect(got)).ok());
    run_to_completion(*e);
    Run r;
    r.cached = got.outputs.back().num_cached_prompt_tokens;
    for (const auto& o : got.outputs) r.digests.insert(r.digests.end(), o.new_digests.begin(), o.new_digests.end());
    return r;
  };
  const Run cold = run();
  const Run warm = run();
  e->reset_prefix_cache();
  EXPECT_TRUE(e->has_work());  // the reset is work: the next step applies it
  run_to_completion(*e);
  const Run after_reset = run();
  EXPECT_EQ(cold.cached, 0);
  EXPECT_EQ(warm.cached, 48);  // three full blocks of 16
  EXPECT_EQ(after_reset.cached, 0);
  EXPECT_EQ(warm.digests, cold.digests);
  EXPECT_EQ(after_reset.digests, cold.digests);
  // A reset queued together with a request applies before the request is admitted.
  e->reset_prefix_cache();
  EXPECT_EQ(run().cached, 0);
}

TEST(Engine, SeedIsReportedAndReplaysTheRun) {
  auto e = make_engine();
  RequestSpec spec;
  spec.prompt = prompt_of(12);
  spec.max_tokens = 12;
  spec.ignore_eos = true;
  spec.sampling.temperature = 1.0f;
  spec.logits_digests = true;
  Collected a;
  ASSERT_TRUE(e->add_request(spec, collect(a)).ok());
  run_to_completion(*e);
  const uint64_t seed = a.outputs.back().seed;
  spec.sampling.seed = seed;
  Collected b;
  ASSERT_TRUE(e->add_request(spec, collect(b)).ok());
  run_to_completion(*e);
  EXPECT_EQ(a.tokens, b.tokens);
  std::vector<LogitsDigest> da, db;
  for (const auto& o : a.outputs) da.insert(da.end(), o.new_digests.begin(), o.new_digests.end());
  for (const auto& o : b.outputs) db.insert(db.end(), o.new_digests.begin(), o.new_digests.end());
  EXPECT_EQ(da.size(), 12u);
  EXPECT_EQ(da, db);
}

TEST(Engine, AddRequestIsSafeFromOtherThreads) {
  auto e = make_engine();
  std::vector<Collected> got(16);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 4; ++i) {
        RequestSpec spec;
        spec.prompt = prompt_of(5 + i, t);
        spec.max_tokens = 4;
        spec.ignore_eos = true;
        ASSERT_TRUE(e->add_request(spec, collect(got[static_cast<size_t>(t * 4 + i)])).ok());
      }
    });
  }
  for (auto& th : threads) th.join();
  run_to_completion(*e);
  for (const auto& g : got) {
    EXPECT_TRUE(g.finished);
    EXPECT_EQ(g.tokens.size(), 4u);
  }
}

}  // namespace
}  // namespace vosti

namespace vosti {
namespace {

// A request that asks for no logprobs takes the CPU runner's token-only sampler path: the
// same tokens (and digests) as the path that also computes the raw logprobs.
TEST(Engine, SamplingWithoutLogprobsChoosesTheSameTokens) {
  auto run = [](bool logprobs) {
    auto e = make_engine();
    Collected c;
    RequestSpec spec;
    spec.prompt = prompt_of(12, 5);
    spec.max_tokens = 24;
    spec.sampling.temperature = 0.9f;
    spec.sampling.top_p = 0.95f;
    spec.sampling.seed = 1234;
    spec.sampling.logprobs = logprobs;
    EXPECT_TRUE(e->add_request(spec, collect(c)).ok());
    run_to_completion(*e);
    return c.tokens;
  };
  const std::vector<int32_t> with = run(true), without = run(false);
  ASSERT_EQ(with.size(), 24u);
  EXPECT_EQ(with, without);
}

// logprobs_mode (sample/logprobs.h) changes what a position reports, never a token or a logit:
// each mode's sampled values are its definition applied to the raw row the engine returned, with
// the request's own history; prompt positions report the raw row's logprobs or values.
TEST(Engine, LogprobsModesReportTheirRowAndChangeNoToken) {
  struct Run {
    Collected c;
    std::vector<ScoredToken> sampled, prompt;
    std::vector<std::vector<float>> rows;
  };
  RequestSpec spec;
  spec.prompt = prompt_of(14, 2);
  spec.max_tokens = 16;
  spec.ignore_eos = true;
  spec.prompt_logprobs = true;
  spec.return_logits = true;
  spec.sampling.temperature = 0.8f;
  spec.sampling.top_k = 40;
  spec.sampling.top_p = 0.9f;
  spec.sampling.repetition_penalty = 1.3f;
  spec.sampling.presence_penalty = 0.5f;
  spec.sampling.num_top_logprobs = 5;
  spec.sampling.seed = 77;
  auto run = [&](const char* mode) {
    EngineConfig c;
    c.logprobs_mode = mode;
    c.max_num_batched_tokens = 5;  // a chunked prompt: its rows come from three steps
    auto e = make_engine(c);
    Run r;
    EXPECT_TRUE(e->add_request(spec, collect(r.c)).ok());
    run_to_completion(*e);
    for (const RequestOutput& o : r.c.outputs) {
      r.sampled.insert(r.sampled.end(), o.new_logprobs.begin(), o.new_logprobs.end());
      r.rows.insert(r.rows.end(), o.new_logits.begin(), o.new_logits.end());
      r.prompt.insert(r.prompt.end(), o.prompt_logprobs.begin(), o.prompt_logprobs.end());
    }
    return r;
  };
  const Run raw = run("raw_logprobs");
  ASSERT_EQ(raw.c.tokens.size(), 16u);
  ASSERT_EQ(raw.rows.size(), 16u);
  ASSERT_EQ(raw.prompt.size(), spec.prompt.size());
  for (const char* mode : {"raw_logits", "processed_logprobs", "processed_logits"}) {
    SCOPED_TRACE(mode);
    LogprobsMode m{};
    ASSERT_TRUE(parse_logprobs_mode(mode, m));
    const Run got = run(mode);
    ASSERT_EQ(got.c.tokens, raw.c.tokens);
    ASSERT_EQ(got.rows.size(), raw.rows.size());
    SamplerScratch scratch;
    for (size_t i = 0; i < got.rows.size(); ++i) {
      ASSERT_EQ(std::memcmp(got.rows[i].data(), raw.rows[i].data(), got.rows[i].size() * sizeof(float)), 0);
      const std::span<const int32_t> before(raw.c.tokens.data(), i);
      const ScoredToken want =
          sample_token(raw.rows[i], spec.sampling, 77, static_cast<int64_t>(i), spec.prompt, before, scratch, m);
      ASSERT_EQ(got.sampled[i].token, want.token) << i;
      EXPECT_EQ(std::memcmp(&got.sampled[i].logprob, &want.logprob, sizeof(float)), 0) << i;
      ASSERT_EQ(got.sampled[i].top.size(), 5u);
      for (size_t k = 0; k < 5; ++k) {
        EXPECT_EQ(got.sampled[i].top[k].token, want.top[k].token) << i;
        EXPECT_EQ(std::memcmp(&got.sampled[i].top[k].logprob, &want.top[k].logprob, sizeof(float)), 0) << i;
      }
      if (reports_processed(m) && reports_logits(m)) {
        // Written out for the chosen token: one penalty pass, then the temperature.
        const int32_t t = want.token;
        float v = raw.rows[i][static_cast<size_t>(t)];
        const bool seen = std::find(spec.prompt.begin(), spec.prompt.end(), t) != spec.prompt.end() ||
                          std::find(before.begin(), before.end(), t) != before.end();
        if (seen) v = v > 0.0f ? v / 1.3f : v * 1.3f;
        if (std::find(before.begin(), before.end(), t) != before.end()) v = v - 0.5f;
        EXPECT_EQ(got.sampled[i].logprob, v / 0.8f) << i;
      }
    }
    ASSERT_EQ(got.prompt.size(), raw.prompt.size());
    const Run& same_kind = reports_logits(m) ? run("raw_logits") : raw;
    for (size_t i = 1; i < got.prompt.size(); ++i)
      EXPECT_EQ(std::memcmp(&got.prompt[i].logprob, &same_kind.prompt[i].logprob, sizeof(float)), 0) << i;
  }
  EngineConfig bad;
  bad.logprobs_mode = "processed";
  bad.num_blocks = 64;
  auto e = Engine::create(tiny_model(), bad);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("logprobs_mode must be raw_logprobs"), std::string::npos);
}

}  // namespace
}  // namespace vosti
