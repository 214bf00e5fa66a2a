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

namespace vosti {
namespace {

// Mixture of experts: one tensor an expert, named as the Hub names them or sliced from a GGUF's
// stacked ffn_*_exps; both files of the tiny Qwen3-MoE hold the same values for every tensor.
TEST(ModelFile, ExpertsAreOneTensorAnExpertInEitherFormat) {
  auto st = ModelFile::open(kModels + "/qwen3-moe-tiny");
  auto gg = ModelFile::open(kModels + "/qwen3-moe-tiny.gguf");
  ASSERT_TRUE(st.ok() && gg.ok());
  const ModelConfig& c = (*st)->config();
  const std::vector<TensorSlot> slots = (*st)->tensor_slots();
  ASSERT_EQ(slots.size(), (*gg)->tensor_slots().size());
  int64_t experts = 0;
  for (const TensorSlot& s : slots) {
    experts += s.expert >= 0 ? 1 : 0;
    auto a = (*st)->read_f32(s.role, s.layer, s.expert);
    auto b = (*gg)->read_f32(s.role, s.layer, s.expert);
    ASSERT_TRUE(a.ok() && b.ok()) << (*st)->tensor_name(s.role, s.layer, s.expert);
    ASSERT_EQ(*a, *b) << (*st)->tensor_name(s.role, s.layer, s.expert);
  }
  EXPECT_EQ(experts, c.num_layers * c.moe().num_experts * 3);
  auto found = (*gg)->find_tensor("model.layers.2.mlp.experts.7.down_proj.weight");
  ASSERT_TRUE(found.ok()) << found.status().to_string();
  EXPECT_EQ(found->role, WeightRole::kExpertDown);
  EXPECT_EQ(found->layer, 2);
  EXPECT_EQ(found->expert, 7);
  found = (*gg)->find_tensor("blk.1.ffn_up_exps.weight[3]");
  ASSERT_TRUE(found.ok()) << found.status().to_string();
  EXPECT_EQ(found->role, WeightRole::kExpertUp);
  EXPECT_EQ(found->expert, 3);
  auto outside = (*gg)->view(WeightRole::kExpertGate, 0, 8);
  ASSERT_FALSE(outside.ok());
  EXPECT_NE(outside.status().to_string().find("expert 8"), std::string::npos) << outside.status().to_string();
  // The f32 loader's expert matrices are the files' values (gate rows, then up rows).
  auto model = Model::load(kModels + "/qwen3-moe-tiny", f32_load_options());
  ASSERT_TRUE(model.ok()) << model.status().to_string();
  const int64_t I = c.moe().intermediate_size, H = c.hidden_size;
  const FloatTensor& gate_up = (*model)->weights().layers[1].expert_gate_up[5];
  auto up = (*st)->read_f32(WeightRole::kExpertUp, 1, 5);
  ASSERT_TRUE(up.ok());
  EXPECT_EQ(std::vector<float>(gate_up.data + I * H, gate_up.data + 2 * I * H), *up);
}

TEST(ModelFile, MixtralNamesItsExpertsW1W3W2) {
  auto f = ModelFile::open(kModels + "/mixtral-tiny");
  ASSERT_TRUE(f.ok()) << f.status().to_string();
  auto up = (*f)->find_tensor("model.layers.1.block_sparse_moe.experts.2.w3.weight");
  ASSERT_TRUE(up.ok()) << up.status().to_string();
  EXPECT_EQ(up->role, WeightRole::kExpertUp);
  EXPECT_EQ(up->expert, 2);
  auto router = (*f)->find_tensor("model.layers.0.block_sparse_moe.gate.weight");
  ASSERT_TRUE(router.ok()) << router.status().to_string();
  EXPECT_EQ(router->role, WeightRole::kRouter);
  EXPECT_FALSE((*f)->has(WeightRole::kGate, 0));  // no dense MLP in an MoE layer
}

// A weight update of one expert replaces that expert only.
TEST(ModelFile, AWeightUpdateReplacesOneExpert) {
  auto f = ModelFile::open(kModels + "/mixtral-tiny");
  ASSERT_TRUE(f.ok());
  const MoeSpec moe = (*f)->config().moe();
  std::vector<float> zeros(static_cast<size_t>(moe.intermediate_size * (*f)->config().hidden_size), 0.0f);
  ReplacementTensor t;
  t.name = "model.layers.0.block_sparse_moe.experts.1.w1.weight";
  t.shape = {moe.intermediate_size, (*f)->config().hidden_size};
  t.data = reinterpret_cast<const uint8_t*>(zeros.data());
  t.num_bytes = zeros.size() * sizeof(float);
  auto updated = ModelFile::with_replaced(*f, {t});
  ASSERT_TRUE(updated.ok()) << updated.status().to_string();
  EXPECT_TRUE((*updated)->is_replaced(WeightRole::kExpertGate, 0, 1));
  EXPECT_FALSE((*updated)->is_replaced(WeightRole::kExpertGate, 0, 0));
  auto now = (*updated)->read_f32(WeightRole::kExpertGate, 0, 1);
  ASSERT_TRUE(now.ok());
  EXPECT_EQ(*now, zeros);
  auto other = (*updated)->read_f32(WeightRole::kExpertGate, 0, 2);
  auto before = (*f)->read_f32(WeightRole::kExpertGate, 0, 2);
  ASSERT_TRUE(other.ok() && before.ok());
  EXPECT_EQ(*other, *before);
}

}  // namespace
}  // namespace vosti
