// CudaRunner: one engine's steps on the GPU; the step's stages are in cuda_runner.h.
#include "runner/cuda/cuda_runner.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <unordered_map>

#include "kernels/cuda/cuda_status.h"
#include "kernels/cuda/digest_kernels.h"
#include "kernels/cuda/sampler_kernels.h"
#include "model/cuda/attention_work.h"
#include "runner/cuda/device_rows.h"
#include "runner/host_rows.h"
#include "runner/step_rows.h"

namespace vosti {
namespace {

using Clock = std::chrono::steady_clock;

constexpr int64_t kRowAlign = 256;               // activation rows: whole tiles of the GEMM's tallest x tile
constexpr int64_t kLogitAlign = 128;             // logit rows likewise
constexpr int64_t kAdjustsPerRow = 4096;         // sampler adjustments the step buffer holds per sampled row
constexpr size_t kHeadroomBytes = 512ull << 20;  // left free beside the KV pool (graphs, CUDA's own)
constexpr int32_t kPartialSlotsPerSeq = 16;      // attention split states per sequence slot (see allocate)
// Padded batch sizes of the decode graphs (each up to the runner's sequence and token caps).
constexpr std::array<int64_t, 19> kGraphSizes = {1,   2,   4,   8,   16,  24,  32,  48,  64, 96,
                                                 128, 160, 192, 224, 256, 320, 384, 448, 512};

int64_t cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }
int64_t round_up(int64_t v, int64_t m) { return cdiv(v, m) * m; }
size_t round_up_bytes(size_t v, size_t m) { return (v + m - 1) / m * m; }
double seconds(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

// Byte offsets of one step's regions in the step buffer. The forward's arrays come first and
// the block tables last among them, so their offsets depend on (T, R) only: a graph captured for
// a padded size reads every later step of that size from the same addresses.
struct StepLayout {
  size_t stride = 0;        // int32 [1]: the block-table row stride
  size_t token_ids = 0;     // int32 [T]
  size_t positions = 0;     // int32 [T]
  size_t slots = 0;         // int32 [T]
  size_t row_seq = 0;       // int32 [T]
  size_t logit_rows = 0;    // int32 [R]
  size_t block_tables = 0;  // int32 [S, stride]
  size_t tasks = 0;         // SamplerRowTask [R]
  size_t adjusts = 0;       // SamplerAdjust [A]
  size_t digest_rows = 0;   // int32 [D]
  size_t bytes = 0;
};

StepLayout make_layout(int64_t T, int64_t S, int64_t R, int64_t stride, int64_t A, int64_t D) {
  StepLayout l;
  size_t at = 0;
  const auto take = [&at](size_t bytes) {
    const size_t offset = at;
    at = round_up_bytes(at + bytes, 64);
    return offset;
  };
  const auto n = [](int64_t count) { return static_cast<size_t>(count); };
  l.stride = take(sizeof(int32_t));
  l.token_ids = take(n(T) * sizeof(int32_t));
  l.positions = take(n(T) * sizeof(int32_t));
  l.slots = take(n(T) * sizeof(int32_t));
  l.row_seq = take(n(T) * sizeof(int32_t));
  l.logit_rows = take(n(R) * sizeof(int32_t));
  l.block_tables = take(n(S) * n(stride) * sizeof(int32_t));
  l.tasks = take(n(R) * sizeof(SamplerRowTask));
  l.adjusts = take(n(A) * sizeof(SamplerAdjust));
  l.digest_rows = take(n(D) * sizeof(int32_t));
  l.bytes = at;
  return l;
}

class CudaRunner final : public ModelRunner {
 public:
  CudaRunner(std::shared_ptr<const CudaModel> model, const EngineConfig& config)
      : model_(std::move(model)), config_(config) {}
  ~CudaRunner() override;

  Status allocate();
  Result<StepResult> execute(const StepPlan& plan, std::span<const RequestLogitsTask> tasks) override;
  const RunnerInfo& info() const override { return info_; }

 private:
  // The step's rows in logits order: score rows first, then the sampled rows (the last chunk).
  struct LogitRow {
    size_t wanted = 0;      // index into the step's wanted rows
    bool device = true;     // the device sampler finishes it
    bool copy_row = false;  // the whole row comes back to the host
  };
  Result<StepResult> run(const StepPlan& plan, std::span<const RequestLogitsTask> tasks,
                         const std::vector<WantedRow>& rows);
  int64_t graph_size_for(int64_t num_seqs) const;
  Status forward_eager(const CudaBatch& batch, const std::vector<std::pair<int64_t, int64_t>>& chunks,
                       const StepLayout& layout);
  Status capture_graph(int64_t size, const CudaBatch& batch);
  Status digest_rows_on_device(const StepLayout& l, int64_t num);
  Status plan_attention_of(const StepPlan& plan, int64_t S);
  CudaBatch batch_view(const StepLayout& l, int64_t T, int64_t R) const;
  template <typename T>
  T* host_at(size_t offset) const {
    return reinterpret_cast<T*>(step_host_.as<char>() + offset);
  }
  template <typename T>
  T* dev_at(size_t offset) const {
    return reinterpret_cast<T*>(step_dev_.as<char>() + offset);
  }

  std::shared_ptr<const CudaModel> model_;
  EngineConfig config_;
  RunnerInfo info_;
  Status broken_;
  cudaStream_t stream_ = nullptr;
  int64_t token_cap_ = 0, seq_cap_ = 0, stride_cap_ = 0, logit_cap_ = 0, adjust_cap_ = 0;
  bool graphs_enabled_ = true;
  std::map<int64_t, cudaGraphExec_t> graphs_;  // padded batch size -> decode graph

  PinnedMemory step_host_;       // the step buffer (StepLayout at capacity)
  DeviceMemory step_dev_;        // its device copy
  DeviceMemory kv_pool_;         // [num_layers][K, V][num_blocks, num_kv_heads, block_size, head_dim]
  std::vector<CudaKvLayer> kv_;  // [num_layers] views into kv_pool_
  DeviceMemory logits_;          // [logit_cap, vocab_rows] f32
  DeviceMemory scratch_;         // [logit_cap, vocab] f32: adjusted logits of the sampler
  DeviceMemory results_dev_;     // [token_cap] SamplerRowResult
  PinnedMemory results_host_;
  DeviceMemory digests_dev_;  // [seq_cap, 2] uint64
  PinnedMemory digests_host_;
  PinnedMemory rows_host_;  // [seq_cap, vocab] f32: whole rows that come back
  CudaActivationBuffers acts_;
  SamplerScratch sampler_scratch_;
  std::vector<SamplerAdjust> adjusts_;  // the step's adjustments (host staging)
  // The tensor-core attention (when the deployment runs it): its plan per step and the plan's
  // device copy; graph_ctas_: CTA rows of the per-split launch inside a decode graph.
  bool tensor_core_attn_ = false;
  AttentionShape attn_shape_;
  int num_sms_ = 0;         // the device's (the folded attention's rows per CTA depend on it: a place only)
  bool has_wgmma_ = false;  // likewise
  AttentionPlan attn_plan_;
  std::vector<int32_t> attn_pos_, attn_seq_;  // [T] host staging of the plan's input
  AttentionWorkBuffers attn_work_;
  int32_t graph_ctas_ = 1;
};

CudaRunner::~CudaRunner() {
  if (stream_ != nullptr) {
    (void)cudaStreamSynchronize(stream_);  // buffers are freed after the stream's work ends
    for (auto& [size, exec] : graphs_) (void)cudaGraphExecDestroy(exec);
    (void)cudaStreamDestroy(stream_);
  }
}

Status CudaRunner::allocate() {
  const ModelConfig& c = model_->config();
  const CudaModelDims& d = model_->dims();
  const CudaDevice& dev = model_->device();
  VOSTI_CUDA_RETURN_IF_ERROR(cudaSetDevice(dev.gemm.device));
  if (c.vocab_size > kMaxSamplerVocab)
    return unimplemented("the CUDA runner samples vocabularies of at most " + std::to_string(kMaxSamplerVocab) +
                         " tokens; this model has " + std::to_string(c.vocab_size));
  DType kv_dtype = DType::kBF16;
  if (config_.kv_cache_dtype == "f32") {
    kv_dtype = DType::kF32;
  } else if (config_.kv_cache_dtype != "auto" && config_.kv_cache_dtype != "bf16") {
    return invalid_argument("kv_cache_dtype must be auto, bf16 or f32, got \"" + config_.kv_cache_dtype + "\"");
  }
  if (config_.gpu_memory_utilization <= 0.0 || config_.gpu_memory_utilization > 1.0)
    return invalid_argument("gpu_memory_utilization must be in (0, 1], got " +
                            std::to_string(config_.gpu_memory_utilization));
  const int64_t bs = config_.block_size;
  int64_t max_len = config_.max_model_len > 0 ? config_.max_model_len : c.max_position_embeddings;
  seq_cap_ = config_.max_num_seqs;
  token_cap_ = config_.max_num_batched_tokens;
  stride_cap_ = cdiv(max_len, bs);
  logit_cap_ = round_up(std::min(token_cap_, std::max<int64_t>(seq_cap_, 64)), kLogitAlign);
  adjust_cap_ = std::min(seq_cap_, logit_cap_) * kAdjustsPerRow;
  const int64_t rows = round_up(token_cap_, kRowAlign);
  const int64_t vocab = c.vocab_size;

  VOSTI_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  const StepLayout cap = make_layout(token_cap_, seq_cap_, token_cap_, stride_cap_, adjust_cap_, seq_cap_);
  VOSTI_ASSIGN_OR_RETURN(step_host_, PinnedMemory::allocate(cap.bytes, "the step buffer"));
  VOSTI_ASSIGN_OR_RETURN(step_dev_, DeviceMemory::allocate(cap.bytes, "the step buffer"));
  const auto alloc = [](DeviceMemory& m, int64_t count, size_t elem, const char* what) -> Status {
    VOSTI_ASSIGN_OR_RETURN(m, DeviceMemory::allocate(static_cast<size_t>(count) * elem, what));
    return Status();
  };
  VOSTI_ASSIGN_OR_RETURN(acts_, CudaActivationBuffers::allocate(*model_, rows, logit_cap_, stream_));
  VOSTI_RETURN_IF_ERROR(alloc(logits_, logit_cap_ * d.vocab_rows, sizeof(float), "logits"));
  VOSTI_RETURN_IF_ERROR(alloc(scratch_, logit_cap_ * vocab, sizeof(float), "sampler scratch"));
  VOSTI_RETURN_IF_ERROR(alloc(results_dev_, token_cap_, sizeof(SamplerRowResult), "sampler results"));
  VOSTI_ASSIGN_OR_RETURN(
      results_host_,
      PinnedMemory::allocate(static_cast<size_t>(token_cap_) * sizeof(SamplerRowResult), "sampler results"));
  VOSTI_RETURN_IF_ERROR(alloc(digests_dev_, seq_cap_ * 2, sizeof(uint64_t), "digests"));
  VOSTI_ASSIGN_OR_RETURN(digests_host_,
                         PinnedMemory::allocate(static_cast<size_t>(seq_cap_) * 2 * sizeof(uint64_t), "digests"));
  VOSTI_ASSIGN_OR_RETURN(rows_host_, PinnedMemory::allocate(static_cast<size_t>(seq_cap_ * vocab) * sizeof(float),
                                                            "logits rows on the host"));

  // The KV pool: what the memory fraction leaves after everything above.
  const size_t elem = kv_element_bytes(kv_dtype);
  const int64_t layer_elems_per_block = bs * c.num_kv_heads * c.head_dim;
  const int64_t bytes_per_block = 2 * c.num_layers * layer_elems_per_block * static_cast<int64_t>(elem);
  int64_t num_blocks = config_.num_blocks;
  if (num_blocks <= 0) {
    size_t free_bytes = 0, total_bytes = 0;
    VOSTI_CUDA_RETURN_IF_ERROR(cudaMemGetInfo(&free_bytes, &total_bytes));
    const double reserved = (1.0 - config_.gpu_memory_utilization) * static_cast<double>(total_bytes);
    const double budget = static_cast<double>(free_bytes) - reserved - static_cast<double>(kHeadroomBytes);
    num_blocks = budget > 0 ? static_cast<int64_t>(budget / static_cast<double>(bytes_per_block)) : 0;
    if (num_blocks <= 0)
      return resource_exhausted("no GPU memory left for the KV cache: " + std::to_string(free_bytes >> 20) +
                                " MiB free of " + std::to_string(total_bytes >> 20) +
                                " MiB after the weights and buffers; raise --gpu-memory-utilization (now " +
                                std::to_string(config_.gpu_memory_utilization) + ") or lower --max-num-batched-tokens");
  }
  num_blocks = std::min<int64_t>(num_blocks, (int64_t{1} << 31) / bs - 1);  // slots are int32
  VOSTI_ASSIGN_OR_RETURN(kv_pool_, DeviceMemory::allocate(static_cast<size_t>(num_blocks * bytes_per_block),
                                                          "the KV cache (" + std::to_string(num_blocks) + " blocks)"));
  const size_t side_bytes = static_cast<size_t>(num_blocks * layer_elems_per_block) * elem;  // one layer's K
  kv_.resize(static_cast<size_t>(c.num_layers));
  for (int64_t li = 0; li < c.num_layers; ++li) {
    CudaKvLayer& k = kv_[static_cast<size_t>(li)];
    k.k = kv_pool_.as<char>() + (2 * li) * side_bytes;
    k.v = kv_pool_.as<char>() + (2 * li + 1) * side_bytes;
    k.dtype = kv_dtype;
    k.num_blocks = num_blocks;
    k.block_size = static_cast<int>(bs);
    k.num_kv_heads = static_cast<int>(c.num_kv_heads);
    k.head_dim = static_cast<int>(c.head_dim);
  }
  const int64_t cache_tokens = num_blocks * bs;
  tensor_core_attn_ = tensor_core_attention(kv_[0], static_cast<int>(c.num_heads));
  if (tensor_core_attn_) {
    attn_shape_ = {static_cast<int>(c.num_heads),
                   static_cast<int>(c.num_kv_heads),
                   static_cast<int>(c.head_dim),
                   config_.attention_split > 0 ? config_.attention_split : kAttnDefaultSplit,
                   kAttnRowsPerCta,
                   static_cast<int>(c.sliding_window)};
    VOSTI_RETURN_IF_ERROR(check_attention_shape(attn_shape_));
    // Split states: room for every sequence at kPartialSlotsPerSeq splits and for a few at the
    // full context; a step that needs more folds the rest in one CTA each (the same bits).
    const int64_t longest = std::min(max_len, cache_tokens);
    const int64_t slots = std::max(seq_cap_ * kPartialSlotsPerSeq, 4 * cdiv(longest, attn_shape_.split));
    VOSTI_ASSIGN_OR_RETURN(
        attn_work_, AttentionWorkBuffers::allocate(token_cap_, static_cast<int32_t>(slots), attn_shape_.num_heads,
                                                   attn_shape_.head_dim, attn_shape_.split, attn_shape_.window));
    // A decode graph's per-split launch: about two CTAs per SM, each striding over the items.
    graph_ctas_ = static_cast<int32_t>(std::max<int64_t>(1, cdiv(2 * dev.gemm.num_sms, c.num_kv_heads)));
    // Enough decode rows fold their splits in the per-split kernel, where it can (no merge).
    if (attention_decode_fits(attn_shape_.head_dim, attn_shape_.group(), static_cast<int>(bs)))
      attn_shape_.decode_fold_ctas = graph_ctas_;
    num_sms_ = dev.gemm.num_sms;
    has_wgmma_ = dev.gemm.has_wgmma;
    attn_pos_.reserve(static_cast<size_t>(token_cap_));
    attn_seq_.reserve(static_cast<size_t>(token_cap_));
  }
  if (config_.max_model_len > cache_tokens)
    return invalid_argument("max_model_len " + std::to_string(config_.max_model_len) + " exceeds the KV cache (" +
                            std::to_string(cache_tokens) + " tokens): raise the cache or lower max_model_len");
  max_len = std::min(max_len, cache_tokens);
  VOSTI_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));

  // The planted split (tests only) is a function of the step, which a captured graph cannot follow.
  graphs_enabled_ = config_.cuda_graphs && !config_.attention_split_follows_batch;
  info_.kv_cache_dtype = kv_dtype == DType::kF32 ? "f32" : "bf16";
  info_.num_blocks = num_blocks;
  info_.block_size = static_cast<int32_t>(bs);
  info_.max_model_len = static_cast<int32_t>(max_len);
  info_.kv_cache_bytes = num_blocks * bytes_per_block;
  info_.weight_bytes = static_cast<int64_t>(model_->num_weight_bytes());
  char desc[256];
  std::snprintf(desc, sizeof desc, "cuda:%d %s (sm_%d, %d SMs, %.1f GiB)%s", dev.gemm.device, dev.name.c_str(),
                dev.compute_capability, dev.gemm.num_sms, static_cast<double>(dev.total_memory) / (1u << 30),
                graphs_enabled_ ? ", CUDA graphs for decode" : "");
  info_.device = desc;
  return Status();
}

int64_t CudaRunner::graph_size_for(int64_t num_seqs) const {
  const int64_t limit = std::min(seq_cap_, token_cap_);
  for (int64_t g : kGraphSizes)
    if (g >= num_seqs && g <= limit) return g;
  return num_seqs <= limit ? limit : 0;  // the cap itself is the last size
}

CudaBatch CudaRunner::batch_view(const StepLayout& l, int64_t T, int64_t R) const {
  CudaBatch b;
  b.num_tokens = T;
  b.token_ids = dev_at<int32_t>(l.token_ids);
  b.positions = dev_at<int32_t>(l.positions);
  b.slots = dev_at<int32_t>(l.slots);
  b.row_seq = dev_at<int32_t>(l.row_seq);
  b.block_tables = dev_at<int32_t>(l.block_tables);
  b.block_table_stride = dev_at<int32_t>(l.stride);
  b.num_logit_rows = R;
  b.logit_rows = dev_at<int32_t>(l.logit_rows);
  return b;
}

Status CudaRunner::forward_eager(const CudaBatch& batch, const std::vector<std::pair<int64_t, int64_t>>& chunks,
                                 const StepLayout& layout) {
  VOSTI_RETURN_IF_ERROR(model_->forward_layers(batch, acts_.view(), kv_.data(), stream_));
  // All chunks but the last: logits, then the sampler writes their results before the next
  // chunk overwrites the logits (stream order).
  for (size_t ci = 0; ci + 1 < chunks.size(); ++ci) {
    const auto [begin, n] = chunks[ci];
    VOSTI_RETURN_IF_ERROR(model_->logits(batch.logit_rows + begin, n, acts_.view(), logits_.as<float>(), stream_));
    VOSTI_RETURN_IF_ERROR(sample_rows(logits_.as<float>(), model_->dims().vocab_rows, model_->config().vocab_size,
                                      dev_at<SamplerRowTask>(layout.tasks) + begin,
                                      dev_at<SamplerAdjust>(layout.adjusts), scratch_.as<float>(),
                                      results_dev_.as<SamplerRowResult>() + begin, n, stream_));
  }
  if (!chunks.empty()) {
    const auto [begin, n] = chunks.back();
    VOSTI_RETURN_IF_ERROR(model_->logits(batch.logit_rows + begin, n, acts_.view(), logits_.as<float>(), stream_));
  }
  return Status();
}

Status CudaRunner::capture_graph(int64_t size, const CudaBatch& batch) {
  cudaGraph_t graph = nullptr;
  VOSTI_CUDA_RETURN_IF_ERROR(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal));
  Status recorded = model_->forward_layers(batch, acts_.view(), kv_.data(), stream_);
  if (recorded.ok()) recorded = model_->logits(batch.logit_rows, size, acts_.view(), logits_.as<float>(), stream_);
  const cudaError_t ended = cudaStreamEndCapture(stream_, &graph);
  if (!recorded.ok() || ended != cudaSuccess) {
    if (graph != nullptr) (void)cudaGraphDestroy(graph);
    (void)cudaGetLastError();
    return recorded.ok() ? cuda_status(ended, "cudaStreamEndCapture") : recorded;
  }
  cudaGraphExec_t exec = nullptr;
  const cudaError_t made = cudaGraphInstantiate(&exec, graph, 0);
  (void)cudaGraphDestroy(graph);
  VOSTI_CUDA_RETURN_IF_ERROR(made);
  graphs_[size] = exec;
  return Status();
}

Result<StepResult> CudaRunner::execute(const StepPlan& plan, std::span<const RequestLogitsTask> tasks) {
  if (!broken_.ok()) return broken_;
  // CUDA's current device is per thread, and the engine's thread need not be the loader's.
  if (const Status s = cuda_status(cudaSetDevice(model_->device().gemm.device), "cudaSetDevice"); !s.ok()) return s;
  const std::vector<WantedRow> rows = wanted_rows(plan, tasks);
  Result<StepResult> out = run(plan, tasks, rows);
  if (!out.ok()) broken_ = out.status().with_context("the CUDA runner is unusable");
  return out;
}

Result<StepResult> CudaRunner::run(const StepPlan& plan, std::span<const RequestLogitsTask> tasks,
                                   const std::vector<WantedRow>& rows) {
  const auto t0 = Clock::now();
  const ModelConfig& c = model_->config();
  const int64_t vocab = c.vocab_size, vocab_rows = model_->dims().vocab_rows, bs = info_.block_size;
  const int64_t T = plan.num_batched_tokens, S = static_cast<int64_t>(plan.requests.size());
  VOSTI_CHECK(T >= 1 && T <= token_cap_ && S <= seq_cap_, "the plan exceeds the runner's token or sequence caps");
  int64_t stride = 1;
  bool decode = true;
  for (const ScheduledRequest& r : plan.requests) {
    stride = std::max<int64_t>(stride, static_cast<int64_t>(r.block_table.size()));
    decode = decode && r.num_new_tokens == 1;
  }
  VOSTI_CHECK(stride <= stride_cap_, "a block table is longer than max_model_len allows");

  // Logits order: score rows, then sampled rows (the last chunk, which stays in logits_).
  std::vector<LogitRow> order;
  int64_t num_score = 0;
  for (size_t i = 0; i < rows.size(); ++i)
    if (rows[i].kind == RowKind::kScore) order.push_back({i, true, false}), ++num_score;
  for (size_t i = 0; i < rows.size(); ++i)
    if (rows[i].kind == RowKind::kSample) order.push_back({i, true, false});
  decode = decode && num_score == 0;
  if (tensor_core_attn_) {
    VOSTI_RETURN_IF_ERROR(plan_attention_of(plan, S));
    decode = decode && attn_plan_.folded.empty();  // a graph launches the per-split items only
  }
  const int64_t G = decode && graphs_enabled_ ? graph_size_for(S) : 0;
  const int64_t Tl = G > 0 ? G : T, Sl = G > 0 ? G : S;
  const int64_t R = static_cast<int64_t>(order.size());
  const int64_t Rl = G > 0 ? G : R;

  // Sampler tasks and adjustments of the logits rows, the whole rows that must come back.
  adjusts_.clear();
  std::vector<SamplerRowTask> row_tasks(static_cast<size_t>(Rl));
  std::vector<int64_t> result_index(rows.size(), -1);  // wanted row -> index of its result
  std::vector<int32_t> digest_rows;                    // rows (in the last chunk) digested on the device
  std::vector<int64_t> digest_of(rows.size(), -1);     // wanted row -> index into the digests
  const int64_t sample_begin = G > 0 ? 0 : num_score;  // first logits row of the last chunk
  for (size_t k = 0; k < order.size(); ++k) {
    LogitRow& o = order[k];
    const WantedRow& w = rows[o.wanted];
    const RequestLogitsTask& t = tasks[static_cast<size_t>(w.plan_index)];
    const int64_t at = G > 0 ? w.plan_index : static_cast<int64_t>(k);  // decode graphs: row = sequence
    result_index[o.wanted] = at;
    SamplerRowTask& st = row_tasks[static_cast<size_t>(at)];
    if (w.kind == RowKind::kScore) {
      st = score_task(t, w);
      continue;
    }
    st = sample_task(t);
    const size_t before = adjusts_.size();
    build_adjusts(t, adjusts_);
    const auto count = static_cast<int64_t>(adjusts_.size() - before);
    if (static_cast<int64_t>(adjusts_.size()) > adjust_cap_) {  // no room: the host samples this row
      adjusts_.resize(before);
      o.device = false;
    } else {
      st.adjust_begin = static_cast<int32_t>(before);
      st.adjust_count = static_cast<int32_t>(count);
    }
    const bool device_digest = t.digest && vocab >= kMinDeviceDigestVocab;
    o.copy_row = t.full_logits || config_.check_device_sampler || !o.device || (t.digest && !device_digest);
    if (device_digest) {
      digest_of[o.wanted] = static_cast<int64_t>(digest_rows.size());
      digest_rows.push_back(static_cast<int32_t>(at - sample_begin));
    }
  }

  // The step buffer: one layout, filled in pinned memory, one copy.
  const StepLayout l =
      make_layout(Tl, Sl, Rl, stride, static_cast<int64_t>(adjusts_.size()), static_cast<int64_t>(digest_rows.size()));
  *host_at<int32_t>(l.stride) = static_cast<int32_t>(stride);
  int32_t* ids = host_at<int32_t>(l.token_ids);
  int32_t* pos = host_at<int32_t>(l.positions);
  int32_t* slots = host_at<int32_t>(l.slots);
  int32_t* seq = host_at<int32_t>(l.row_seq);
  int32_t* tables = host_at<int32_t>(l.block_tables);
  int64_t row = 0;
  for (int64_t s = 0; s < S; ++s) {
    const ScheduledRequest& r = plan.requests[static_cast<size_t>(s)];
    for (int32_t j = 0; j < r.num_new_tokens; ++j, ++row) {
      const int32_t p = r.num_computed_tokens + j;
      const int64_t block = p / bs;
      VOSTI_CHECK(block < static_cast<int64_t>(r.block_table.size()), "block table does not cover the step");
      ids[row] = r.token_ids[static_cast<size_t>(j)];
      pos[row] = p;
      slots[row] = static_cast<int32_t>(r.block_table[static_cast<size_t>(block)] * bs + p % bs);
      seq[row] = static_cast<int32_t>(s);
    }
    int32_t* t = tables + s * stride;
    std::copy(r.block_table.begin(), r.block_table.end(), t);
    std::fill(t + r.block_table.size(), t + stride, 0);
  }
  for (; row < Tl; ++row) ids[row] = 0, pos[row] = -1, slots[row] = -1, seq[row] = 0;  // padding rows
  int32_t* logit_rows = host_at<int32_t>(l.logit_rows);
  if (G > 0) {
    for (int64_t k = 0; k < G; ++k) logit_rows[k] = static_cast<int32_t>(k);
  } else {
    for (size_t k = 0; k < order.size(); ++k) logit_rows[k] = rows[order[k].wanted].token_row;
  }
  std::memcpy(host_at<SamplerRowTask>(l.tasks), row_tasks.data(), row_tasks.size() * sizeof(SamplerRowTask));
  std::memcpy(host_at<SamplerAdjust>(l.adjusts), adjusts_.data(), adjusts_.size() * sizeof(SamplerAdjust));
  std::memcpy(host_at<int32_t>(l.digest_rows), digest_rows.data(), digest_rows.size() * sizeof(int32_t));
  VOSTI_CUDA_RETURN_IF_ERROR(
      cudaMemcpyAsync(step_dev_.as<void>(), step_host_.as<void>(), l.bytes, cudaMemcpyHostToDevice, stream_));

  // The forward and the logits: a graph replay, or eager launches in chunks of logit rows.
  CudaBatch batch = batch_view(l, Tl, Rl);
  if (tensor_core_attn_) {
    VOSTI_ASSIGN_OR_RETURN(batch.attention, attn_work_.upload(attn_plan_, stream_));
    if (G > 0) batch.attention = attn_work_.graph_view(G, graph_ctas_);
  }
  std::vector<std::pair<int64_t, int64_t>> chunks;  // (first logits row, rows)
  for (int64_t b = 0; b < num_score && G == 0; b += logit_cap_)
    chunks.push_back({b, std::min(logit_cap_, num_score - b)});
  if (Rl - sample_begin > 0) chunks.push_back({sample_begin, Rl - sample_begin});
  auto graph = G > 0 ? graphs_.find(G) : graphs_.end();
  const bool capture = G > 0 && graph == graphs_.end();
  if (graph != graphs_.end()) {
    VOSTI_CUDA_RETURN_IF_ERROR(cudaGraphLaunch(graph->second, stream_));
  } else {
    VOSTI_RETURN_IF_ERROR(forward_eager(batch, chunks, l));
  }
  if (!chunks.empty()) {  // the last chunk: sampler, digests, whole rows
    const auto [begin, n] = chunks.back();
    VOSTI_RETURN_IF_ERROR(sample_rows(logits_.as<float>(), vocab_rows, vocab, dev_at<SamplerRowTask>(l.tasks) + begin,
                                      dev_at<SamplerAdjust>(l.adjusts), scratch_.as<float>(),
                                      results_dev_.as<SamplerRowResult>() + begin, n, stream_));
    if (!digest_rows.empty()) {
      VOSTI_RETURN_IF_ERROR(digest_rows_on_device(l, static_cast<int64_t>(digest_rows.size())));
    }
    for (const LogitRow& o : order) {
      if (!o.copy_row) continue;
      const int64_t at = result_index[o.wanted] - begin;                         // row of logits_
      const int64_t slot = static_cast<int64_t>(&o - order.data()) - num_score;  // index among sampled rows
      VOSTI_CUDA_RETURN_IF_ERROR(
          cudaMemcpyAsync(rows_host_.as<float>() + slot * vocab, logits_.as<float>() + at * vocab_rows,
                          static_cast<size_t>(vocab) * sizeof(float), cudaMemcpyDeviceToHost, stream_));
    }
  }
  VOSTI_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(results_host_.as<void>(), results_dev_.as<void>(),
                                             static_cast<size_t>(Rl) * sizeof(SamplerRowResult), cudaMemcpyDeviceToHost,
                                             stream_));
  if (!digest_rows.empty()) {
    VOSTI_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(digests_host_.as<void>(), digests_dev_.as<void>(),
                                               digest_rows.size() * 2 * sizeof(uint64_t), cudaMemcpyDeviceToHost,
                                               stream_));
  }
  VOSTI_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
  const auto t_device = Clock::now();
  if (capture) {
    // First step of this padded size ran eagerly (same launches, same addresses); record it.
    const Status captured = capture_graph(G, batch);
    if (!captured.ok()) {
      graphs_enabled_ = false;  // eager from now on: the bits are the same either way
      std::fprintf(stderr, "vosti: CUDA graph capture failed, running eagerly: %s\n", captured.to_string().c_str());
    }
  }

  // Results in wanted order: the device's, finished on the host; rows it handed back sampled here.
  StepResult out;
  out.rows.reserve(rows.size());
  const auto* results = results_host_.as<SamplerRowResult>();
  std::vector<RowResult> by_wanted(rows.size());
  for (size_t k = 0; k < order.size(); ++k) {
    const LogitRow& o = order[k];
    const WantedRow& w = rows[o.wanted];
    const RequestLogitsTask& t = tasks[static_cast<size_t>(w.plan_index)];
    const SamplerRowResult& d = results[result_index[o.wanted]];
    std::span<const float> host_row;  // sampled rows: its slot of rows_host_
    if (w.kind == RowKind::kSample)
      host_row = {rows_host_.as<float>() + (static_cast<int64_t>(k) - num_score) * vocab, static_cast<size_t>(vocab)};
    RowResult r;
    if (w.kind == RowKind::kSample && (!o.device || d.status != kSamplerOk)) {
      if (!o.copy_row) {  // the row is still in logits_ (the last chunk): fetch it now
        const int64_t at = result_index[o.wanted] - sample_begin;
        VOSTI_CUDA_RETURN_IF_ERROR(cudaMemcpy(const_cast<float*>(host_row.data()),
                                              logits_.as<float>() + at * vocab_rows,
                                              static_cast<size_t>(vocab) * sizeof(float), cudaMemcpyDeviceToHost));
      }
      r = finish_row_on_host(host_row, w, t, sampler_scratch_);
    } else {
      r = row_from_device(d, w);
      if (w.kind == RowKind::kSample) {
        if (t.digest) {
          if (digest_of[o.wanted] >= 0) {
            const uint64_t* g = digests_host_.as<uint64_t>() + 2 * digest_of[o.wanted];
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
                                  std::to_string(plan.requests[static_cast<size_t>(w.plan_index)].id) +
                                  " at position " + std::to_string(w.position) + ": device token " +
                                  std::to_string(r.scored.token) + ", host token " + std::to_string(h.scored.token));
          }
        }
      }
    }
    by_wanted[o.wanted] = std::move(r);
  }
  for (RowResult& r : by_wanted) out.rows.push_back(std::move(r));
  out.seconds_forward = seconds(t0, t_device);
  out.seconds_sampling = seconds(t_device, Clock::now());
  return out;
}

// The step's attention plan from its rows (positions and sequences in plan order).
Status CudaRunner::plan_attention_of(const StepPlan& plan, int64_t S) {
  attn_pos_.clear();
  attn_seq_.clear();
  for (int64_t s = 0; s < S; ++s) {
    const ScheduledRequest& r = plan.requests[static_cast<size_t>(s)];
    for (int32_t j = 0; j < r.num_new_tokens; ++j) {
      attn_pos_.push_back(r.num_computed_tokens + j);
      attn_seq_.push_back(static_cast<int32_t>(s));
    }
  }
  AttentionShape shape = attn_shape_;
  shape.folded_rows =
      attention_folded_rows(shape, info_.block_size, static_cast<int64_t>(attn_pos_.size()), num_sms_, has_wgmma_);
  if (config_.attention_split_follows_batch && S > 1) shape.split *= 2;  // the planted violation
  return plan_attention(attn_pos_, attn_seq_, shape, attn_work_.partial_capacity(), &attn_plan_);
}

Status CudaRunner::digest_rows_on_device(const StepLayout& l, int64_t num) {
  return digest_rows(logits_.as<float>(), model_->dims().vocab_rows, model_->config().vocab_size,
                     dev_at<int32_t>(l.digest_rows), num, digests_dev_.as<uint64_t>(), stream_);
}

}  // namespace

Result<std::shared_ptr<const CudaDeviceModel>> CudaDeviceModel::load(const std::string& path) {
  VOSTI_ASSIGN_OR_RETURN(std::shared_ptr<const ModelFile> file, ModelFile::open(path));
  VOSTI_ASSIGN_OR_RETURN(std::shared_ptr<const CudaModel> model, CudaModel::load(*file));
  return std::make_shared<const CudaDeviceModel>(std::move(model));
}

Result<std::unique_ptr<ModelRunner>> CudaDeviceModel::make_runner(const EngineConfig& config) const {
  auto runner = std::make_unique<CudaRunner>(model_, config);
  VOSTI_RETURN_IF_ERROR(runner->allocate());
  return std::unique_ptr<ModelRunner>(std::move(runner));
}

}  // namespace vosti
