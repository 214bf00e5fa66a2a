// CudaRunner: one engine's steps on the GPU; what a step does is in cuda_runner.h.
#include "runner/cuda/cuda_runner.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <limits>
#include <utility>
#include <vector>

#include "core/check.h"
#include "core/speculative_config.h"
#include "kernels/cuda/attention/attention_plan.h"
#include "kernels/cuda/cuda_status.h"
#include "kernels/cuda/sampler/digest_kernels.h"
#include "kernels/cuda/sampler/sampler_kernels.h"
#include "kernels/cuda/sampler/token_mask_kernels.h"
#include "runner/cpu/host_rows.h"
#include "runner/cuda/cuda_graphs.h"
#include "runner/cuda/device_buffers.h"
#include "runner/cuda/device_rows.h"
#include "runner/cuda/step_buffer.h"
#include "runner/step_batch.h"
#include "sample/token_bitmask.h"

namespace vosti {
namespace {

using Clock = std::chrono::steady_clock;

constexpr int64_t kLogitAlign = 128;         // logit rows: whole tiles of the GEMM's x tiles
constexpr int64_t kAdjustsPerRow = 4096;     // sampler adjustments the step buffer holds per sampled row
constexpr int32_t kPartialSlotsPerSeq = 16;  // attention split states per sequence slot (see allocate)

int64_t cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }
double seconds(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

// How the runner handles one logits row of the step (aligned with StepBatch::logit_order).
struct LogitsRow {
  int64_t at = 0;            // its row in the step's logits rows and sampler results
  bool device = true;        // the device sampler finishes it (else the host samples it)
  bool copy_row = false;     // the whole row comes back to the host
  int64_t digest = -1;       // its device digest's index, or -1
  bool host_digest = false;  // a scored prompt row whose digest is taken on the host (echo + digests)
};

class CudaRunner final : public ModelRunner {
 public:
  CudaRunner(std::shared_ptr<const CudaModel> model, const EngineConfig& config, CudaRunnerHooks hooks)
      : model_(std::move(model)), config_(config), hooks_(std::move(hooks)) {}
  ~CudaRunner() override;

  Status allocate();
  Result<StepResult> execute(const StepPlan& plan, std::span<const RequestLogitsTask> tasks) override;
  const RunnerInfo& info() const override { return info_; }

 private:
  Status allocate_attention(int64_t max_len);
  void describe(DType kv_dtype, int64_t max_len);
  Status fill(const StepPlan& plan, std::span<const RequestLogitsTask> tasks);
  void plan_logits_rows(std::span<const RequestLogitsTask> tasks);
  Status plan_attention_of();
  Status launch();
  Status forward_eager();
  Status sample_chunk(int64_t begin, int64_t n);
  Status digest_score_rows(int64_t begin, int64_t n);
  Result<StepResult> collect(const StepPlan& plan, std::span<const RequestLogitsTask> tasks);
  Result<RowResult> collect_row(const StepPlan& plan, const WantedRow& w, const RequestLogitsTask& t, size_t k);
  // Entries of a token row's routing record: MoE layers * top_k (0: a dense model).
  int64_t routed_per_token() const { return model_->num_moe_layers() * model_->moe().top_k; }

  std::shared_ptr<const CudaModel> model_;
  EngineConfig config_;
  CudaRunnerHooks hooks_;
  RunnerInfo info_;
  Status broken_;
  cudaStream_t stream_ = nullptr;
  RunnerCapacity cap_;
  CudaRunnerBuffers buffers_;
  std::unique_ptr<DecodeGraphs> graphs_;
  // The tensor-core attention (when the deployment runs it): its shape (the window is each plan's,
  // CudaModel::windows()), the most splits a row can have, the per-split launch's CTA rows inside a
  // decode graph.
  bool tensor_core_attn_ = false;
  AttentionShape attn_shape_;
  int64_t max_splits_ = 0;
  int32_t graph_ctas_ = 1;

  // The step in flight (reused storage).
  StepBatch batch_;
  std::vector<AttentionPlan> attn_plans_;            // [windows]
  int64_t graph_rows_ = 0;                           // G > 0: a decode graph's step
  std::vector<LogitsRow> rows_;                      // [R] logits order
  std::vector<int32_t> logit_rows_;                  // [G or R] token rows of the logits rows
  std::vector<SamplerRowTask> graph_tasks_;          // [G] a graph step's tasks, by sequence
  std::vector<int32_t> digest_rows_;                 // [D] rows of the last logits chunk digested on the device
  std::vector<int32_t> mask_rows_;                   // [K] rows of the last logits chunk with a token mask
  std::vector<uint32_t> masks_;                      // [K, mask words] their masks
  std::vector<std::pair<int64_t, int64_t>> chunks_;  // (first logits row, rows): score rows, then the sampled rows
  std::vector<LogitsDigest> score_digests_;          // [R] host digests of the scored prompt rows that want one
  std::vector<float> host_row_;                      // [vocab] staging for those digests
  bool wants_routed_ = false;                        // a task asked for its rows' routed experts
  DeviceStep step_;
  SamplerScratch sampler_scratch_;
};

CudaRunner::~CudaRunner() {
  if (stream_ != nullptr) {
    (void)cudaStreamSynchronize(stream_);  // buffers are freed after the stream's work ends
    graphs_.reset();
    (void)cudaStreamDestroy(stream_);
  }
}

Status CudaRunner::allocate() {
  const ModelConfig& c = model_->config();
  VOSTI_CUDA_RETURN_IF_ERROR(cudaSetDevice(model_->device().ordinal));
  if (c.vocab_size > kMaxSamplerVocab)
    return unimplemented("the CUDA runner samples vocabularies of at most " + std::to_string(kMaxSamplerVocab) +
                         " tokens; this model has " + std::to_string(c.vocab_size));
  DType kv_dtype = DType::kBF16;
  if (config_.kv_cache_dtype == "f32") {
    kv_dtype = DType::kF32;
  } else if (config_.kv_cache_dtype != "auto" && config_.kv_cache_dtype != "bf16") {
    return invalid_argument("kv_cache_dtype must be auto, bf16 or f32, got \"" + config_.kv_cache_dtype + "\"");
  }
  int64_t max_len = config_.max_model_len > 0 ? config_.max_model_len : c.max_position_embeddings;
  cap_.seqs = config_.max_num_seqs;
  cap_.tokens = config_.max_num_batched_tokens;
  cap_.stride = cdiv(max_len, config_.block_size);
  // A speculating sequence samples each of its k + 1 verify rows; the sampled rows are the step's
  // last logits chunk, so the logits buffer holds them all.
  VOSTI_ASSIGN_OR_RETURN(SpeculativeConfig speculative, parse_speculative_config(config_.speculative_config));
  cap_.sampled = std::min(cap_.tokens, cap_.seqs * (1 + int64_t{speculative.num_speculative_tokens}));
  cap_.logit_rows = cdiv(std::min(cap_.tokens, std::max<int64_t>(cap_.sampled, 64)), kLogitAlign) * kLogitAlign;
  cap_.adjusts = std::min(cap_.sampled, cap_.logit_rows) * kAdjustsPerRow;
  // The step buffer at its largest: every region at capacity (the attention plan's per-split items
  // bounded by the rows and partial slots of an eager step, or by a graph's rows' splits).
  const int32_t split = config_.attention_split > 0 ? config_.attention_split : kAttnDefaultSplit;
  const int64_t partial_bound = std::max(cap_.seqs * kPartialSlotsPerSeq, 4 * cdiv(max_len, split));
  StepShape most;
  most.tokens = cap_.tokens;
  most.seqs = cap_.seqs;
  most.logit_rows = cap_.tokens;
  most.stride = cap_.stride;
  most.windows = static_cast<int>(model_->windows().size());
  most.merges = cap_.tokens;
  most.per_split = std::max(cap_.tokens + partial_bound, cap_.seqs * cdiv(max_len, split));
  most.folded.fill(cap_.tokens);
  most.adjusts = cap_.adjusts;
  most.digests = cap_.sampled;
  most.masks = cap_.sampled;
  most.mask_words = token_mask_words(c.vocab_size);
  // Window tables where the deployment keeps window-local KV on a model with window layers.
  most.window_stride = config_.window_local_kv && c.kv_layer_groups().num_window_layers > 0 ? cap_.stride : 0;
  cap_.step_bytes = static_cast<int64_t>(make_step_layout(most).bytes);
  VOSTI_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  VOSTI_ASSIGN_OR_RETURN(buffers_, CudaRunnerBuffers::allocate(*model_, cap_, stream_));
  VOSTI_RETURN_IF_ERROR(buffers_.allocate_kv(*model_, config_, kv_dtype, max_len));
  // Without full layers (window-local KV of a model whose every layer has a window) nothing holds
  // a whole prefix: the window pool bounds no length.
  const int64_t cache_tokens = buffers_.kv_pools().full_layers ? buffers_.num_blocks() * config_.block_size
                                                               : std::numeric_limits<int32_t>::max();
  if (config_.max_model_len > cache_tokens)
    return invalid_argument("max_model_len " + std::to_string(config_.max_model_len) + " exceeds the KV cache (" +
                            std::to_string(cache_tokens) + " tokens): raise the cache or lower max_model_len");
  max_len = std::min(max_len, cache_tokens);
  tensor_core_attn_ = tensor_core_attention(buffers_.kv()[0], static_cast<int>(c.num_heads));
  if (tensor_core_attn_) VOSTI_RETURN_IF_ERROR(allocate_attention(max_len));
  VOSTI_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
  // A hook's split is a function of the step, which a captured graph cannot follow.
  graphs_ =
      std::make_unique<DecodeGraphs>(config_.cuda_graphs && !hooks_.attention_split, std::min(cap_.seqs, cap_.tokens));
  describe(kv_dtype, max_len);
  return Status();
}

// The tensor-core attention's shape, split states and graph grid.
Status CudaRunner::allocate_attention(int64_t max_len) {
  const ModelConfig& c = model_->config();
  attn_shape_ = {static_cast<int>(c.num_heads),
                 static_cast<int>(c.num_kv_heads),
                 static_cast<int>(c.head_dim),
                 config_.attention_split > 0 ? config_.attention_split : kAttnDefaultSplit,
                 kAttnRowsPerCta,
                 0};
  for (const int window : model_->windows()) {
    AttentionShape shape = attn_shape_;
    shape.window = window;
    VOSTI_RETURN_IF_ERROR(check_attention_shape(shape));
  }
  attn_plans_.resize(model_->windows().size());
  max_splits_ = cdiv(max_len, attn_shape_.split);
  // Split states: room for every sequence at kPartialSlotsPerSeq splits and for a few at the
  // full context; a step that needs more folds the rest in one CTA each (the same bits).
  const int64_t slots = std::max(cap_.seqs * kPartialSlotsPerSeq, 4 * max_splits_);
  VOSTI_RETURN_IF_ERROR(buffers_.allocate_partials(*model_, static_cast<int32_t>(slots)));
  // A decode graph's per-split launch: about two CTAs per SM, each striding over the items.
  const int num_sms = model_->device().num_sms;
  graph_ctas_ = static_cast<int32_t>(std::max<int64_t>(1, cdiv(2 * num_sms, c.num_kv_heads)));
  // Enough decode rows fold their splits in the per-split kernel, where it can (no merge).
  if (attention_decode_fits(attn_shape_.head_dim, attn_shape_.group(), config_.block_size))
    attn_shape_.decode_fold_ctas = graph_ctas_;
  return Status();
}

void CudaRunner::describe(DType kv_dtype, int64_t max_len) {
  const CudaDevice& dev = model_->device();
  info_.kv_cache_dtype = kv_dtype == DType::kF32 ? "f32" : "bf16";
  info_.num_blocks = buffers_.num_blocks();
  info_.block_size = config_.block_size;
  info_.max_model_len = static_cast<int32_t>(max_len);
  info_.kv_cache_bytes = buffers_.kv_bytes();
  info_.kv_window = buffers_.kv_pools().window;
  info_.num_window_blocks = buffers_.kv_pools().num_window_blocks;
  info_.full_kv_layers = buffers_.kv_pools().full_layers;
  info_.weight_bytes = static_cast<int64_t>(model_->num_weight_bytes());
  char desc[256];
  std::snprintf(desc, sizeof desc, "cuda:%d %s (sm_%d, %d SMs, %.1f GiB)%s", dev.ordinal, dev.name.c_str(),
                dev.compute_capability, dev.num_sms, static_cast<double>(dev.total_memory) / (1u << 30),
                graphs_->enabled() ? ", CUDA graphs for decode" : "");
  info_.device = desc;
}

Result<StepResult> CudaRunner::execute(const StepPlan& plan, std::span<const RequestLogitsTask> tasks) {
  if (!broken_.ok()) return broken_;
  // CUDA's current device is per thread, and the engine's thread need not be the loader's.
  Status s = cuda_status(cudaSetDevice(model_->device().ordinal), "cudaSetDevice");
  const auto t0 = Clock::now();
  if (s.ok()) s = fill(plan, tasks);
  if (s.ok()) s = launch();
  const auto t_device = Clock::now();
  Result<StepResult> out = s.ok() ? collect(plan, tasks) : Result<StepResult>(s);
  if (!out.ok()) {
    broken_ = out.status().with_context("the CUDA runner is unusable");
    return out;
  }
  out->seconds_forward = seconds(t0, t_device);
  out->seconds_sampling = seconds(t_device, Clock::now());
  return out;
}

// The step's batch, attention plan and logits rows, written to the step buffer and copied to the
// device in one transfer.
Status CudaRunner::fill(const StepPlan& plan, std::span<const RequestLogitsTask> tasks) {
  build_step_batch(plan, tasks, config_.block_size, StepBatchOptions{true, cap_.adjusts}, batch_);
  const int64_t S = batch_.num_seqs;
  VOSTI_CHECK(batch_.num_tokens() >= 1 && batch_.num_tokens() <= cap_.tokens && S <= cap_.seqs,
              "the plan exceeds the runner's token or sequence caps");
  VOSTI_CHECK(batch_.block_table_stride <= cap_.stride && batch_.window_block_table_stride <= cap_.stride,
              "a block table is longer than max_model_len allows");
  if (tensor_core_attn_) VOSTI_RETURN_IF_ERROR(plan_attention_of());
  // A decode graph runs the step where it is a decode step whose attention needs no folded items
  // (a graph launches the per-split items only) and whose per-split items fit the graph's region.
  graph_rows_ = 0;
  if (batch_.decode_only) {
    const int64_t g = graphs_->size_for(S);
    bool fits = true;
    for (const AttentionPlan& p : attn_plans_)
      fits = fits && p.folded.empty() && static_cast<int64_t>(p.per_split.size()) <= g * max_splits_;
    if (fits) graph_rows_ = g;
  }
  plan_logits_rows(tasks);
  wants_routed_ = false;
  for (const RequestLogitsTask& t : tasks)
    wants_routed_ = wants_routed_ || (t.routed_experts && routed_per_token() > 0);
  StepArrays arrays;
  arrays.graph_rows = graph_rows_;
  arrays.logit_rows = logit_rows_;
  arrays.tasks =
      graph_rows_ > 0 ? std::span<const SamplerRowTask>(graph_tasks_) : std::span<const SamplerRowTask>(batch_.tasks);
  arrays.adjusts = batch_.adjusts;
  arrays.digest_rows = digest_rows_;
  arrays.mask_rows = mask_rows_;
  arrays.masks = masks_;
  arrays.mask_words = token_mask_words(model_->config().vocab_size);
  if (tensor_core_attn_) arrays.attention = attn_plans_;
  arrays.per_split_capacity = graph_rows_ * max_splits_;
  // A graph reads the tables from the same addresses at every replay: with window tables after the
  // full ones, both at the runner's largest stride.
  if (graph_rows_ > 0 && !batch_.window_slots.empty()) arrays.table_stride = cap_.stride;
  step_ =
      write_step(batch_, arrays, buffers_.step_host(), buffers_.step_device(), static_cast<size_t>(cap_.step_bytes));
  VOSTI_CUDA_RETURN_IF_ERROR(
      cudaMemcpyAsync(buffers_.step_device(), buffers_.step_host(), step_.bytes, cudaMemcpyHostToDevice, stream_));
  // The plans share the split states: the layers run one after another on the stream.
  for (size_t w = 0; tensor_core_attn_ && w < attn_plans_.size(); ++w) {
    AttentionPlanDevice& at = step_.attention[w];
    at.partials = buffers_.partials();
    at.partial_capacity = buffers_.partial_slots();
    step_.batch.attention[w] = graph_rows_ > 0 ? attention_graph_view(at, attn_plans_[w].split, attn_plans_[w].window,
                                                                      graph_rows_, graph_ctas_)
                                               : attention_eager_view(attn_plans_[w], at);
  }
  return Status();
}

// Where each logits row goes: its row of the logits (a graph step's rows are its sequences), who
// samples it, whether it comes back whole, its device digest.
void CudaRunner::plan_logits_rows(std::span<const RequestLogitsTask> tasks) {
  const int64_t R = batch_.num_logit_rows(), G = graph_rows_;
  const int64_t sample_begin = G > 0 ? 0 : batch_.num_score_rows;  // first logits row of the last chunk
  const int64_t vocab = model_->config().vocab_size;
  rows_.assign(static_cast<size_t>(R), LogitsRow{});
  score_digests_.assign(static_cast<size_t>(R), LogitsDigest{});
  digest_rows_.clear();
  mask_rows_.clear();
  masks_.clear();
  logit_rows_.clear();
  if (G > 0) {
    for (int64_t k = 0; k < G; ++k) logit_rows_.push_back(static_cast<int32_t>(k));
    graph_tasks_.assign(static_cast<size_t>(G), SamplerRowTask{});
  } else {
    for (const int32_t i : batch_.logit_order) logit_rows_.push_back(batch_.wanted[static_cast<size_t>(i)].token_row);
  }
  for (int64_t k = 0; k < R; ++k) {
    const WantedRow& w = batch_.wanted[static_cast<size_t>(batch_.logit_order[static_cast<size_t>(k)])];
    const RequestLogitsTask& t = tasks[static_cast<size_t>(w.plan_index)];
    LogitsRow& o = rows_[static_cast<size_t>(k)];
    o.at = G > 0 ? w.plan_index : k;
    o.device = batch_.host_sampled[static_cast<size_t>(k)] == 0;
    if (G > 0) graph_tasks_[static_cast<size_t>(o.at)] = batch_.tasks[static_cast<size_t>(k)];
    if (w.kind == RowKind::kScore) o.host_digest = t.digest;  // rare (echo + digests): copied back whole
    if (w.kind != RowKind::kSample) continue;
    if (const std::span<const uint32_t> mask = t.allowed_at(w.sample_index); !mask.empty()) {
      VOSTI_CHECK(static_cast<int64_t>(mask.size()) == token_mask_words(vocab), "a token mask's size");
      mask_rows_.push_back(static_cast<int32_t>(o.at - sample_begin));
      masks_.insert(masks_.end(), mask.begin(), mask.end());
    }
    const bool device_digest = t.digest && vocab >= kMinDeviceDigestVocab;
    o.copy_row = t.full_logits || config_.check_device_sampler || !o.device || (t.digest && !device_digest);
    if (device_digest) {
      o.digest = static_cast<int64_t>(digest_rows_.size());
      digest_rows_.push_back(static_cast<int32_t>(o.at - sample_begin));
    }
  }
  chunks_.clear();
  const int64_t num_score = batch_.num_score_rows, rows = G > 0 ? G : R;
  for (int64_t b = 0; b < num_score && G == 0; b += cap_.logit_rows)
    chunks_.push_back({b, std::min(cap_.logit_rows, num_score - b)});
  if (rows - sample_begin > 0) chunks_.push_back({sample_begin, rows - sample_begin});
}

// The step's attention plans, one per window, from its rows' positions and sequences.
Status CudaRunner::plan_attention_of() {
  AttentionShape shape = attn_shape_;
  shape.folded_rows = attention_folded_rows(shape, config_.block_size, batch_.num_tokens(), model_->device().num_sms,
                                            model_->device().has_wgmma);
  if (hooks_.attention_split) shape.split = hooks_.attention_split(batch_.num_seqs, shape.split);
  for (size_t w = 0; w < attn_plans_.size(); ++w) {
    shape.window = model_->windows()[w];
    AttentionPlan& plan = attn_plans_[w];
    VOSTI_RETURN_IF_ERROR(plan_attention(batch_.positions, batch_.row_seq, shape, buffers_.partial_slots(), &plan));
    if (static_cast<int64_t>(plan.folded.size()) > cap_.tokens ||
        static_cast<int64_t>(plan.merges.size()) > cap_.tokens)
      return internal_error("the attention plan of " + std::to_string(batch_.num_tokens()) +
                            " rows exceeds the step buffer");
  }
  return Status();
}

// The forward and the logits (a graph's replay, or eager launches), the device sampler and digests
// of the last chunk, the copies of its results back, one synchronisation.
Status CudaRunner::launch() {
  const int64_t G = graph_rows_;
  cudaGraphExec_t graph = G > 0 ? graphs_->find(G) : nullptr;
  if (graph != nullptr) {
    VOSTI_CUDA_RETURN_IF_ERROR(cudaGraphLaunch(graph, stream_));
  } else {
    VOSTI_RETURN_IF_ERROR(forward_eager());
  }
  const int64_t vocab = model_->config().vocab_size, vocab_rows = model_->dims().vocab_rows;
  if (!chunks_.empty()) {  // the last chunk: sampler, digests, whole rows
    const auto [begin, n] = chunks_.back();
    // Structured outputs: the masked rows first, in place, so the sampler, the digests and the
    // whole rows all read the row the mask left (as the host runner's).
    VOSTI_RETURN_IF_ERROR(apply_token_masks(buffers_.logits(), vocab_rows, vocab, step_.mask_rows, step_.masks,
                                            token_mask_words(vocab), static_cast<int64_t>(mask_rows_.size()), stream_));
    VOSTI_RETURN_IF_ERROR(sample_chunk(begin, n));
    if (!digest_rows_.empty()) {
      VOSTI_RETURN_IF_ERROR(digest_rows(buffers_.logits(), vocab_rows, vocab, step_.digest_rows,
                                        static_cast<int64_t>(digest_rows_.size()), buffers_.digests_device(), stream_));
    }
    for (size_t k = 0, slot = 0; k < rows_.size(); ++k) {
      const WantedRow& w = batch_.wanted[static_cast<size_t>(batch_.logit_order[k])];
      if (w.kind != RowKind::kSample) continue;
      if (rows_[k].copy_row) {
        VOSTI_CHECK(static_cast<int64_t>(slot) < cap_.sampled, "a sampled row beyond the host rows' capacity");
        VOSTI_CUDA_RETURN_IF_ERROR(
            cudaMemcpyAsync(buffers_.rows_host() + slot * vocab, buffers_.logits() + (rows_[k].at - begin) * vocab_rows,
                            static_cast<size_t>(vocab) * sizeof(float), cudaMemcpyDeviceToHost, stream_));
      }
      ++slot;
    }
  }
  const int64_t rows = G > 0 ? G : batch_.num_logit_rows();
  VOSTI_CHECK(rows <= cap_.tokens, "more sampler results than the results buffer holds");
  VOSTI_RETURN_IF_ERROR(buffers_.copy_results(rows, static_cast<int64_t>(digest_rows_.size()), stream_));
  if (wants_routed_) VOSTI_RETURN_IF_ERROR(buffers_.copy_routed(batch_.num_tokens(), routed_per_token(), stream_));
  VOSTI_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
  if (G > 0 && graph == nullptr && graphs_->enabled()) {
    // The first step of this padded size ran eagerly (same launches, same addresses); record it.
    const Status captured = graphs_->capture(G, stream_, [&] {
      VOSTI_RETURN_IF_ERROR(model_->forward_layers(step_.batch, buffers_.acts(), buffers_.kv(), stream_));
      return model_->logits(step_.batch.logit_rows, G, buffers_.acts(), buffers_.logits(), stream_);
    });
    if (!captured.ok())
      std::fprintf(stderr, "vosti: CUDA graph capture failed, running eagerly: %s\n", captured.to_string().c_str());
  }
  return Status();
}

// Every layer, then the logits chunk by chunk: each chunk but the last sampled before the next
// overwrites the logits (stream order); the last one's logits stay for the sampler.
Status CudaRunner::forward_eager() {
  VOSTI_RETURN_IF_ERROR(model_->forward_layers(step_.batch, buffers_.acts(), buffers_.kv(), stream_));
  for (size_t ci = 0; ci < chunks_.size(); ++ci) {
    const auto [begin, n] = chunks_[ci];
    VOSTI_RETURN_IF_ERROR(
        model_->logits(step_.batch.logit_rows + begin, n, buffers_.acts(), buffers_.logits(), stream_));
    VOSTI_RETURN_IF_ERROR(digest_score_rows(begin, n));
    if (ci + 1 < chunks_.size()) VOSTI_RETURN_IF_ERROR(sample_chunk(begin, n));
  }
  return Status();
}

// Host digests of the scored prompt rows among logits rows [begin, begin + n) that want one (the
// chunk now in the logits buffer; an eager step: score rows never run in a graph). Each row comes
// back whole, synchronously: a path only echo + return_logits_digests takes.
Status CudaRunner::digest_score_rows(int64_t begin, int64_t n) {
  const int64_t vocab = model_->config().vocab_size, vocab_rows = model_->dims().vocab_rows;
  // Only score rows digest here, and they come first. A graph's padded chunk (its first step runs
  // eagerly) has more rows than rows_ (none at all for a one-token prefill chunk): reading rows_
  // past the score rows read past its end, and wrote score_digests_ there.
  const int64_t end = std::min(begin + n, batch_.num_score_rows);
  for (int64_t k = begin; k < end; ++k) {
    if (!rows_[static_cast<size_t>(k)].host_digest) continue;
    host_row_.resize(static_cast<size_t>(vocab));
    VOSTI_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(host_row_.data(), buffers_.logits() + (k - begin) * vocab_rows,
                                               static_cast<size_t>(vocab) * sizeof(float), cudaMemcpyDeviceToHost,
                                               stream_));
    VOSTI_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
    score_digests_[static_cast<size_t>(k)] = logits_digest(host_row_);
  }
  return Status();
}

// The device sampler over logits rows [begin, begin + n) (the chunk now in the logits buffer).
Status CudaRunner::sample_chunk(int64_t begin, int64_t n) {
  return sample_rows(buffers_.logits(), model_->dims().vocab_rows, model_->config().vocab_size, step_.tasks + begin,
                     step_.adjusts, buffers_.scratch(), buffers_.results_device() + begin, n, stream_);
}

// The results in wanted order: the device's, finished on the host; rows it handed back sampled here.
Result<StepResult> CudaRunner::collect(const StepPlan& plan, std::span<const RequestLogitsTask> tasks) {
  StepResult out;
  out.rows.resize(batch_.wanted.size());
  for (size_t k = 0; k < rows_.size(); ++k) {
    const auto i = static_cast<size_t>(batch_.logit_order[k]);
    const WantedRow& w = batch_.wanted[i];
    VOSTI_ASSIGN_OR_RETURN(out.rows[i], collect_row(plan, w, tasks[static_cast<size_t>(w.plan_index)], k));
  }
  if (wants_routed_) {
    const int64_t T = batch_.num_tokens();
    add_routed_rows(plan, tasks,
                    std::span<const int32_t>(buffers_.routed_host(), static_cast<size_t>(T * routed_per_token())), T,
                    out.routed);
  }
  return out;
}

Result<RowResult> CudaRunner::collect_row(const StepPlan& plan, const WantedRow& w, const RequestLogitsTask& t,
                                          size_t k) {
  const LogitsRow& o = rows_[k];
  const SamplerRowResult& d = buffers_.results_host()[o.at];
  if (w.kind == RowKind::kScore) {
    RowResult r = row_from_device(d, w, t.logprobs_mode);
    if (o.host_digest) r.digest = score_digests_[k];
    return r;
  }
  const int64_t vocab = model_->config().vocab_size;
  const int64_t slot = static_cast<int64_t>(k) - batch_.num_score_rows;  // index among the sampled rows
  const std::span<float> host_row(buffers_.rows_host() + slot * vocab, static_cast<size_t>(vocab));
  if (!o.device || d.status != kSamplerOk) {
    if (!o.copy_row) {  // the row is still in the logits (the last chunk): fetch it now
      const int64_t at = o.at - chunks_.back().first;
      VOSTI_CUDA_RETURN_IF_ERROR(cudaMemcpy(host_row.data(), buffers_.logits() + at * model_->dims().vocab_rows,
                                            static_cast<size_t>(vocab) * sizeof(float), cudaMemcpyDeviceToHost));
    }
    return finish_row_on_host(host_row, w, t, sampler_scratch_);
  }
  RowResult r = row_from_device(d, w, t.logprobs_mode);
  if (t.digest) {
    if (o.digest >= 0) {
      const uint64_t* g = buffers_.digests_host() + 2 * o.digest;
      r.digest = {g[0], g[1]};
    } else {
      r.digest = logits_digest(host_row);
    }
  }
  if (t.full_logits) r.logits.assign(host_row.begin(), host_row.end());
  if (config_.check_device_sampler) {
    const RowResult h = finish_row_on_host(host_row, w, t, sampler_scratch_);
    if (!same_scored(h.scored, r.scored) || (t.digest && h.digest != r.digest)) {
      return internal_error("the device sampler disagrees with the host sampler on request " +
                            std::to_string(plan.requests[static_cast<size_t>(w.plan_index)].id) + " at position " +
                            std::to_string(w.position) + ": device token " + std::to_string(r.scored.token) +
                            ", host token " + std::to_string(h.scored.token));
    }
  }
  return r;
}

}  // namespace

Result<std::shared_ptr<const CudaDeviceModel>> CudaDeviceModel::load(const std::string& path) {
  VOSTI_ASSIGN_OR_RETURN(std::shared_ptr<const ModelFile> file, ModelFile::open(path));
  VOSTI_ASSIGN_OR_RETURN(std::shared_ptr<const CudaModel> model, CudaModel::load(*file));
  return std::make_shared<const CudaDeviceModel>(std::move(model));
}

Result<std::unique_ptr<ModelRunner>> CudaDeviceModel::make_runner(const EngineConfig& config) const {
  return make_cuda_runner(model_, config);
}

Result<std::unique_ptr<ModelRunner>> make_cuda_runner(std::shared_ptr<const CudaModel> model,
                                                      const EngineConfig& config, const CudaRunnerHooks& hooks) {
  auto runner = std::make_unique<CudaRunner>(std::move(model), config, hooks);
  VOSTI_RETURN_IF_ERROR(runner->allocate());
  return std::unique_ptr<ModelRunner>(std::move(runner));
}

}  // namespace vosti
