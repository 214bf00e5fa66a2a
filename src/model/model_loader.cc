// Model::load: a ModelFile's tensors -> ModelConfig + weights. Matrices stay in the file's
// encoding, mapped, behind row tables (q/k rows in HF order by table, stacked q/k/v and
// gate/up as parts); vectors (norms, biases) are f32, mapped when stored as aligned f32,
// widened once otherwise. LoadOptions::f32_weights gives everything f32 data instead.
#include <cstring>

#include "core/quant_blocks.h"
#include "model/matrix_rows.h"
#include "model/model.h"
#include "model/model_file.h"

namespace vosti {

namespace {

class WeightBuilder {
 public:
  WeightBuilder(const ModelFile& file, bool f32_weights) : file_(file), f32_weights_(f32_weights) {}

  int64_t num_copied_bytes() const { return copied_; }

  // A vector (or, in f32 mode, any tensor) as f32; mapped when stored as aligned f32 that
  // needs no row reordering.
  Result<FloatTensor> get(WeightRole role, int64_t layer = -1, int64_t expert = -1) {
    VOSTI_ASSIGN_OR_RETURN(WeightView w, file_.view(role, layer, expert));
    FloatTensor t;
    t.shape = w.shape;
    if (w.type == WeightType::kF32 && reinterpret_cast<uintptr_t>(w.data) % alignof(float) == 0 &&
        !file_.needs_conversion(role)) {
      t.data = reinterpret_cast<const float*>(w.data);
      t.owner = w.owner;
      return t;
    }
    VOSTI_ASSIGN_OR_RETURN(std::vector<float> values, file_.read_f32(role, layer, expert));
    auto buf = std::make_shared<std::vector<float>>(std::move(values));
    copied_ += static_cast<int64_t>(buf->size() * sizeof(float));
    t.data = buf->data();
    t.owner = buf;
    return t;
  }

  // A [rows, cols] matrix made of the rows of `roles` stacked (q, k, v; gate, up; or one
  // role), each role's rows read in its stored encoding (one part each); `expert` for the expert
  // roles.
  Result<FloatTensor> matrix(std::initializer_list<WeightRole> roles, int64_t layer = -1, int64_t expert = -1) {
    if (f32_weights_) return stack_f32(roles, layer, expert);
    auto tables = std::make_shared<MatrixRowTables>();
    FloatTensor t;
    int64_t cols = 0;
    for (WeightRole role : roles) {
      VOSTI_ASSIGN_OR_RETURN(WeightView w, file_.view(role, layer, expert));
      if (!is_decodable(w.type)) {
        const WeightTypeTraits* traits = weight_type_traits(static_cast<uint32_t>(w.type));
        return unimplemented("tensor " + w.name + " is stored as " + std::string(traits ? traits->name : "?") +
                             ", which the CPU kernels do not read (F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, " +
                             "Q4_K, Q5_K, Q6_K are)");
      }
      const int64_t rows = w.shape[0];
      cols = w.shape[1];
      const BlockLayout layout = block_layout(w.type);
      if (cols % layout.elems != 0 || static_cast<int64_t>(w.num_bytes) != rows * row_bytes(w.type, cols))
        return invalid_argument("tensor " + w.name + ": " + std::to_string(w.num_bytes) + " bytes do not hold " +
                                std::to_string(rows) + " rows of " + std::to_string(cols) + " values");
      const int64_t rb = row_bytes(w.type, cols);
      // HF row r of a llama.cpp-permuted q/k head lies at stored row 2i + j (r = j * hd/2 + i).
      const bool unpermute = file_.needs_row_unpermute(role);
      const int64_t hd = unpermute ? rows / file_.unpermute_heads(role) : 1;
      for (int64_t r = 0; r < rows; ++r) {
        int64_t stored = r;
        if (unpermute) {
          const int64_t head = r / hd, j = (r % hd) / (hd / 2), i = r % (hd / 2);
          stored = head * hd + 2 * i + j;
        }
        tables->rows.push_back(w.data + stored * rb);
      }
      tables->part_types.push_back(w.type);
      tables->part_rows.push_back(rows);
      tables->owners.push_back(w.owner);
    }
    t.shape = {static_cast<int64_t>(tables->rows.size()), cols};
    attach_matrix(t, std::move(tables), cols);
    return t;
  }

 private:
  // Rows of several tensors widened to f32 and stacked into one owned [sum rows, cols] tensor.
  Result<FloatTensor> stack_f32(std::initializer_list<WeightRole> roles, int64_t layer, int64_t expert) {
    if (roles.size() == 1) return get(*roles.begin(), layer, expert);
    int64_t total = 0, rows = 0, cols = 1;
    for (WeightRole role : roles) {
      const std::vector<int64_t> s = file_.expected_shape(role);
      total += s.size() == 2 ? s[0] * s[1] : s[0];
    }
    auto buf = std::make_shared<std::vector<float>>(static_cast<size_t>(total));
    int64_t offset = 0;
    for (WeightRole role : roles) {
      VOSTI_ASSIGN_OR_RETURN(std::vector<float> part, file_.read_f32(role, layer, expert));
      std::memcpy(buf->data() + offset, part.data(), part.size() * sizeof(float));
      const std::vector<int64_t> s = file_.expected_shape(role);
      rows += s[0];
      cols = s.size() == 2 ? s[1] : 1;
      offset += static_cast<int64_t>(part.size());
    }
    copied_ += static_cast<int64_t>(buf->size() * sizeof(float));
    FloatTensor t;
    t.shape = {rows, cols};
    t.data = buf->data();
    t.owner = buf;
    return t;
  }

  const ModelFile& file_;
  bool f32_weights_;
  int64_t copied_ = 0;
};

// Biases of q, k, v stacked into one owned f32 vector (small).
Result<FloatTensor> stacked_bias(WeightBuilder& b, int64_t layer) {
  auto buf = std::make_shared<std::vector<float>>();
  for (WeightRole role : {WeightRole::kQBias, WeightRole::kKBias, WeightRole::kVBias}) {
    VOSTI_ASSIGN_OR_RETURN(FloatTensor part, b.get(role, layer));
    buf->insert(buf->end(), part.data, part.data + part.num_elements());
  }
  FloatTensor t;
  t.shape = {static_cast<int64_t>(buf->size())};
  t.data = buf->data();
  t.owner = buf;
  return t;
}

Result<ModelWeights> build_weights(WeightBuilder& b, const ModelFile& file, const LoadOptions& options) {
  const ModelConfig& c = file.config();
  ModelWeights w;
  VOSTI_ASSIGN_OR_RETURN(w.embed, b.matrix({WeightRole::kEmbed}));
  VOSTI_ASSIGN_OR_RETURN(w.final_norm, b.get(WeightRole::kFinalNorm));
  if (c.tie_word_embeddings && !file.has(WeightRole::kLmHead)) {
    w.lm_head = w.embed;
  } else {
    VOSTI_ASSIGN_OR_RETURN(w.lm_head, b.matrix({WeightRole::kLmHead}));
  }
  for (int64_t i = 0; i < c.num_layers; ++i) {
    LayerWeights l;
    VOSTI_ASSIGN_OR_RETURN(l.attn_norm, b.get(WeightRole::kAttnNorm, i));
    VOSTI_ASSIGN_OR_RETURN(l.wqkv, b.matrix({WeightRole::kQ, WeightRole::kK, WeightRole::kV}, i));
    if (c.qkv_bias) {
      VOSTI_ASSIGN_OR_RETURN(l.bqkv, stacked_bias(b, i));
    }
    if (c.qk_norm) {
      VOSTI_ASSIGN_OR_RETURN(l.q_norm, b.get(WeightRole::kQNorm, i));
      VOSTI_ASSIGN_OR_RETURN(l.k_norm, b.get(WeightRole::kKNorm, i));
    }
    VOSTI_ASSIGN_OR_RETURN(l.wo, b.matrix({WeightRole::kO}, i));
    const LayerSpec& spec = c.layers[static_cast<size_t>(i)];
    if (spec.post_attn_norm) {
      VOSTI_ASSIGN_OR_RETURN(l.post_attn_norm, b.get(WeightRole::kPostAttnNorm, i));
    }
    VOSTI_ASSIGN_OR_RETURN(l.ffn_norm, b.get(WeightRole::kFfnNorm, i));
    if (spec.moe.enabled()) {
      VOSTI_ASSIGN_OR_RETURN(l.router, b.matrix({WeightRole::kRouter}, i));
      for (int64_t e = 0; e < spec.moe.num_experts; ++e) {
        VOSTI_ASSIGN_OR_RETURN(FloatTensor gate_up, b.matrix({WeightRole::kExpertGate, WeightRole::kExpertUp}, i, e));
        VOSTI_ASSIGN_OR_RETURN(FloatTensor down, b.matrix({WeightRole::kExpertDown}, i, e));
        l.expert_gate_up.push_back(std::move(gate_up));
        l.expert_down.push_back(std::move(down));
      }
    } else {
      VOSTI_ASSIGN_OR_RETURN(l.w_gate_up, b.matrix({WeightRole::kGate, WeightRole::kUp}, i));
      VOSTI_ASSIGN_OR_RETURN(l.w_down, b.matrix({WeightRole::kDown}, i));
    }
    if (spec.post_ffn_norm) {
      VOSTI_ASSIGN_OR_RETURN(l.post_ffn_norm, b.get(WeightRole::kPostFfnNorm, i));
    }
    w.layers.push_back(std::move(l));
    if (options.on_progress) options.on_progress(i + 1, c.num_layers);
  }
  return w;
}

}  // namespace

Result<std::shared_ptr<const Model>> Model::load(const ModelFile& file, const LoadOptions& options) {
  WeightBuilder builder(file, options.f32_weights);
  auto weights = build_weights(builder, file, options);
  if (!weights.ok()) return weights.status().with_context(file.path());
  return std::shared_ptr<const Model>(
      std::make_shared<Model>(file.path(), file.config(), std::move(weights).value(), builder.num_copied_bytes()));
}

Result<std::shared_ptr<const Model>> Model::load(const std::string& path, const LoadOptions& options) {
  VOSTI_ASSIGN_OR_RETURN(std::shared_ptr<const ModelFile> file, ModelFile::open(path));
  return load(*file, options);
}

}  // namespace vosti
