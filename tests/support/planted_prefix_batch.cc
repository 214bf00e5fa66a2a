// The paper protocol's planted engine variants (tests/support/planted.h): a CPU attention whose
// KV split follows the batch, a runner whose chunk after a prefix-cache hit writes its KV
// under another rounding (a block computed under a different chunking), and a runner whose
// structured-output mask fill follows the batch. Test-only.
#include <algorithm>
#include <cmath>
#include <unordered_set>
#include <vector>

#include "core/dtype.h"
#include "runner/cpu/cpu_runner.h"
#include "sample/token_bitmask.h"
#include "tests/support/planted.h"
#include "tests/support/wrapped_cpu_backend.h"

namespace vosti {
namespace {

// Attention in KV tiles of `tile` logical positions merged left to right (online softmax), one
// query and head at a time: the kernel contract's order, with the tile width as a parameter.
void tiled_attention(const float* q, int64_t m, int num_heads, const AttentionQuery* queries, PagedKvView kv,
                     float scale, float* out, int32_t tile) {
  const int hd = kv.head_dim, group = num_heads / kv.num_kv_heads;
  std::vector<float> acc(static_cast<size_t>(hd)), part(static_cast<size_t>(hd)), scores;
  for (int64_t i = 0; i < m; ++i) {
    const AttentionQuery& a = queries[i];
    for (int h = 0; h < num_heads; ++h) {
      const float* qv = q + (i * num_heads + h) * hd;
      const auto at = [&](const float* base, int32_t p) {
        const int64_t slot = static_cast<int64_t>(a.block_table[p / kv.block_size]) * kv.block_size + p % kv.block_size;
        return base + (slot * kv.num_kv_heads + h / group) * hd;
      };
      float run_max = -INFINITY, run_sum = 0;
      std::fill(acc.begin(), acc.end(), 0.0f);
      for (int32_t t0 = a.first / tile * tile; t0 <= a.position; t0 += tile) {
        const int32_t lo = std::max(t0, a.first), hi = std::min(t0 + tile - 1, a.position);
        scores.assign(static_cast<size_t>(hi - lo + 1), 0.0f);
        float tile_max = -INFINITY;
        for (int32_t p = lo; p <= hi; ++p) {
          const float* k = at(kv.k, p);
          float s = 0;
          for (int d = 0; d < hd; ++d) s += qv[d] * k[d];
          scores[static_cast<size_t>(p - lo)] = s * scale;
          tile_max = std::max(tile_max, s * scale);
        }
        float tile_sum = 0;
        std::fill(part.begin(), part.end(), 0.0f);
        for (int32_t p = lo; p <= hi; ++p) {
          const float e = std::exp(scores[static_cast<size_t>(p - lo)] - tile_max);
          const float* v = at(kv.v, p);
          tile_sum += e;
          for (int d = 0; d < hd; ++d) part[static_cast<size_t>(d)] += e * v[d];
        }
        const float next_max = std::max(run_max, tile_max);
        const float a_old = std::exp(run_max - next_max), a_new = std::exp(tile_max - next_max);
        run_sum = run_sum * a_old + tile_sum * a_new;
        for (int d = 0; d < hd; ++d)
          acc[static_cast<size_t>(d)] = acc[static_cast<size_t>(d)] * a_old + part[static_cast<size_t>(d)] * a_new;
        run_max = next_max;
      }
      float* o = out + (i * num_heads + h) * hd;
      for (int d = 0; d < hd; ++d) o[d] = acc[static_cast<size_t>(d)] / run_sum;
    }
  }
}

// The planted variants: the CPU backend (wrapped_cpu_backend.h) with its attention replaced, or its
// KV writes watched.
class BatchSplitBackend final : public WrappedCpuBackend {
 public:
  using WrappedCpuBackend::WrappedCpuBackend;
  std::string_view name() const override { return "cpu-planted-attention-split-follows-the-batch"; }
  void attention(const float* q, int64_t m, int num_heads, const AttentionQuery* queries, PagedKvView kv, float scale,
                 float* out) override {
    std::unordered_set<const int32_t*> sequences;  // a sequence's queries share its block table
    for (int64_t i = 0; i < m; ++i) sequences.insert(queries[i].block_table);
    const int32_t tile = sequences.size() > 1 ? 2 * kKvTile : kKvTile;  // the planted bug
    tiled_attention(q, m, num_heads, queries, kv, scale, out, tile);
  }
};

// The slots the step's chunks that resume after a prefix-cache hit write (set by HitRunner).
using HitSlots = std::unordered_set<int32_t>;

class HitChunkingBackend final : public WrappedCpuBackend {
 public:
  HitChunkingBackend(ThreadPool* pool, std::shared_ptr<const HitSlots> slots)
      : WrappedCpuBackend(pool), slots_(std::move(slots)) {}
  std::string_view name() const override { return "cpu-planted-kv-after-hit-rounded"; }
  void kv_write(const float* k_new, const float* v_new, int64_t m, const int32_t* slots, PagedKvView kv) override {
    if (slots_->empty()) return inner_->kv_write(k_new, v_new, m, slots, kv);
    const int64_t row = static_cast<int64_t>(kv.num_kv_heads) * kv.head_dim;
    k_.assign(k_new, k_new + m * row);  // [m, num_kv_heads, head_dim]
    v_.assign(v_new, v_new + m * row);
    for (int64_t r = 0; r < m; ++r) {
      if (!slots_->contains(slots[r])) continue;
      for (int64_t j = r * row; j < (r + 1) * row; ++j) {  // the planted bug: this chunk's KV is rounded
        k_[static_cast<size_t>(j)] = bf16_to_f32(f32_to_bf16(k_[static_cast<size_t>(j)]));
        v_[static_cast<size_t>(j)] = bf16_to_f32(f32_to_bf16(v_[static_cast<size_t>(j)]));
      }
    }
    inner_->kv_write(k_.data(), v_.data(), m, slots, kv);
  }

 private:
  std::shared_ptr<const HitSlots> slots_;
  std::vector<float> k_, v_;  // [m, num_kv_heads, head_dim] copies
};

// A CpuRunner that tells its backend which slots the chunks resuming after a hit write.
class HitRunner final : public ModelRunner {
 public:
  HitRunner(std::unique_ptr<ModelRunner> inner, std::shared_ptr<HitSlots> slots, int32_t block_size)
      : inner_(std::move(inner)), slots_(std::move(slots)), block_size_(block_size) {}
  Result<StepResult> execute(const StepPlan& plan, std::span<const RequestLogitsTask> tasks) override {
    slots_->clear();
    for (const ScheduledRequest& r : plan.requests) {
      if (!r.newly_admitted || r.num_cached_tokens == 0) continue;
      for (int32_t p = r.num_computed_tokens; p < r.num_computed_tokens + r.num_new_tokens; ++p)
        slots_->insert(r.block_table[static_cast<size_t>(p / block_size_)] * block_size_ + p % block_size_);
    }
    return inner_->execute(plan, tasks);
  }
  const RunnerInfo& info() const override { return inner_->info(); }

 private:
  std::unique_ptr<ModelRunner> inner_;
  std::shared_ptr<HitSlots> slots_;
  int32_t block_size_;
};

class PlantedCpuModel final : public DeviceModel {
 public:
  enum class Kind : uint8_t { kBatchSplit, kHitChunking, kBatchMask };
  PlantedCpuModel(std::shared_ptr<const Model> model, Kind kind) : model_(std::move(model)), kind_(kind) {}
  const ModelConfig& config() const override { return model_->config(); }
  const std::string& path() const override { return model_->path(); }
  std::string device() const override { return "cpu"; }
  Result<std::unique_ptr<ModelRunner>> make_runner(const EngineConfig& config) const override {
    if (kind_ == Kind::kBatchMask) {
      CpuRunnerHooks hooks;
      hooks.apply_mask = [](std::span<float> row, std::span<const uint32_t> mask, int64_t num_seqs) {
        const float fill = num_seqs > 1 ? -1e30f : -INFINITY;  // the planted bug: the fill follows the batch
        for (size_t t = 0; t < row.size(); ++t)
          if (!token_allowed(mask.data(), static_cast<int32_t>(t))) row[t] = fill;
      };
      return CpuRunner::create(
          model_, config, [](ThreadPool* pool) { return make_cpu_backend(pool); }, hooks);
    }
    if (kind_ == Kind::kBatchSplit)
      return CpuRunner::create(model_, config, [](ThreadPool* pool) -> Result<std::unique_ptr<KernelBackend>> {
        return std::unique_ptr<KernelBackend>(new BatchSplitBackend(pool));
      });
    auto slots = std::make_shared<HitSlots>();
    VOSTI_ASSIGN_OR_RETURN(std::unique_ptr<ModelRunner> inner,
                           CpuRunner::create(model_, config, [slots](ThreadPool* pool) {
                             return Result<std::unique_ptr<KernelBackend>>(
                                 std::unique_ptr<KernelBackend>(new HitChunkingBackend(pool, slots)));
                           }));
    return std::unique_ptr<ModelRunner>(new HitRunner(std::move(inner), slots, config.block_size));
  }

 private:
  std::shared_ptr<const Model> model_;
  Kind kind_;
};

}  // namespace

std::shared_ptr<const DeviceModel> planted_batch_split_cpu_device_model(std::shared_ptr<const Model> model) {
  return std::make_shared<const PlantedCpuModel>(std::move(model), PlantedCpuModel::Kind::kBatchSplit);
}

std::shared_ptr<const DeviceModel> planted_batch_mask_cpu_device_model(std::shared_ptr<const Model> model) {
  return std::make_shared<const PlantedCpuModel>(std::move(model), PlantedCpuModel::Kind::kBatchMask);
}

std::shared_ptr<const DeviceModel> planted_hit_chunking_cpu_device_model(std::shared_ptr<const Model> model) {
  return std::make_shared<const PlantedCpuModel>(std::move(model), PlantedCpuModel::Kind::kHitChunking);
}

}  // namespace vosti
