// The GPU forward (model/cuda: CudaModel, driven by the tests' CudaForwardFixture) against HF
// transformers' golden logits, the CPU backend and the CPU emulation of the CUDA numeric
// policy (bf16 KV pool included); bitwise chunking, block-size and KV-dtype behaviour; loading
// straight from the file gives the same bits as uploading the loaded model; errors; the
// mixture-of-experts families against the emulated policy (kTinyMoeModels says why not golden). GPU tests skip with "no
// CUDA device" without a GPU; the emulation's own accuracy (which sets the bounds below) runs everywhere.
//
// Metric: per position, rel = ||logits - ref|| / ||ref|| over the vocabulary; the worst
// position is printed and bounded. Argmax must agree wherever the reference's top-2 gap
// exceeds kClearGap; smaller-gap disagreements are printed as notes.
// Bounds, measured here on the CPU (the Bf16Policy tests print them on every run): the CUDA
// policy rounds weights and GEMM inputs to bf16 (2^-9 relative per element; METHOD.md: bf16
// operands give 1e-3..1e-2 per GEMM). The 3-layer random golden models amplify it: the
// policy emulated on the CPU (bf16_policy.h, otherwise exact f32) is 1.8e-2..3.3e-2 from
// transformers' f32 logits (1.6e-2..3.2e-2 with the bf16 KV pool; bf16 weights alone: 2.7e-2
// for llama-tiny; 2e-6 for qwen2-tiny, whose weights are bf16 already), and the same
// emulation run with two f32 reduction
// orders (oracle vs CPU backend) differs by up to 7.0e-3, because a few bf16 activations
// round the other way; the GPU's order is a third one. Bugs are far away: a wrong rotary
// layout gives 1.2..1.6, an attention mask one position short 1.2..1.3. Hence
//   kPolicyBound = 7e-2: GPU vs golden and vs the f32 CPU backend (2.1x the measured 3.3e-2);
//   kEmulationBound = 2e-2: GPU vs the emulation (2.9x the measured order effect 7.0e-3);
//   kRealModelBound = 1.5e-1: SmolLM2-135M (30 layers), GPU vs the f32 CPU backend (2.2x the
//     emulation's measured 6.9e-2 with the bf16 KV pool; 3.7e-2 with an f32 one);
//   kClearGap = 0.15: argmax flips under the emulation happened at gaps up to 0.049.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "core/thread_pool.h"
#include "model/cuda/cuda_model.h"
#include "model/model.h"
#include "model/model_file.h"
#include "runner/single_sequence.h"
#include "tests/kernels_cuda/cuda_test_util.h"
#include "tests/model_cuda/bf16_policy.h"
#include "tests/model_cuda/cuda_forward_fixture.h"
#include "tests/test_paths.h"

namespace vosti {
namespace {

constexpr double kPolicyBound = 7e-2;
constexpr double kEmulationBound = 2e-2;
constexpr double kRealModelBound = 1.5e-1;
constexpr double kClearGap = 0.15;

const std::string kGoldenDir = vosti::testing::source_dir() + "/tests/golden";
const std::vector<std::string> kTinyModels = {
    "llama-tiny",  "llama3-tiny-tied-sharded",   "qwen2-tiny-bf16", "qwen3-tiny", "mistral-tiny-window",
    "gemma3-tiny", "gemma3-tiny-mm-bf16-softcap"};
// Mixture-of-experts models: their random routers make near-tied expert choices that the CUDA
// policy's bf16 rounding flips against transformers' f32 (the emulation is 0.19..0.80 from the
// golden logits where a token changes experts), so the GPU is held to the policy's emulation
// (kEmulationBound), which rounds where the GPU rounds, and to bitwise invariance.
const std::vector<std::string> kTinyMoeModels = {"qwen3-moe-tiny", "mixtral-tiny", "qwen3-moe-tiny-dense1-bf16"};
std::vector<std::string> all_tiny_models() {
  std::vector<std::string> all = kTinyModels;
  all.insert(all.end(), kTinyMoeModels.begin(), kTinyMoeModels.end());
  return all;
}

nlohmann::json read_json(const std::string& path) {
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << path;
  return nlohmann::json::parse(in);
}

// ||out - ref|| / ||ref||; NaN anywhere gives +inf.
double rel_error(const float* out, const double* ref, int64_t n) {
  double num = 0, den = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (std::isnan(out[i])) return INFINITY;
    num += (out[i] - ref[i]) * (out[i] - ref[i]);
    den += ref[i] * ref[i];
  }
  return std::sqrt(num / den);
}

struct TopTwo {
  int64_t best = 0;
  double gap = 0;  // top-1 minus top-2
};
template <typename T>
TopTwo top_two(const T* row, int64_t n) {
  int64_t best = 0;
  for (int64_t i = 1; i < n; ++i)
    if (row[i] > row[best]) best = i;
  double second = -INFINITY;
  for (int64_t i = 0; i < n; ++i)
    if (i != best) second = std::max(second, static_cast<double>(row[i]));
  return {best, static_cast<double>(row[best]) - second};
}

// Logits [num_positions, vocab] (f64) with a name, compared against.
struct Reference {
  const char* name;
  std::vector<double> logits;
};

// Compares out [positions, vocab] with ref by rel_error per position (< bound) and argmax
// where the reference's top-2 gap is clear; returns the worst relative error.
double compare(const std::string& what, const std::vector<float>& out, const std::vector<double>& ref, int64_t vocab,
               double bound) {
  EXPECT_EQ(out.size(), ref.size()) << what;
  if (out.size() != ref.size()) return INFINITY;
  double worst = 0;
  const int64_t positions = static_cast<int64_t>(out.size()) / vocab;
  for (int64_t p = 0; p < positions; ++p) {
    const float* o = out.data() + p * vocab;
    const double* r = ref.data() + p * vocab;
    const double err = rel_error(o, r, vocab);
    worst = std::max(worst, err);
    EXPECT_LT(err, bound) << what << " position " << p;
    const TopTwo rt = top_two(r, vocab);
    const int64_t best = top_two(o, vocab).best;
    if (rt.gap > kClearGap) {
      EXPECT_EQ(best, rt.best) << what << " argmax at position " << p << " (reference top-2 gap " << rt.gap << ")";
    } else if (best != rt.best) {
      std::printf("[ note ] %s: argmax differs at position %lld, within the reference's top-2 gap %.3g\n", what.c_str(),
                  static_cast<long long>(p), rt.gap);
    }
  }
  return worst;
}

std::vector<double> widen(const std::vector<float>& v) { return std::vector<double>(v.begin(), v.end()); }

// HF golden logits of one prompt, [tokens, vocab].
std::vector<double> golden_logits(const nlohmann::json& prompt) {
  std::vector<double> out;
  for (const auto& row : prompt["logits"]) {
    const auto r = row.get<std::vector<double>>();
    out.insert(out.end(), r.begin(), r.end());
  }
  return out;
}

std::vector<float> cpu_logits(const Model& model, KernelBackend& kernels, const std::vector<int32_t>& tokens) {
  SingleSequence seq(model, kernels, static_cast<int64_t>(tokens.size()));
  return seq.append(tokens, /*all_logits=*/true);
}

// The CUDA policy emulated over the scalar oracle (or `inner`, for large models).
std::vector<float> emulated_logits(const Model& model, const std::vector<int32_t>& tokens,
                                   std::unique_ptr<KernelBackend> inner = nullptr) {
  auto bf16_model = cuda_test::bf16_weight_model(model);
  cuda_test::Bf16InputBackend kernels(inner != nullptr ? std::move(inner) : make_ref_backend());
  return cpu_logits(*bf16_model, kernels, tokens);
}

// VOSTI_MODEL, else VOSTI_DEFAULT_MODEL (scripts/test sets it), else scripts/fetch-model's cache path.
std::string smollm2_path() {
  for (const char* var : {"VOSTI_MODEL", "VOSTI_DEFAULT_MODEL"}) {
    if (const char* env = std::getenv(var); env != nullptr && *env != '\0') return env;
  }
  if (const char* home = std::getenv("HOME"); home != nullptr) {
    return std::string(home) + "/.cache/vosti/models/SmolLM2-135M-Instruct.Q4_1.gguf";
  }
  return "";
}

std::shared_ptr<const Model> load_tiny(const std::string& name, nlohmann::json* golden) {
  *golden = read_json(kGoldenDir + "/data/" + name + ".json");
  auto model = Model::load(kGoldenDir + "/" + (*golden)["model"].get<std::string>(), f32_load_options());
  EXPECT_TRUE(model.ok()) << model.status().to_string();
  return model.ok() ? *model : nullptr;
}

std::string param_name(const ::testing::TestParamInfo<std::string>& info) {
  std::string s = info.param;
  for (auto& ch : s)
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  return s;
}

// Runs `tokens` on the GPU in the given chunk sizes (the last chunk takes the rest), all logits.
std::vector<float> gpu_logits(std::shared_ptr<const CudaModel> model, const std::vector<int32_t>& tokens,
                              const std::vector<int64_t>& chunks = {}, int block_size = 16,
                              DType kv_dtype = DType::kBF16) {
  auto seq = std::make_unique<cuda_test::CudaForwardFixture>(std::move(model), static_cast<int64_t>(tokens.size()),
                                                             block_size, kv_dtype);
  std::vector<float> all;
  size_t at = 0;
  for (size_t c = 0; at < tokens.size(); ++c) {
    const size_t n =
        c < chunks.size() ? std::min<size_t>(static_cast<size_t>(chunks[c]), tokens.size() - at) : tokens.size() - at;
    auto logits = seq->append(std::span<const int32_t>(tokens.data() + at, n), /*all_logits=*/true);
    EXPECT_TRUE(logits.ok()) << logits.status().to_string();
    if (!logits.ok()) return {};
    all.insert(all.end(), logits->begin(), logits->end());
    at += n;
  }
  return all;
}

// ---- CPU: the policy's own error, which sets kPolicyBound (runs without a GPU) ----

class Bf16Policy : public ::testing::TestWithParam<std::string> {};

TEST_P(Bf16Policy, EmulationMatchesTransformers) {
  nlohmann::json golden;
  auto model = load_tiny(GetParam(), &golden);
  ASSERT_NE(model, nullptr);
  const int64_t vocab = model->config().vocab_size;
  double worst = 0;
  for (const auto& prompt : golden["prompts"]) {
    const auto tokens = prompt["tokens"].get<std::vector<int32_t>>();
    worst = std::max(worst, compare(GetParam() + " emulation vs golden", emulated_logits(*model, tokens),
                                    golden_logits(prompt), vocab, kPolicyBound));
  }
  std::printf("[ bf16 policy ] %s: emulation vs transformers worst relative error %.3g\n", GetParam().c_str(), worst);
  // The same policy with other f32 reduction orders (the CPU backend's SIMD lanes and tiled
  // softmax instead of the oracle's sequential sums), as the GPU has: what kEmulationBound allows.
  ThreadPool pool(2);
  double worst_order = 0;
  for (const auto& prompt : golden["prompts"]) {
    const auto tokens = prompt["tokens"].get<std::vector<int32_t>>();
    worst_order = std::max(worst_order, compare(GetParam() + " emulation, CPU vs oracle reduction order",
                                                emulated_logits(*model, tokens, make_cpu_backend(&pool)),
                                                widen(emulated_logits(*model, tokens)), vocab, kEmulationBound));
  }
  std::printf("[ bf16 policy ] %s: emulation with two f32 reduction orders worst relative difference %.3g\n",
              GetParam().c_str(), worst_order);
  // The policy must really round: an emulation as exact as f32 would make the bounds meaningless.
  EXPECT_GT(worst, 1e-4);
}

INSTANTIATE_TEST_SUITE_P(Families, Bf16Policy, ::testing::ValuesIn(kTinyModels), param_name);

// The policy's error on the 30-layer SmolLM2-135M against the f32 CPU backend, which sets
// kRealModelBound.
TEST(Bf16PolicyRealModel, SmolLM2EmulationMatchesCpu) {
  const std::string path = smollm2_path();
  if (path.empty() || !std::filesystem::exists(path)) {
    GTEST_SKIP() << "SmolLM2 GGUF not found (set VOSTI_MODEL or run scripts/fetch-model)";
  }
  auto model = Model::load(path, f32_load_options());
  ASSERT_TRUE(model.ok()) << model.status().to_string();
  const int64_t vocab = (*model)->config().vocab_size;
  const auto golden = read_json(kGoldenDir + "/data/smollm2-135m-instruct-q4_1.json");
  ThreadPool pool(2);
  auto cpu = make_cpu_backend(&pool);
  double worst = 0;
  for (const auto& prompt : golden["prompts"]) {
    const auto tokens = prompt["tokens"].get<std::vector<int32_t>>();
    worst =
        std::max(worst, compare("SmolLM2 emulation vs CPU", emulated_logits(**model, tokens, make_cpu_backend(&pool)),
                                widen(cpu_logits(**model, *cpu, tokens)), vocab, kRealModelBound));
  }
  std::printf("[ bf16 policy ] SmolLM2-135M: emulation vs f32 CPU worst relative error %.3g\n", worst);
}

// ---- GPU ----

TEST(CudaModelErrors, NoDeviceIsNamed) {
  if (cuda_test::cuda_device_available()) GTEST_SKIP() << "a CUDA device is present: checks the no-device message only";
  nlohmann::json golden;
  auto model = load_tiny("llama-tiny", &golden);
  ASSERT_NE(model, nullptr);
  auto gpu = CudaModel::upload(*model);
  ASSERT_FALSE(gpu.ok());
  EXPECT_EQ(gpu.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(gpu.status().message().find("no CUDA device"), std::string::npos) << gpu.status().to_string();
}

class CudaGolden : public ::testing::TestWithParam<std::string> {};

TEST_P(CudaGolden, MatchesTransformersCpuAndEmulation) {
  VOSTI_SKIP_WITHOUT_CUDA();
  nlohmann::json golden;
  auto model = load_tiny(GetParam(), &golden);
  ASSERT_NE(model, nullptr);
  auto gpu = CudaModel::upload(*model);
  ASSERT_TRUE(gpu.ok()) << gpu.status().to_string();
  const int64_t vocab = model->config().vocab_size;
  ThreadPool pool(2);
  auto cpu = make_cpu_backend(&pool);
  double worst_golden = 0, worst_cpu = 0, worst_emulation = 0;
  for (const auto& prompt : golden["prompts"]) {
    const auto tokens = prompt["tokens"].get<std::vector<int32_t>>();
    const std::vector<float> out = gpu_logits(*gpu, tokens);
    ASSERT_EQ(out.size(), tokens.size() * static_cast<size_t>(vocab));
    const std::string what = GetParam() + " " + std::to_string(tokens.size()) + "-token prompt: GPU vs ";
    worst_golden = std::max(worst_golden, compare(what + "golden", out, golden_logits(prompt), vocab, kPolicyBound));
    worst_cpu = std::max(
        worst_cpu, compare(what + "CPU backend", out, widen(cpu_logits(*model, *cpu, tokens)), vocab, kPolicyBound));
    worst_emulation =
        std::max(worst_emulation,
                 compare(what + "bf16 emulation", out, widen(emulated_logits(*model, tokens)), vocab, kEmulationBound));
  }
  std::printf("[ cuda golden ] %s worst relative error: vs transformers %.3g, vs CPU %.3g, vs bf16 emulation %.3g\n",
              GetParam().c_str(), worst_golden, worst_cpu, worst_emulation);
}

INSTANTIATE_TEST_SUITE_P(Families, CudaGolden, ::testing::ValuesIn(kTinyModels), param_name);

class CudaGoldenMoe : public ::testing::TestWithParam<std::string> {};

// The MoE forward (router, grouped experts, combine) against the CUDA policy emulated on the CPU
// (the MoE layer of model/moe_layer.h over bf16-rounded weights and matmul inputs), bounded; the
// distance to transformers and to the f32 CPU backend printed only (see kTinyMoeModels).
TEST_P(CudaGoldenMoe, MatchesTheEmulatedPolicy) {
  VOSTI_SKIP_WITHOUT_CUDA();
  nlohmann::json golden;
  auto model = load_tiny(GetParam(), &golden);
  ASSERT_NE(model, nullptr);
  ASSERT_TRUE(model->config().has_moe());
  auto gpu = CudaModel::upload(*model);
  ASSERT_TRUE(gpu.ok()) << gpu.status().to_string();
  const int64_t vocab = model->config().vocab_size;
  ThreadPool pool(2);
  auto cpu = make_cpu_backend(&pool);
  double worst_emulation = 0, worst_golden = 0, worst_cpu = 0;
  for (const auto& prompt : golden["prompts"]) {
    const auto tokens = prompt["tokens"].get<std::vector<int32_t>>();
    const std::vector<float> out = gpu_logits(*gpu, tokens);
    ASSERT_EQ(out.size(), tokens.size() * static_cast<size_t>(vocab));
    const std::string what = GetParam() + " " + std::to_string(tokens.size()) + "-token prompt: GPU vs ";
    worst_emulation =
        std::max(worst_emulation,
                 compare(what + "bf16 emulation", out, widen(emulated_logits(*model, tokens)), vocab, kEmulationBound));
    const std::vector<double> g = golden_logits(prompt), c = widen(cpu_logits(*model, *cpu, tokens));
    for (size_t p = 0; p < tokens.size(); ++p) {
      worst_golden = std::max(worst_golden, rel_error(out.data() + p * vocab, g.data() + p * vocab, vocab));
      worst_cpu = std::max(worst_cpu, rel_error(out.data() + p * vocab, c.data() + p * vocab, vocab));
    }
  }
  std::printf(
      "[ cuda golden ] %s worst relative error: vs bf16 emulation %.3g (bounded); vs transformers %.3g, "
      "vs CPU %.3g (routing flips, not bounded)\n",
      GetParam().c_str(), worst_emulation, worst_golden, worst_cpu);
}

INSTANTIATE_TEST_SUITE_P(Families, CudaGoldenMoe, ::testing::ValuesIn(kTinyMoeModels), param_name);

class CudaInvariance : public ::testing::TestWithParam<std::string> {};

// The same prompt at once, one token at a time, in uneven chunks and with other block sizes
// (physical layouts): bit-identical logits at every position.
TEST_P(CudaInvariance, ChunkingAndBlockSizeGiveIdenticalBits) {
  VOSTI_SKIP_WITHOUT_CUDA();
  nlohmann::json golden;
  auto model = load_tiny(GetParam(), &golden);
  ASSERT_NE(model, nullptr);
  auto gpu = CudaModel::upload(*model);
  ASSERT_TRUE(gpu.ok()) << gpu.status().to_string();
  const int64_t vocab = model->config().vocab_size;
  std::mt19937 rng(17);
  std::vector<int32_t> tokens(100);  // crosses KV tiles 0..3 and several blocks
  for (auto& t : tokens) t = static_cast<int32_t>(rng() % static_cast<uint32_t>(vocab));
  const std::vector<float> whole = gpu_logits(*gpu, tokens);
  ASSERT_EQ(whole.size(), tokens.size() * static_cast<size_t>(vocab));
  const std::vector<std::pair<std::string, std::vector<float>>> variants = {
      {"one token at a time", gpu_logits(*gpu, tokens, std::vector<int64_t>(tokens.size(), 1))},
      {"chunks 1,5,2,31,33,rest", gpu_logits(*gpu, tokens, {1, 5, 2, 31, 33})},
      {"chunks 32,32,rest", gpu_logits(*gpu, tokens, {32, 32})},
      {"chunks 3,61,rest", gpu_logits(*gpu, tokens, {3, 61})},
      {"block size 1", gpu_logits(*gpu, tokens, {}, 1)},
      {"block size 7, chunks 9,40,rest", gpu_logits(*gpu, tokens, {9, 40}, 7)},
  };
  // The f32 pool is another deployment: close to the bf16 one, and chunk-invariant itself.
  const std::vector<float> f32_whole = gpu_logits(*gpu, tokens, {}, 16, DType::kF32);
  const std::vector<float> f32_chunked = gpu_logits(*gpu, tokens, {5, 27}, 16, DType::kF32);
  ASSERT_EQ(f32_whole.size(), whole.size());
  ASSERT_EQ(std::memcmp(f32_whole.data(), f32_chunked.data(), whole.size() * sizeof(float)), 0)
      << GetParam() << ": the f32 pool's chunked run differs";
  // (An MoE model's routers flip near-tied experts between the two deployments: not bounded.)
  if (!model->config().has_moe())
    compare(GetParam() + " f32 pool vs bf16 pool", f32_whole, widen(whole), vocab, kPolicyBound);
  for (const auto& [name, logits] : variants) {
    ASSERT_EQ(logits.size(), whole.size()) << name;
    for (size_t p = 0; p < tokens.size(); ++p) {
      ASSERT_EQ(std::memcmp(logits.data() + p * static_cast<size_t>(vocab),
                            whole.data() + p * static_cast<size_t>(vocab), static_cast<size_t>(vocab) * sizeof(float)),
                0)
          << GetParam() << " " << name << ": first differing position " << p;
    }
  }
  // The last-token-only path computes the same bits as the all-logits path.
  cuda_test::CudaForwardFixture seq(*gpu, static_cast<int64_t>(tokens.size()));
  auto last = seq.append(tokens, /*all_logits=*/false);
  ASSERT_TRUE(last.ok()) << last.status().to_string();
  ASSERT_EQ(last->size(), static_cast<size_t>(vocab));
  EXPECT_EQ(std::memcmp(last->data(), whole.data() + (tokens.size() - 1) * static_cast<size_t>(vocab),
                        static_cast<size_t>(vocab) * sizeof(float)),
            0);
}

INSTANTIATE_TEST_SUITE_P(Families, CudaInvariance, ::testing::ValuesIn(all_tiny_models()), param_name);

// CudaModel::load (straight from the file, bf16 kept as stored) and CudaModel::upload (the
// loaded f32 model) put the same weights on the device: the same logits bit for bit.
TEST_P(CudaInvariance, LoadFromFileEqualsUploadOfLoadedModel) {
  VOSTI_SKIP_WITHOUT_CUDA();
  nlohmann::json golden;
  auto model = load_tiny(GetParam(), &golden);
  ASSERT_NE(model, nullptr);
  auto uploaded = CudaModel::upload(*model);
  ASSERT_TRUE(uploaded.ok()) << uploaded.status().to_string();
  auto file = ModelFile::open(model->path());
  ASSERT_TRUE(file.ok()) << file.status().to_string();
  auto loaded = CudaModel::load(**file);
  ASSERT_TRUE(loaded.ok()) << loaded.status().to_string();
  EXPECT_EQ((*loaded)->num_weight_bytes(), (*uploaded)->num_weight_bytes());
  const auto tokens = golden["prompts"][0]["tokens"].get<std::vector<int32_t>>();
  const std::vector<float> a = gpu_logits(*uploaded, tokens), b = gpu_logits(*loaded, tokens);
  ASSERT_EQ(a.size(), b.size());
  EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0) << GetParam();
}

// SmolLM2-135M (GGUF, Q4_1 dequantised to f32 at load): GPU vs the CPU backend on the golden
// fixture's prompts. Only where the model file is present (it does not travel to the GPU machine).
TEST(CudaRealModel, SmolLM2MatchesCpu) {
  VOSTI_SKIP_WITHOUT_CUDA();
  const std::string path = smollm2_path();
  if (path.empty() || !std::filesystem::exists(path)) {
    GTEST_SKIP() << "SmolLM2 GGUF not found (set VOSTI_MODEL or run scripts/fetch-model); GPU vs CPU on it skipped";
  }
  auto model = Model::load(path, f32_load_options());
  ASSERT_TRUE(model.ok()) << model.status().to_string();
  auto gpu = CudaModel::upload(**model);
  ASSERT_TRUE(gpu.ok()) << gpu.status().to_string();
  const int64_t vocab = (*model)->config().vocab_size;
  const auto golden = read_json(kGoldenDir + "/data/smollm2-135m-instruct-q4_1.json");
  ThreadPool pool(2);
  auto cpu = make_cpu_backend(&pool);
  double worst = 0;
  for (const auto& prompt : golden["prompts"]) {
    const auto tokens = prompt["tokens"].get<std::vector<int32_t>>();
    const std::vector<float> out = gpu_logits(*gpu, tokens);
    worst = std::max(
        worst, compare("SmolLM2 GPU vs CPU", out, widen(cpu_logits(**model, *cpu, tokens)), vocab, kRealModelBound));
  }
  std::printf("[ cuda real model ] SmolLM2-135M GPU vs CPU worst relative error %.3g\n", worst);
}

// Mixture-of-experts models pass the support check (config only: no GPU needed); expert counts the
// MoE kernels cannot hold are refused, naming the limit.
TEST(CudaModelSupport, MixtureOfExpertsIsSupportedWithinTheKernelsLimits) {
  for (const char* name : {"qwen3-moe-tiny", "mixtral-tiny"}) {
    auto file = ModelFile::open(kGoldenDir + "/models/" + name);
    ASSERT_TRUE(file.ok()) << file.status().to_string();
    ModelConfig c = (*file)->config();
    EXPECT_TRUE(check_cuda_supported(c).ok()) << name << ": " << check_cuda_supported(c).to_string();
    for (LayerSpec& l : c.layers) l.moe.num_experts = kMaxMoeExperts + 8;
    const Status st = check_cuda_supported(c);
    ASSERT_FALSE(st.ok()) << name;
    EXPECT_NE(st.to_string().find("the MoE kernels take at most"), std::string::npos) << st.to_string();
  }
}

}  // namespace
}  // namespace vosti
