// Model::load: a ModelFile's tensors -> ModelConfig + f32 weights (mapped where the file
// stores aligned f32 in HF row order, dequantised or widened copies otherwise).
#include <cstring>

#include "model/model.h"
#include "model/model_file.h"

namespace vosti {

namespace {

class WeightBuilder {
 public:
  explicit WeightBuilder(const ModelFile& file) : file_(file) {}

  int64_t num_copied_bytes() const { return copied_; }

  // The tensor as f32; mapped when stored as aligned f32 that needs no row reordering.
  Result<FloatTensor> get(WeightRole role, int64_t layer = -1) {
    VOSTI_ASSIGN_OR_RETURN(WeightView w, file_.view(role, layer));
    FloatTensor t;
    t.shape = w.shape;
    if (w.type == WeightType::kF32 && reinterpret_cast<uintptr_t>(w.data) % alignof(float) == 0 &&
        !file_.needs_row_unpermute(role)) {
      t.data = reinterpret_cast<const float*>(w.data);
      t.owner = w.owner;
      return t;
    }
    VOSTI_ASSIGN_OR_RETURN(std::vector<float> values, file_.read_f32(role, layer));
    auto buf = std::make_shared<std::vector<float>>(std::move(values));
    copied_ += static_cast<int64_t>(buf->size() * sizeof(float));
    t.data = buf->data();
    t.owner = buf;
    return t;
  }

  // Rows of several tensors stacked into one [sum rows, cols] tensor (e.g. q, k, v).
  Result<FloatTensor> stack(std::initializer_list<WeightRole> roles, int64_t layer) {
    int64_t total = 0, rows = 0, cols = 1;
    std::vector<int64_t> first_shape;
    for (WeightRole role : roles) {
      const std::vector<int64_t> s = file_.expected_shape(role);
      total += s.size() == 2 ? s[0] * s[1] : s[0];
      if (first_shape.empty()) first_shape = s;
    }
    auto buf = std::make_shared<std::vector<float>>(static_cast<size_t>(total));
    int64_t offset = 0;
    for (WeightRole role : roles) {
      VOSTI_ASSIGN_OR_RETURN(std::vector<float> part, file_.read_f32(role, layer));
      std::memcpy(buf->data() + offset, part.data(), part.size() * sizeof(float));
      const std::vector<int64_t> s = file_.expected_shape(role);
      rows += s[0];
      cols = s.size() == 2 ? s[1] : 1;
      offset += static_cast<int64_t>(part.size());
    }
    copied_ += static_cast<int64_t>(buf->size() * sizeof(float));
    FloatTensor t;
    t.shape = first_shape.size() == 2 ? std::vector<int64_t>{rows, cols} : std::vector<int64_t>{rows};
    t.data = buf->data();
    t.owner = buf;
    return t;
  }

 private:
  const ModelFile& file_;
  int64_t copied_ = 0;
};

Result<ModelWeights> build_weights(WeightBuilder& b, const ModelFile& file, const LoadOptions& options) {
  const ModelConfig& c = file.config();
  ModelWeights w;
  VOSTI_ASSIGN_OR_RETURN(w.embed, b.get(WeightRole::kEmbed));
  VOSTI_ASSIGN_OR_RETURN(w.final_norm, b.get(WeightRole::kFinalNorm));
  if (c.tie_word_embeddings && !file.has(WeightRole::kLmHead)) {
    w.lm_head = w.embed;
  } else {
    VOSTI_ASSIGN_OR_RETURN(w.lm_head, b.get(WeightRole::kLmHead));
  }
  for (int64_t i = 0; i < c.num_layers; ++i) {
    LayerWeights l;
    VOSTI_ASSIGN_OR_RETURN(l.attn_norm, b.get(WeightRole::kAttnNorm, i));
    VOSTI_ASSIGN_OR_RETURN(l.wqkv, b.stack({WeightRole::kQ, WeightRole::kK, WeightRole::kV}, i));
    if (c.qkv_bias) {
      VOSTI_ASSIGN_OR_RETURN(l.bqkv, b.stack({WeightRole::kQBias, WeightRole::kKBias, WeightRole::kVBias}, i));
    }
    if (c.qk_norm) {
      VOSTI_ASSIGN_OR_RETURN(l.q_norm, b.get(WeightRole::kQNorm, i));
      VOSTI_ASSIGN_OR_RETURN(l.k_norm, b.get(WeightRole::kKNorm, i));
    }
    VOSTI_ASSIGN_OR_RETURN(l.wo, b.get(WeightRole::kO, i));
    VOSTI_ASSIGN_OR_RETURN(l.ffn_norm, b.get(WeightRole::kFfnNorm, i));
    VOSTI_ASSIGN_OR_RETURN(l.w_gate_up, b.stack({WeightRole::kGate, WeightRole::kUp}, i));
    VOSTI_ASSIGN_OR_RETURN(l.w_down, b.get(WeightRole::kDown, i));
    w.layers.push_back(std::move(l));
    if (options.on_progress) options.on_progress(i + 1, c.num_layers);
  }
  return w;
}

}  // namespace

Result<std::shared_ptr<const Model>> Model::load(const std::string& path, const LoadOptions& options) {
  VOSTI_ASSIGN_OR_RETURN(std::shared_ptr<const ModelFile> file, ModelFile::open(path));
  return load(*file, options);
}

Result<std::shared_ptr<const Model>> Model::load(const ModelFile& file, const LoadOptions& options) {
  WeightBuilder builder(file);
  auto weights = build_weights(builder, file, options);
  if (!weights.ok()) return weights.status().with_context(file.path());
  return std::shared_ptr<const Model>(
      std::make_shared<Model>(file.path(), file.config(), std::move(weights).value(), builder.num_copied_bytes()));
}

}  // namespace vosti
