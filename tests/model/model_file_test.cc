// ModelFile (model/model_file.h): the tensors a GPU upload reads as bf16 are the CPU loader's
// f32 values rounded once (or, stored as bf16, copied bit for bit), with llama.cpp's q/k row
// order undone, for safetensors (f32 and bf16, sharded) and GGUF (the default model's Q4_1).
#include "model/model_file.h"

#include <gtest/gtest.h>

#include <cstring>

#include "core/dtype.h"
#include "model/model.h"
#include "tests/io/test_files.h"
#include "tests/test_paths.h"

namespace vosti {
namespace {

const std::string kModels = vosti::testing::source_dir() + "/tests/golden/models";

// The loaded model's f32 values of `role` in `layer` (the stacked tensors sliced back).
std::vector<float> loaded(const Model& m, WeightRole role, int64_t layer) {
  const ModelConfig& c = m.config();
  const int64_t H = c.hidden_size, q = c.num_heads * c.head_dim, kv = c.num_kv_heads * c.head_dim;
  const auto rows = [](const FloatTensor& t, int64_t r0, int64_t n, int64_t cols) {
    return std::vector<float>(t.data + r0 * cols, t.data + (r0 + n) * cols);
  };
  const auto whole = [](const FloatTensor& t) { return std::vector<float>(t.data, t.data + t.num_elements()); };
  const ModelWeights& w = m.weights();
  if (role == WeightRole::kEmbed) return whole(w.embed);
  const LayerWeights& l = w.layers[static_cast<size_t>(layer)];
  switch (role) {
    case WeightRole::kQ:
      return rows(l.wqkv, 0, q, H);
    case WeightRole::kK:
      return rows(l.wqkv, q, kv, H);
    case WeightRole::kV:
      return rows(l.wqkv, q + kv, kv, H);
    case WeightRole::kO:
      return whole(l.wo);
    case WeightRole::kUp:
      return rows(l.w_gate_up, c.intermediate_size, c.intermediate_size, H);
    case WeightRole::kDown:
      return whole(l.w_down);
    default:
      return whole(l.attn_norm);
  }
}

void check_model(const std::string& path) {
  auto file = ModelFile::open(path);
  ASSERT_TRUE(file.ok()) << file.status().to_string();
  auto model = Model::load(path, f32_load_options());
  ASSERT_TRUE(model.ok()) << model.status().to_string();
  const int64_t last = (*file)->config().num_layers - 1;
  for (const auto& [role, layer] : std::vector<std::pair<WeightRole, int64_t>>{{WeightRole::kEmbed, -1},
                                                                               {WeightRole::kQ, 0},
                                                                               {WeightRole::kK, last},
                                                                               {WeightRole::kV, 0},
                                                                               {WeightRole::kO, last},
                                                                               {WeightRole::kUp, 0},
                                                                               {WeightRole::kDown, last},
                                                                               {WeightRole::kAttnNorm, 0}}) {
    const std::vector<float> want = loaded(**model, role, layer);
    auto f32 = (*file)->read_f32(role, layer);
    auto bf16 = (*file)->read_bf16(role, layer);
    ASSERT_TRUE(f32.ok() && bf16.ok()) << path;
    ASSERT_EQ(f32->size(), want.size()) << path << " role " << static_cast<int>(role);
    ASSERT_EQ(std::memcmp(f32->data(), want.data(), want.size() * sizeof(float)), 0)
        << path << " role " << static_cast<int>(role) << ": read_f32 differs from Model::load";
    for (size_t i = 0; i < want.size(); ++i)
      ASSERT_EQ((*bf16)[i], f32_to_bf16(want[i])) << path << " role " << static_cast<int>(role) << " element " << i;
  }
}

TEST(ModelFile, Bf16IsTheLoadersF32RoundedOnceSafetensors) {
  for (const char* name : {"llama-tiny", "qwen2-tiny-bf16", "qwen3-tiny", "llama3-tiny-tied-sharded"})
    check_model(kModels + "/" + name);
}

TEST(ModelFile, Bf16IsTheLoadersF32RoundedOnceGguf) {
  const std::string path = testing::default_model();
  if (path.empty()) GTEST_SKIP() << "VOSTI_DEFAULT_MODEL is not set (scripts/test sets it)";
  check_model(path);  // Q4_1 dequantised, Llama q/k rows unpermuted
}

TEST(ModelFile, MissingPathIsNamed) {
  auto f = ModelFile::open("/nonexistent/model-dir");
  ASSERT_FALSE(f.ok());
  EXPECT_NE(f.status().message().find("/nonexistent/model-dir"), std::string::npos);
}

}  // namespace
}  // namespace vosti
