#include "runner/cpu/cpu_runner.h"

#include <algorithm>
#include <chrono>
#include <limits>
#include <thread>

#include "runner/cpu/host_rows.h"
#include "runner/kv_pool_sizes.h"
#include "sample/token_bitmask.h"

namespace vosti {

Result<std::unique_ptr<KernelBackend>> make_host_backend(const std::string& name, ThreadPool* pool) {
  if (name == "cpu") return make_cpu_backend(pool);
  if (name == "ref") return make_ref_backend();
  return invalid_argument("unknown backend \"" + name + "\" (choose cpu or ref)");
}

Result<std::unique_ptr<ModelRunner>> CpuDeviceModel::make_runner(const EngineConfig& config) const {
  return CpuRunner::create(model_, config,
                           [&config](ThreadPool* pool) { return make_host_backend(config.backend, pool); });
}

Result<std::unique_ptr<ModelRunner>> CpuRunner::create(std::shared_ptr<const Model> model, const EngineConfig& config,
                                                       const KernelFactory& make_kernels, const CpuRunnerHooks& hooks) {
  const ModelConfig& mc = model->config();
  if (config.kv_cache_dtype != "auto" && config.kv_cache_dtype != "f32")
    return invalid_argument("the cpu device keeps its KV cache in f32; kv_cache_dtype \"" + config.kv_cache_dtype +
                            "\" needs --device cuda");
  RunnerInfo info;
  info.kv_cache_dtype = "f32";
  info.block_size = config.block_size;
  const KvPoolSizes pools = kv_pool_sizes(mc, config, sizeof(float));
  if (pools.num_blocks <= 0) return invalid_argument("the KV cache holds no block: raise kv_cache_bytes or num_blocks");
  info.num_blocks = pools.num_blocks;
  info.num_window_blocks = pools.num_window_blocks;
  info.kv_window = pools.window;
  info.full_kv_layers = pools.full_layers;
  info.kv_cache_bytes = pools.bytes;
  // Without full layers nothing holds a whole prefix: the window pool bounds no length.
  const int64_t cache_tokens =
      pools.full_layers ? info.num_blocks * config.block_size : std::numeric_limits<int32_t>::max();
  int64_t max_len = config.max_model_len;
  if (max_len <= 0) max_len = std::min(mc.max_position_embeddings, cache_tokens);
  if (max_len > cache_tokens)
    return invalid_argument("max_model_len " + std::to_string(max_len) + " exceeds the KV cache (" +
                            std::to_string(cache_tokens) + " tokens): raise the cache size or lower max_model_len");
  info.max_model_len = static_cast<int32_t>(max_len);
  info.weight_bytes = model->weight_bytes();
  const int32_t threads = config.num_threads > 0
                              ? config.num_threads
                              : static_cast<int32_t>(std::max(1u, std::thread::hardware_concurrency()));
  auto pool = std::make_unique<ThreadPool>(threads);
  VOSTI_ASSIGN_OR_RETURN(std::unique_ptr<KernelBackend> kernels, make_kernels(pool.get()));
  info.device = "cpu (" + std::string(kernels->name()) + " kernels, " + std::to_string(threads) + " threads)";
  return std::unique_ptr<ModelRunner>(
      new CpuRunner(std::move(model), std::move(pool), std::move(kernels), info, hooks));
}

CpuRunner::CpuRunner(std::shared_ptr<const Model> model, std::unique_ptr<ThreadPool> pool,
                     std::unique_ptr<KernelBackend> kernels, RunnerInfo info, CpuRunnerHooks hooks)
    : model_(std::move(model)),
      pool_(std::move(pool)),
      kernels_(std::move(kernels)),
      info_(std::move(info)),
      hooks_(std::move(hooks)),
      kv_(model_->config(), info_.num_blocks, info_.block_size, info_.num_window_blocks) {}

namespace {

// A sampled row whose request asked for no logprobs: the token only (choose_token: the same
// token as sample_token, without the raw log-softmax), then the digest and copy on request.
RowResult sample_row_without_logprobs(std::span<const float> logits, const WantedRow& row,
                                      const RequestLogitsTask& task, SamplerScratch& scratch) {
  RowResult out;
  out.plan_index = row.plan_index;
  out.position = row.position;
  out.kind = row.kind;
  out.sample_index = row.sample_index;
  const std::span<const int32_t> outputs = task.outputs_before(row.sample_index);
  out.scored.token = choose_token(logits, *task.sampling, task.seed, static_cast<int64_t>(outputs.size()), task.prompt,
                                  outputs, scratch);
  if (task.digest) out.digest = logits_digest(logits);
  if (task.full_logits) out.logits.assign(logits.begin(), logits.end());
  return out;
}

}  // namespace

Result<StepResult> CpuRunner::execute(const StepPlan& plan, std::span<const RequestLogitsTask> tasks) {
  using Clock = std::chrono::steady_clock;
  const auto t0 = Clock::now();
  build_step_batch(plan, tasks, info_.block_size, StepBatchOptions{}, batch_);
  logit_rows_ = batch_.logit_token_rows();
  const auto vocab = static_cast<size_t>(model_->config().vocab_size);
  logits_.resize(logit_rows_.size() * vocab);
  model_->forward(forward_batch(batch_, logit_rows_), kv_, *kernels_, logits_.data(), scratch_);
  const auto t1 = Clock::now();
  StepResult out;
  out.rows.resize(batch_.wanted.size());
  for (size_t i = 0; i < batch_.logit_order.size(); ++i) {  // logits order -> the wanted order of out.rows
    const auto at = static_cast<size_t>(batch_.logit_order[i]);
    const WantedRow& row = batch_.wanted[at];
    std::span<const float> logits(logits_.data() + i * vocab, vocab);
    const RequestLogitsTask& task = tasks[static_cast<size_t>(row.plan_index)];
    if (row.kind == RowKind::kSample && !task.allowed.empty()) {  // structured outputs: the masked row
      masked_row_.assign(logits.begin(), logits.end());
      if (hooks_.apply_mask) {
        hooks_.apply_mask(masked_row_, task.allowed_at(row.sample_index), static_cast<int64_t>(plan.requests.size()));
      } else {
        apply_token_bitmask(masked_row_, task.allowed_at(row.sample_index));
      }
      logits = masked_row_;
    }
    if (row.kind == RowKind::kSample && task.sampling != nullptr && !task.sampling->logprobs && !task.sampling_mask) {
      out.rows[at] = sample_row_without_logprobs(logits, row, task, sampler_scratch_);
    } else {
      out.rows[at] = finish_row_on_host(logits, row, task, sampler_scratch_);
    }
  }
  add_routed_rows(plan, tasks, scratch_.moe.routed, batch_.num_tokens(), out.routed);
  out.seconds_forward = std::chrono::duration<double>(t1 - t0).count();
  out.seconds_sampling = std::chrono::duration<double>(Clock::now() - t1).count();
  return out;
}

}  // namespace vosti
