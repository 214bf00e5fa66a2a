// OfflineEngine, ModelFile::with_replaced, weights_digest and Engine::replace_model: weights
// swapped between steps change the outputs and swapping the old ones back restores every bit;
// batches, cancellation and the refusal to swap with requests in flight.
#include "offline/offline_engine.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>

#include "offline/weights_identity.h"
#include "tests/test_paths.h"

namespace vosti {
namespace {

const std::string kModels = vosti::testing::source_dir() + "/tests/golden/models";

EngineConfig tiny_config() {
  EngineConfig c;
  c.num_blocks = 64;
  c.max_model_len = 256;
  c.num_threads = 2;
  c.check_invariants = true;
  return c;
}

std::unique_ptr<OfflineEngine> make(const std::string& model = "qwen3-tiny") {
  auto e = OfflineEngine::create(kModels + "/" + model, tiny_config(), /*load_tokenizer=*/false);
  EXPECT_TRUE(e.ok()) << e.status().to_string();
  return std::move(e).value();
}

RequestSpec spec(int salt, uint64_t seed = 7, int32_t max_tokens = 12) {
  RequestSpec s;
  for (int i = 0; i < 9 + salt; ++i) s.prompt.push_back((i * 37 + salt * 11 + 5) % 300);
  s.sampling.temperature = 0.9f;
  s.sampling.seed = seed;
  s.sampling.num_top_logprobs = 3;
  s.max_tokens = max_tokens;
  s.ignore_eos = true;
  s.logits_digests = true;
  return s;
}

std::vector<RequestResult> run(OfflineEngine& e, std::vector<RequestSpec> specs) {
  auto batch = e.submit(std::move(specs), false);
  EXPECT_TRUE(batch.ok()) << batch.status().to_string();
  auto done = e.wait(**batch, nullptr);
  EXPECT_TRUE(done.ok() && *done);
  return (*batch)->results();
}

void expect_same(const RequestResult& a, const RequestResult& b) {
  EXPECT_EQ(a.token_ids, b.token_ids);
  ASSERT_EQ(a.logprobs.size(), b.logprobs.size());
  for (size_t i = 0; i < a.logprobs.size(); ++i)
    EXPECT_EQ(std::memcmp(&a.logprobs[i].logprob, &b.logprobs[i].logprob, sizeof(float)), 0) << i;
  EXPECT_EQ(a.digests, b.digests);
  EXPECT_EQ(a.seed, b.seed);
}

// The f32 values of one tensor with every element scaled (a different, same-shape weight).
ReplacementTensor scaled(const ModelFile& file, const std::string& name, float factor, std::vector<float>& storage) {
  auto slot = file.find_tensor(name);
  EXPECT_TRUE(slot.ok()) << slot.status().to_string();
  storage = *file.read_f32(slot->role, slot->layer);
  for (float& v : storage) v *= factor;
  ReplacementTensor t;
  t.name = name;
  t.type = WeightType::kF32;
  t.shape = file.expected_shape(slot->role);
  t.data = reinterpret_cast<const uint8_t*>(storage.data());
  t.num_bytes = storage.size() * sizeof(float);
  return t;
}

TEST(OfflineEngine, BatchedEqualsOneByOne) {
  auto e = make();
  std::vector<RequestSpec> specs = {spec(0), spec(1, 9), spec(2, 11, 20)};
  const std::vector<RequestResult> together = run(*e, specs);
  ASSERT_EQ(together.size(), 3u);
  for (size_t i = 0; i < specs.size(); ++i) {
    const std::vector<RequestResult> alone = run(*e, {specs[i]});
    expect_same(together[i], alone[0]);
    EXPECT_EQ(together[i].finish_reason, FinishReason::kLength);
  }
  EXPECT_EQ(e->num_in_flight(), 0);
}

TEST(OfflineEngine, InvalidRequestQueuesNone) {
  auto e = make();
  RequestSpec bad = spec(1);
  bad.sampling.top_p = 1.5f;
  auto batch = e->submit({spec(0), bad}, false);
  ASSERT_FALSE(batch.ok());
  EXPECT_EQ(batch.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(batch.status().message().find("request 1"), std::string::npos) << batch.status().message();
  EXPECT_NE(batch.status().message().find("top_p"), std::string::npos) << batch.status().message();
  EXPECT_EQ(e->num_in_flight(), 0);
  EXPECT_FALSE(run(*e, {spec(0)})[0].token_ids.empty());
}

TEST(OfflineEngine, InterruptedWaitCancelsAndTheEngineStaysUsable) {
  auto e = make();
  const RequestResult before = run(*e, {spec(3, 5, 40)})[0];
  auto batch = e->submit({spec(3, 5, 40), spec(4, 6, 40)}, false);
  ASSERT_TRUE(batch.ok());
  int steps = 0;
  auto done = e->wait(**batch, [&] { return ++steps == 3; });
  ASSERT_TRUE(done.ok());
  EXPECT_FALSE(*done);
  e->cancel(**batch);
  for (const RequestResult& r : (*batch)->results()) {
    EXPECT_TRUE(r.finished);
    EXPECT_EQ(r.finish_reason, FinishReason::kAbort);
    EXPECT_LT(r.token_ids.size(), 40u);
  }
  EXPECT_EQ(e->num_in_flight(), 0);
  EXPECT_EQ(e->stats().num_blocks_used, 0);
  expect_same(run(*e, {spec(3, 5, 40)})[0], before);
}

TEST(OfflineEngine, StreamEventsAddUpToTheResult) {
  auto e = make();
  const RequestResult whole = run(*e, {spec(2)})[0];
  auto batch = e->submit({spec(2)}, true);
  ASSERT_TRUE(batch.ok());
  std::vector<int32_t> tokens;
  int finals = 0;
  while (true) {
    auto ev = e->next_event(**batch, nullptr, nullptr);
    ASSERT_TRUE(ev.ok());
    if (!ev->has_value()) break;
    tokens.insert(tokens.end(), (*ev)->delta.token_ids.begin(), (*ev)->delta.token_ids.end());
    finals += (*ev)->delta.finished ? 1 : 0;
  }
  EXPECT_EQ(tokens, whole.token_ids);
  EXPECT_EQ(finals, 1);
}

TEST(OfflineEngine, WeightUpdateChangesOutputsAndTheOldWeightsRestoreThem) {
  auto e = make();
  const WeightsInfo w0 = e->weights();
  const RequestResult before = run(*e, {spec(1)})[0];
  const std::shared_ptr<const ModelFile> original = e->model_file();

  std::vector<float> storage;
  auto changed =
      ModelFile::with_replaced(original, {scaled(*original, "model.layers.0.mlp.down_proj.weight", 1.5f, storage)});
  ASSERT_TRUE(changed.ok()) << changed.status().to_string();
  ASSERT_TRUE(e->update_weights(*changed).ok());
  const WeightsInfo w1 = e->weights();
  EXPECT_EQ(w1.version, 1);
  EXPECT_NE(w1.weights_digest, w0.weights_digest);
  EXPECT_NE(w1.deployment_digest, w0.deployment_digest);
  const RequestResult after = run(*e, {spec(1)})[0];
  EXPECT_NE(after.digests, before.digests);

  ASSERT_TRUE(e->update_weights(original).ok());
  EXPECT_EQ(e->weights().weights_digest, w0.weights_digest);
  EXPECT_EQ(e->weights().deployment_digest, w0.deployment_digest);
  EXPECT_EQ(e->weights().version, 2);
  expect_same(run(*e, {spec(1)})[0], before);
}

TEST(OfflineEngine, UpdateRefusedWithRequestsInFlight) {
  auto e = make();
  auto batch = e->submit({spec(0)}, false);
  ASSERT_TRUE(batch.ok());
  const Status s = e->update_weights(e->model_file());
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(s.message().find("1 requests are in flight"), std::string::npos) << s.message();
  ASSERT_TRUE(*e->wait(**batch, nullptr));
  EXPECT_TRUE(e->update_weights(e->model_file()).ok());
}

// Sleep frees the runner (level 1) and the weights (level 2); requests are refused while asleep;
// wake makes them again and every bit of the outputs comes back.
TEST(OfflineEngine, SleepAndWakeRestoreEveryBit) {
  auto e = make();
  const RequestResult before = run(*e, {spec(2)})[0];
  const WeightsInfo w0 = e->weights();
  for (int level : {1, 2}) {
    ASSERT_TRUE(e->sleep(level).ok());
    EXPECT_EQ(e->sleep_level(), level);
    EXPECT_EQ(e->runner_info().kv_cache_bytes, 0);
    EXPECT_EQ(e->runner_info().weight_bytes == 0, level == 2);
    auto refused = e->submit({spec(2)}, false);
    ASSERT_FALSE(refused.ok());
    EXPECT_EQ(refused.status().code(), StatusCode::kFailedPrecondition);
    EXPECT_NE(refused.status().message().find("asleep"), std::string::npos) << refused.status().message();
    EXPECT_EQ(e->sleep(1).code(), StatusCode::kFailedPrecondition);
    EXPECT_EQ(e->update_weights(e->model_file()).code(), StatusCode::kFailedPrecondition);
    ASSERT_TRUE(e->wake_up().ok());
    EXPECT_EQ(e->sleep_level(), 0);
    EXPECT_GT(e->runner_info().kv_cache_bytes, 0);
    expect_same(run(*e, {spec(2)})[0], before);
    EXPECT_EQ(e->weights().deployment_digest, w0.deployment_digest);
  }
  EXPECT_EQ(e->sleep(3).code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(e->wake_up().ok());  // awake: a no-op
}

TEST(OfflineEngine, SleepRefusedWithRequestsInFlight) {
  auto e = make();
  auto batch = e->submit({spec(0)}, false);
  ASSERT_TRUE(batch.ok());
  const Status s = e->sleep(1);
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(s.message().find("in flight"), std::string::npos) << s.message();
  ASSERT_TRUE(*e->wait(**batch, nullptr));
}

TEST(WithReplaced, BadTensorsAreNamed) {
  auto file = ModelFile::open(kModels + "/qwen3-tiny");
  ASSERT_TRUE(file.ok());
  std::vector<float> storage;
  ReplacementTensor t = scaled(**file, "model.layers.0.mlp.down_proj.weight", 1.0f, storage);
  ReplacementTensor unknown = t;
  unknown.name = "model.layers.99.mlp.down_proj.weight";
  auto r = ModelFile::with_replaced(*file, {unknown});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("model.layers.99.mlp.down_proj.weight"), std::string::npos);
  ReplacementTensor wrong_shape = t;
  wrong_shape.shape = {t.shape[1], t.shape[0]};
  r = ModelFile::with_replaced(*file, {wrong_shape});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("shape"), std::string::npos);
  r = ModelFile::with_replaced(*file, {t, t});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("twice"), std::string::npos);
  ReplacementTensor short_data = t;
  short_data.num_bytes -= 4;
  EXPECT_FALSE(ModelFile::with_replaced(*file, {short_data}).ok());
}

TEST(WithReplaced, SameValuesSameDigestAndTiedHeadSkipped) {
  auto file = ModelFile::open(kModels + "/llama3-tiny-tied-sharded");
  ASSERT_TRUE(file.ok());
  const LogitsDigest d0 = *weights_digest(**file);
  std::vector<float> embed, head;
  ReplacementTensor same = scaled(**file, "model.embed_tokens.weight", 1.0f, embed);
  ReplacementTensor tied = same;
  tied.name = "lm_head.weight";
  auto r = ModelFile::with_replaced(*file, {same, tied});
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_TRUE((*r)->is_replaced(WeightRole::kEmbed));
  EXPECT_FALSE((*r)->has(WeightRole::kLmHead));
  EXPECT_EQ(*weights_digest(**r), d0);
  auto changed = ModelFile::with_replaced(*file, {scaled(**file, "model.embed_tokens.weight", 2.0f, head)});
  ASSERT_TRUE(changed.ok());
  EXPECT_NE(*weights_digest(**changed), d0);
  WeightsDigester digester;  // remembers tensors by their memory: the same answers
  EXPECT_EQ(*digester.digest(**file), d0);
  EXPECT_EQ(*digester.digest(**changed), *weights_digest(**changed));
  EXPECT_EQ(*digester.digest(**r), d0);
  EXPECT_EQ(*digester.digest(**file), d0);
}

// llama.cpp stores Llama q/k rows interleaved: a replacement given in HF order must read back
// (read_f32, HF order) as given. Runs on the default model (a Llama GGUF) when it is there.
TEST(WithReplaced, GgufQkRowsRoundTrip) {
  const char* path = std::getenv("VOSTI_DEFAULT_MODEL");
  if (!path || !*path) GTEST_SKIP() << "VOSTI_DEFAULT_MODEL is not set";
  auto file = ModelFile::open(path);
  ASSERT_TRUE(file.ok()) << file.status().to_string();
  ASSERT_TRUE((*file)->needs_row_unpermute(WeightRole::kQ));
  std::vector<float> q;
  ReplacementTensor t = scaled(**file, "model.layers.1.self_attn.q_proj.weight", 0.5f, q);
  auto r = ModelFile::with_replaced(*file, {t});
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(*(*r)->read_f32(WeightRole::kQ, 1), q);
  EXPECT_EQ(*(*r)->read_f32(WeightRole::kQ, 0), *(*file)->read_f32(WeightRole::kQ, 0));
}

// Gemma 3: the safetensors directory stores norms as w, the llama.cpp-style GGUF as 1 + w. Both
// read back (read_f32) as the multiplier 1 + w, so the weights digest is the same; the Python
// API's HF values (read_hf_f32) are w; a w given as an update to the GGUF is stored as 1 + w.
TEST(WithReplaced, GemmaNormsAgreeAcrossFormats) {
  auto st = ModelFile::open(kModels + "/gemma3-tiny");
  auto gg = ModelFile::open(kModels + "/gemma3-tiny.gguf");
  ASSERT_TRUE(st.ok() && gg.ok());
  EXPECT_EQ(*weights_digest(**st), *weights_digest(**gg));
  const std::vector<float> w = *(*st)->read_hf_f32(WeightRole::kPostFfnNorm, 1);
  const std::vector<float> one_plus_w = *(*st)->read_f32(WeightRole::kPostFfnNorm, 1);
  for (size_t i = 0; i < w.size(); ++i) ASSERT_EQ(one_plus_w[i], 1.0f + w[i]);
  EXPECT_EQ(*(*gg)->read_f32(WeightRole::kPostFfnNorm, 1), one_plus_w);
  std::vector<float> halved;
  ReplacementTensor t = scaled(**st, "model.layers.1.post_feedforward_layernorm.weight", 0.5f, halved);
  auto r = ModelFile::with_replaced(*gg, {t});
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  const std::vector<float> got = *(*r)->read_f32(WeightRole::kPostFfnNorm, 1);
  for (size_t i = 0; i < got.size(); ++i) ASSERT_EQ(got[i], 1.0f + halved[i]);
  EXPECT_EQ(*(*r)->read_f32(WeightRole::kFfnNorm, 1), *(*gg)->read_f32(WeightRole::kFfnNorm, 1));
}

}  // namespace
}  // namespace vosti
