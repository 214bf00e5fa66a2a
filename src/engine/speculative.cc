#include "engine/speculative.h"

#include <algorithm>

#include "core/check.h"
#include "engine/engine.h"
#include "model/model.h"
#include "runner/load_device_model.h"

namespace vosti {

std::vector<int32_t> NgramDrafter::propose(std::span<const int32_t> tokens, int32_t max_tokens) const {
  const auto size = static_cast<int64_t>(tokens.size());
  if (max_tokens <= 0) return {};
  for (int64_t n = std::min<int64_t>(max_n_, size - 1); n >= min_n_; --n) {
    const std::span<const int32_t> suffix = tokens.subspan(static_cast<size_t>(size - n));
    // The most recent earlier occurrence: start j with j + n < size (not the suffix itself).
    for (int64_t j = size - n - 1; j >= 0; --j) {
      if (!std::equal(suffix.begin(), suffix.end(), tokens.begin() + j)) continue;
      const int64_t first = j + n;
      const int64_t last = std::min(size, first + max_tokens);
      return {tokens.begin() + first, tokens.begin() + last};
    }
  }
  return {};
}

namespace {

// A small model with the target's vocabulary, decoding greedily in an engine of its own.
class DraftModelDrafter final : public Drafter {
 public:
  explicit DraftModelDrafter(std::unique_ptr<Engine> engine) : engine_(std::move(engine)) {}
  std::vector<int32_t> propose(std::span<const int32_t> tokens, int32_t max_tokens) const override {
    const int64_t room = engine_->config().max_model_len - static_cast<int64_t>(tokens.size());
    const auto n = static_cast<int32_t>(std::min<int64_t>(max_tokens, room));
    if (n <= 0) return {};
    RequestSpec spec;
    spec.prompt.assign(tokens.begin(), tokens.end());
    spec.max_tokens = n;
    spec.ignore_eos = true;
    spec.sampling.temperature = 0.0f;
    spec.sampling.seed = 0;
    spec.sampling.logprobs = false;
    std::vector<int32_t> draft;
    bool done = false;
    auto id = engine_->add_request(std::move(spec), [&draft, &done](const RequestOutput& out) {
      draft.insert(draft.end(), out.new_tokens.begin(), out.new_tokens.end());
      done = done || out.finished;
    });
    if (!id.ok()) return {};
    while (!done && engine_->step()) {
    }
    return draft;
  }

 private:
  std::unique_ptr<Engine> engine_;  // driven by propose() on the target engine's step thread
};

Result<std::shared_ptr<const Drafter>> make_draft_model_drafter(const SpeculativeConfig& config,
                                                                const EngineConfig& target_config,
                                                                const ModelConfig& target) {
  // The draft model runs on the target's device, in an engine of its own with its own KV.
  Result<std::shared_ptr<const DeviceModel>> model = load_device_model(config.model, target_config.device);
  if (!model.ok()) return model.status().with_context("speculative_config: loading the draft model " + config.model);
  const ModelConfig& dc = (*model)->config();
  if (dc.vocab_size != target.vocab_size)
    return invalid_argument("speculative_config: the draft model " + config.model + " has a vocabulary of " +
                            std::to_string(dc.vocab_size) + " tokens, the target " + std::to_string(target.vocab_size) +
                            ": a draft model must share the target's tokenizer");
  EngineConfig c;
  c.device = target_config.device;
  c.backend = target_config.backend;
  c.kv_cache_dtype = target_config.kv_cache_dtype;
  c.cuda_graphs = target_config.cuda_graphs;
  c.block_size = target_config.block_size;
  c.max_model_len = target_config.max_model_len;
  c.num_threads = target_config.num_threads;
  c.max_num_seqs = 1;
  c.max_num_batched_tokens = 512;
  c.enable_prefix_caching = true;
  // One context and two blocks: a proposal runs alone, and the blocks the last one freed stay cached
  // (lazy eviction), so the next proposal's prompt, one verify step longer, hits them. On the GPU
  // the blocks are counted (the target's pool took its share of the memory first).
  const int64_t blocks = (static_cast<int64_t>(c.max_model_len) + c.block_size - 1) / c.block_size + 2;
  if (c.device == "cpu") {
    const int64_t bytes_per_token =
        2 * dc.num_layers * dc.num_kv_heads * dc.head_dim * static_cast<int64_t>(sizeof(float));
    c.kv_cache_bytes = blocks * c.block_size * bytes_per_token;
  } else {
    c.num_blocks = blocks;
  }
  auto engine = Engine::create(*model, c);
  if (!engine.ok()) return engine.status().with_context("speculative_config: the draft model's engine");
  return std::shared_ptr<const Drafter>(std::make_shared<const DraftModelDrafter>(std::move(engine).value()));
}

}  // namespace

Result<std::shared_ptr<const Drafter>> make_drafter(const SpeculativeConfig& config, const EngineConfig& engine_config,
                                                    const ModelConfig& target) {
  VOSTI_CHECK(config.enabled(), "make_drafter needs an enabled config");
  if (config.method == "draft_model") return make_draft_model_drafter(config, engine_config, target);
  return std::shared_ptr<const Drafter>(
      std::make_shared<const NgramDrafter>(config.prompt_lookup_min, config.prompt_lookup_max));
}

}  // namespace vosti
