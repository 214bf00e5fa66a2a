// The engine: schedule -> execute -> sample -> postprocess, one step at a time.
//
// Determinism (DESIGN.md section 2): the scheduler decides only WHICH tokens run in a
// step; every row's arithmetic is batch-invariant (kernels), the KV a row reads is a
// pure function of its prefix (cache), and the sampler draws from Philox keyed by
// (seed, output position). Nothing here feeds batch state into a logit or a draw.
#include "engine/engine.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <utility>

#include <xxhash.h>

#include "engine/admission.h"
#include "engine/live_request.h"
#include "engine/same_architecture.h"
#include "core/thread_pool.h"
#include "engine/speculative.h"
#include "model/model.h"
#include "runner/device_model.h"
#include "runner/load_device_model.h"
#include "runner/model_runner.h"
#include "sched/scheduler.h"
#include "structured/grammar.h"
#include "tokenizer/tokenizer.h"

namespace vosti {

namespace {

// The step's rows of request `i` whose KV stays: its known tokens', then each draft token's while
// the target sampled that very token at its position (emit_sampled's acceptance).
int32_t rows_kept(const ScheduledRequest& s, const StepResult& out, int32_t i) {
  if (s.num_draft_tokens == 0) return s.num_new_tokens;
  const std::span<const int32_t> draft =
      std::span<const int32_t>(s.token_ids).last(static_cast<size_t>(s.num_draft_tokens));
  int32_t accepted = 0;
  for (const RowResult& row : out.rows) {
    if (row.plan_index != i || row.kind != RowKind::kSample) continue;
    if (accepted == s.num_draft_tokens || row.scored.token != draft[static_cast<size_t>(accepted)]) break;
    ++accepted;
  }
  return s.num_new_tokens - s.num_draft_tokens + accepted;
}

// The engine's LogprobsMode; create() refused a name that is none.
LogprobsMode logprobs_mode_of(const EngineConfig& config) {
  LogprobsMode mode = LogprobsMode::kRawLogprobs;
  (void)parse_logprobs_mode(config.logprobs_mode, mode);
  return mode;
}

int32_t count_moe_layers(const ModelConfig& c) {
  int32_t n = 0;
  for (const LayerSpec& l : c.layers) n += l.moe.enabled() ? 1 : 0;
  return n;
}

class EngineImpl final : public Engine {
 public:
  EngineImpl(std::shared_ptr<const DeviceModel> model, EngineConfig config, std::shared_ptr<const Tokenizer> tokenizer,
             std::unique_ptr<ModelRunner> runner, SchedulerConfig scheduler_config, Scheduler scheduler,
             SpeculativeConfig speculative, std::shared_ptr<const Drafter> drafter, EngineHooks hooks)
      : model_(std::move(model)),
        config_(std::move(config)),
        tokenizer_(std::move(tokenizer)),
        runner_(std::move(runner)),
        scheduler_config_(scheduler_config),
        scheduler_(std::move(scheduler)),
        model_config_(model_->config()),
        info_(runner_->info()),
        vocab_size_(model_->config().vocab_size),
        eos_token_ids_(model_->config().eos_token_ids),
        num_moe_layers_(count_moe_layers(model_->config())),
        logprobs_mode_(logprobs_mode_of(config_)),
        speculative_(std::move(speculative)),
        drafter_(std::move(drafter)),
        hooks_(std::move(hooks)) {}

  Result<RequestId> add_request(RequestSpec spec, OutputCallback callback) override {
    VOSTI_RETURN_IF_ERROR(validate_request(spec, limits()));
    if (!broken_.ok()) return broken_;
    if (const int level = sleep_level_.load(); level != 0)
      return failed_precondition("the engine is asleep (level " + std::to_string(level) +
                                 "): wake it up (POST /wake_up, LLM.wake_up()) before sending requests");
    StopConditions stop = stop_conditions(spec, limits());
    StartedGrammar grammar;
    if (spec.structured) {
      VOSTI_ASSIGN_OR_RETURN(std::shared_ptr<GrammarCache> cache, grammar_cache(stop));
      VOSTI_ASSIGN_OR_RETURN(grammar, start_grammar(*cache, *spec.structured));
    }
    std::lock_guard<std::mutex> lock(mu_);
    const RequestId id = next_id_++;
    pending_.push_back(std::make_unique<LiveRequest>(id, std::move(spec), std::move(stop), std::move(callback),
                                                     tokenizer_.get(), std::move(grammar.state),
                                                     std::move(grammar.first_mask)));
    return id;
  }

  void abort(RequestId id) override {
    std::lock_guard<std::mutex> lock(mu_);
    aborts_.push_back(id);
  }

  void reset_prefix_cache() override {
    std::lock_guard<std::mutex> lock(mu_);
    reset_prefix_cache_ = true;
  }

  bool has_work() const override {
    std::lock_guard<std::mutex> lock(mu_);
    return !pending_.empty() || !aborts_.empty() || !live_.empty() || reset_prefix_cache_;
  }

  EngineStats stats() const override {
    std::lock_guard<std::mutex> lock(mu_);
    return stats_;
  }

  const EngineConfig& config() const override { return config_; }
  const DeviceModel& model() const override { return *model_; }
  const RunnerInfo& runner_info() const override { return info_; }

  bool step() override;
  Status replace_model(const ModelLoader& load, uint64_t identity) override;
  Status sleep(int level) override;
  Status wake_up(const ModelLoader& load) override;
  int sleep_level() const override { return sleep_level_.load(); }

 private:
  AdmissionLimits limits() const {
    return {vocab_size_, config_.max_model_len, num_moe_layers_, model_config_.name, tokenizer_.get(), eos_token_ids_};
  }
  // The grammar cache, made at the first structured request (any thread).
  Result<std::shared_ptr<GrammarCache>> grammar_cache(const StopConditions& stop);
  void admit_and_abort();
  std::vector<RequestLogitsTask> logits_tasks(const StepPlan& plan);
  void record_routed(const StepPlan& plan, const StepResult& out);
  void prepare_grammars(const StepPlan& plan, const StepResult& out);
  void postprocess(const StepPlan& plan, const StepResult& out);
  void emit_sampled(const ScheduledRequest& s, LiveRequest& r, std::span<const RowResult* const> sampled);
  void propose_draft(const LiveRequest& r);
  void finish(LiveRequest& r, FinishReason reason);
  void fail_all(const Status& error);
  void publish_stats();
  // kFailedPrecondition naming the counts when any request is queued or live; clears stale aborts.
  Status check_idle(const std::string& action);
  // Swaps in `next` as the scheduler, keeping the old one's counters in retired_stats_.
  void retire_scheduler(Scheduler next);
  // A loaded model that can replace model_config_'s: same device and architecture.
  Status check_replacement(const Result<std::shared_ptr<const DeviceModel>>& model) const;

  std::shared_ptr<const DeviceModel> model_;  // null only asleep at level 2
  EngineConfig config_;
  std::shared_ptr<const Tokenizer> tokenizer_;
  std::unique_ptr<ModelRunner> runner_;
  SchedulerConfig scheduler_config_;
  Scheduler scheduler_;
  ModelConfig model_config_;  // model_'s, kept while asleep at level 2
  RunnerInfo info_;           // runner_'s, with the released bytes zeroed while asleep
  std::atomic<int> sleep_level_{0};
  SchedulerStats retired_stats_;  // the counters of schedulers replace_model() retired
  // The first model's, kept for add_request() on other threads (a replacement has the same
  // architecture, and the engine keeps its stop tokens).
  const int64_t vocab_size_;
  const std::vector<int64_t> eos_token_ids_;
  const int32_t num_moe_layers_;      // layers whose MLP is a mixture of experts (routed_experts needs one)
  const LogprobsMode logprobs_mode_;  // config_.logprobs_mode, checked by create()
  Status broken_;  // the runner's failure, sticky: every request then fails with it (step thread writes)
  const SpeculativeConfig speculative_;
  const std::shared_ptr<const Drafter> drafter_;  // null: speculation off
  const EngineHooks hooks_;                       // tests' seams (engine.h); empty in the product
  std::vector<std::vector<int32_t>> histories_;   // [plan size] outputs ++ draft of speculating requests
  std::vector<const RowResult*> sampled_;         // one request's sampled rows (postprocess scratch)
  // Structured outputs' grammar work of a step, on a pool once a step has enough of it
  // (config_.structured_output_pool_threshold).
  static constexpr int kMaxGrammarThreads = 8;
  std::vector<std::pair<LiveRequest*, int32_t>> grammar_jobs_;  // (request, its sampled token)
  std::unique_ptr<ThreadPool> grammar_pool_;                    // made at the first step that needs it
  std::vector<std::vector<uint32_t>> draft_masks_;              // [plan size] masks of speculating structured requests
  std::mutex grammars_mu_;                                      // guards grammars_' creation
  std::shared_ptr<GrammarCache> grammars_;                      // made at the first structured request
  int64_t num_drafts_ = 0, num_draft_tokens_ = 0, num_accepted_tokens_ = 0;

  mutable std::mutex mu_;  // guards pending_, aborts_, reset_prefix_cache_, next_id_, stats_, live_'s membership
  std::vector<std::unique_ptr<LiveRequest>> pending_;
  std::vector<RequestId> aborts_;
  bool reset_prefix_cache_ = false;  // applied by the next step before it admits anything
  RequestId next_id_ = 1;
  EngineStats stats_;
  std::unordered_map<RequestId, std::unique_ptr<LiveRequest>> live_;  // step thread only (size read under mu_)
  int64_t num_generated_ = 0;
};

Result<std::shared_ptr<GrammarCache>> EngineImpl::grammar_cache(const StopConditions& stop) {
  std::lock_guard<std::mutex> lock(grammars_mu_);
  // The stop ids of the model and tokenizer (the same for every request: a request's own
  // stop_token_ids end it through the stop checker, not the grammar).
  if (!grammars_) {
    VOSTI_ASSIGN_OR_RETURN(grammars_, GrammarCache::create(*tokenizer_, vocab_size_, stop.eos_token_ids));
  }
  return grammars_;
}

void EngineImpl::admit_and_abort() {
  std::vector<std::unique_ptr<LiveRequest>> pending;
  std::vector<RequestId> aborts;
  bool reset = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    pending.swap(pending_);
    aborts.swap(aborts_);
    reset = std::exchange(reset_prefix_cache_, false);
  }
  // The reset and the drain happen under one lock: a request added after reset_prefix_cache()
  // returned is admitted after the reset, never before it.
  if (reset) scheduler_.reset_prefix_cache();
  for (auto& r : pending) {
    if (!broken_.ok()) {
      r->fail(broken_.message());
      continue;
    }
    const RequestId id = r->id();
    // Prompt logprobs and routed experts are computed per position: a cached position has none.
    const bool use_prefix_cache = !r->spec().prompt_logprobs && !r->spec().routed_experts;
    Status s = scheduler_.add_request(id, r->spec().prompt, r->spec().priority, use_prefix_cache);
    if (!s.ok()) {
      r->fail(s.message());
      continue;
    }
    std::lock_guard<std::mutex> lock(mu_);
    live_.emplace(id, std::move(r));
  }
  // Admission ran first, so an abort of a request added in the same interval finds it;
  // an id that is not live (finished, unknown) is ignored.
  for (RequestId id : aborts) {
    auto it = live_.find(id);
    if (it != live_.end()) finish(*it->second, FinishReason::kAbort);
  }
}

std::vector<RequestLogitsTask> EngineImpl::logits_tasks(const StepPlan& plan) {
  std::vector<RequestLogitsTask> tasks(plan.requests.size());
  histories_.resize(plan.requests.size());
  draft_masks_.resize(plan.requests.size());
  for (size_t i = 0; i < plan.requests.size(); ++i) {
    const ScheduledRequest& s = plan.requests[i];
    const LiveRequest& r = *live_.at(s.id);
    RequestLogitsTask& t = tasks[i];
    t.sampling = &r.spec().sampling;
    t.seed = r.seed();
    t.prompt = r.spec().prompt;
    t.outputs = r.outputs();
    t.sample = s.completes_known_tokens && r.spec().max_tokens > 0;
    t.score_prompt = r.wants_prompt_logits(s.num_computed_tokens);
    t.digest = r.spec().logits_digests;
    t.full_logits = r.spec().return_logits;
    t.routed_experts = r.spec().routed_experts;
    t.logprobs_mode = logprobs_mode_;
    t.sampling_mask = r.spec().sampling_masks;
    if (t.sample && s.num_draft_tokens > 0) {
      std::vector<int32_t>& h = histories_[i];
      h.assign(r.outputs().begin(), r.outputs().end());
      h.insert(h.end(), s.token_ids.end() - s.num_draft_tokens, s.token_ids.end());
      t.num_draft = s.num_draft_tokens;
      t.history = h;
    }
    if (t.sample && r.has_grammar()) {
      t.mask_words = static_cast<int32_t>(r.next_mask().size());
      t.allowed = r.next_mask();
      if (s.num_draft_tokens > 0) {
        live_.at(s.id)->draft_masks(std::span<const int32_t>(s.token_ids).last(static_cast<size_t>(s.num_draft_tokens)),
                                    draft_masks_[i]);
        t.allowed = draft_masks_[i];
      }
    }
  }
  return tasks;
}

bool EngineImpl::step() {
  using Clock = std::chrono::steady_clock;
  const auto t_begin = Clock::now();
  admit_and_abort();
  StepPlan plan = scheduler_.schedule();
  if (plan.empty()) {
    publish_stats();
    return false;
  }
  const std::vector<RequestLogitsTask> tasks = logits_tasks(plan);
  Result<StepResult> out = runner_->execute(plan, tasks);
  if (!out.ok()) {
    fail_all(out.status());
    publish_stats();
    return true;
  }
  scheduler_.on_step_done(plan);
  record_routed(plan, *out);
  postprocess(plan, *out);
  const auto t_end = Clock::now();
  if (config_.check_invariants) {
    const Status inv = scheduler_.check_invariants();
    VOSTI_CHECK(inv.ok(), inv.to_string());
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    stats_.num_steps++;
    stats_.seconds_in_steps += std::chrono::duration<double>(t_end - t_begin).count();
    stats_.seconds_in_forward += out->seconds_forward;
    stats_.seconds_in_sampling += out->seconds_sampling;
  }
  publish_stats();
  return true;
}

// Each routed request's new positions; a recomputed position that routes differently fails that
// request alone (LiveRequest::record_routed), before postprocess would emit from it.
void EngineImpl::record_routed(const StepPlan& plan, const StepResult& out) {
  const int32_t top_k = num_moe_layers_ > 0 ? static_cast<int32_t>(model_config_.moe().top_k) : 0;
  for (const RoutedRows& rows : out.routed) {
    const ScheduledRequest& scheduled = plan.requests[static_cast<size_t>(rows.plan_index)];
    const RequestId id = scheduled.id;
    LiveRequest& r = *live_.at(id);
    // A rejected draft's position is computed again with the target's token: only kept rows count.
    const auto kept =
        static_cast<size_t>(rows_kept(scheduled, out, rows.plan_index)) * static_cast<size_t>(num_moe_layers_ * top_k);
    const Status s =
        r.record_routed(rows.first_position, std::span<const int32_t>(rows.ids).first(std::min(kept, rows.ids.size())),
                        num_moe_layers_, top_k);
    if (s.ok()) continue;
    scheduler_.finish(id);
    r.fail(s.message());
    std::lock_guard<std::mutex> lock(mu_);
    live_.erase(id);
  }
}

// Structured outputs: the grammars of the step's requests that sampled one token (no draft) advance
// by it and fill their next masks before the serial pass below, on a thread pool when there are
// enough of them (each request's grammar is its own: the same masks in any order; LiveRequest::
// prepare_grammar). bench/grammar_mask_bench: ~10 us a request, 2.5 ms a step at batch 256.
void EngineImpl::prepare_grammars(const StepPlan& plan, const StepResult& out) {
  grammar_jobs_.clear();
  for (const RowResult& row : out.rows) {
    const ScheduledRequest& s = plan.requests[static_cast<size_t>(row.plan_index)];
    if (row.kind != RowKind::kSample || s.num_draft_tokens > 0) continue;
    const auto live = live_.find(s.id);
    if (live == live_.end() || !live->second->has_grammar()) continue;
    grammar_jobs_.push_back({live->second.get(), row.scored.token});
  }
  if (grammar_jobs_.size() < static_cast<size_t>(config_.structured_output_pool_threshold)) return;
  if (!grammar_pool_) {
    const int threads =
        config_.structured_output_threads > 0
            ? config_.structured_output_threads
            : std::min<int>(kMaxGrammarThreads, static_cast<int>(std::thread::hardware_concurrency() / 2));
    if (threads < 2) return;
    grammar_pool_ = std::make_unique<ThreadPool>(threads);
  }
  grammar_pool_->parallel_for(grammar_jobs_.size(), 1, [this](size_t begin, size_t end, int worker) {
    for (size_t j = begin; j < end; ++j) {
      LiveRequest& r = *grammar_jobs_[j].first;
      r.prepare_grammar(grammar_jobs_[j].second);
      if (hooks_.pooled_mask) r.edit_prepared_mask([&](std::span<uint32_t> mask) { hooks_.pooled_mask(mask, worker); });
    }
  });
}

void EngineImpl::postprocess(const StepPlan& plan, const StepResult& out) {
  prepare_grammars(plan, out);
  size_t next_row = 0;  // rows come in plan order (runner/step_batch.h: wanted order)
  for (size_t i = 0; i < plan.requests.size(); ++i) {
    const ScheduledRequest& s = plan.requests[i];
    const auto live = live_.find(s.id);
    sampled_.clear();
    for (; next_row < out.rows.size() && out.rows[next_row].plan_index == static_cast<int32_t>(i); ++next_row) {
      if (live == live_.end()) continue;  // failed this step (record_routed): its rows go nowhere
      LiveRequest& r = *live->second;
      const RowResult& row = out.rows[next_row];
      if (row.kind == RowKind::kScore) {
        r.record_prompt_score(row.position, row.scored, row.digest);
      } else {
        sampled_.push_back(&row);
      }
    }
    if (live == live_.end() || !s.completes_known_tokens) continue;
    LiveRequest& r = *live->second;
    const RequestState* state = scheduler_.find(s.id);
    VOSTI_CHECK(state != nullptr, "scheduled request vanished");
    r.prompt_done(state->num_cached_tokens);
    if (r.spec().max_tokens == 0) {
      finish(r, FinishReason::kLength);
      continue;
    }
    VOSTI_CHECK(sampled_.size() == static_cast<size_t>(s.num_draft_tokens) + 1,
                "the runner returned no sampled row for each verify row of a request that completed its tokens");
    emit_sampled(s, r, sampled_);
  }
}

// Emits a request's sampled rows in order: the first, then each next one while the draft token
// before it equals the token just emitted (a verify chunk's rows past a rejected draft token read
// KV of a token the request does not have). Each token goes through the same stop checks and
// outputs as without speculation; the scheduler keeps the KV of exactly the accepted positions.
void EngineImpl::emit_sampled(const ScheduledRequest& s, LiveRequest& r, std::span<const RowResult* const> sampled) {
  const int32_t num_draft = s.num_draft_tokens;
  const std::span<const int32_t> draft = std::span<const int32_t>(s.token_ids).last(static_cast<size_t>(num_draft));
  int32_t num_accepted = 0;
  FinishReason reason = FinishReason::kNone;
  for (size_t k = 0; k < sampled.size(); ++k) {
    const RowResult& row = *sampled[k];
    ++num_generated_;
    const bool at_max_len = scheduler_.append_token(s.id, row.scored.token);
    reason = r.accept(row, at_max_len);
    r.emit_token(row, reason);
    const bool matches = k < draft.size() && draft[k] == row.scored.token;
    num_accepted += matches ? 1 : 0;
    if (reason != FinishReason::kNone || !matches) break;
  }
  if (num_draft > 0) {
    ++num_drafts_;
    num_draft_tokens_ += num_draft;
    num_accepted_tokens_ += num_accepted;
  }
  if (reason != FinishReason::kNone) {
    finish(r, reason);
  } else if (drafter_) {
    propose_draft(r);
  }
}

// Gives a continuing request its draft for the next step: at most k tokens, and at most one fewer
// than the outputs it may still produce (a verify chunk of d drafts emits up to d + 1 tokens).
void EngineImpl::propose_draft(const LiveRequest& r) {
  const RequestState* state = scheduler_.find(r.id());
  if (state == nullptr) return;
  const auto left = static_cast<int64_t>(r.spec().max_tokens) - static_cast<int64_t>(r.outputs().size()) - 1;
  const auto max_draft = static_cast<int32_t>(std::min<int64_t>(speculative_.num_speculative_tokens, left));
  if (max_draft <= 0) return;
  // The deployment's rule for full batches (SpeculativeConfig::disable_by_batch_size): no drafts.
  if (speculative_.disable_by_batch_size > 0 &&
      scheduler_.num_running() + scheduler_.num_waiting() >= speculative_.disable_by_batch_size)
    return;
  std::vector<int32_t> draft = drafter_->propose(state->tokens, max_draft);
  if (!draft.empty()) scheduler_.set_draft(r.id(), std::move(draft));
}

void EngineImpl::fail_all(const Status& error) {
  broken_ = error.with_context("the engine stopped after a runner failure");
  std::vector<RequestId> ids;
  for (const auto& [id, r] : live_) ids.push_back(id);
  for (RequestId id : ids) {
    LiveRequest& r = *live_.at(id);
    scheduler_.finish(id);
    r.fail(broken_.message());
    std::lock_guard<std::mutex> lock(mu_);
    live_.erase(id);
  }
}

void EngineImpl::finish(LiveRequest& r, FinishReason reason) {
  const RequestId id = r.id();
  scheduler_.finish(id);
  r.finish(reason);
  std::lock_guard<std::mutex> lock(mu_);
  live_.erase(id);
}

void EngineImpl::publish_stats() {
  const SchedulerStats& s = scheduler_.stats();
  std::lock_guard<std::mutex> lock(mu_);
  stats_.num_running = scheduler_.num_running();
  stats_.num_waiting = scheduler_.num_waiting() + static_cast<int64_t>(pending_.size());
  stats_.num_blocks_total = scheduler_.pool().num_blocks();
  stats_.num_blocks_used = scheduler_.pool().num_used_blocks();
  stats_.num_window_blocks_total = scheduler_.window_local() ? scheduler_.window_pool().num_blocks() : 0;
  stats_.num_window_blocks_used = scheduler_.window_local() ? scheduler_.window_pool().num_used_blocks() : 0;
  stats_.num_preemptions = retired_stats_.num_preemptions + s.num_preemptions;
  stats_.num_prefix_queries = retired_stats_.num_prefix_query_tokens + s.num_prefix_query_tokens;
  stats_.num_prefix_hits = retired_stats_.num_prefix_hit_tokens + s.num_prefix_hit_tokens;
  stats_.num_generated_tokens = num_generated_;
  stats_.num_drafts = num_drafts_;
  stats_.num_draft_tokens = num_draft_tokens_;
  stats_.num_accepted_tokens = num_accepted_tokens_;
}

Status EngineImpl::check_idle(const std::string& action) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!pending_.empty() || !live_.empty())
    return failed_precondition("cannot " + action + " while requests are in flight (" + std::to_string(live_.size()) +
                               " running, " + std::to_string(pending_.size()) +
                               " queued): wait for them to finish or abort them first");
  // With nothing queued or live, every queued abort names a finished request: nothing to do.
  // Requests added from now on wait in pending_ for the next step().
  aborts_.clear();
  return Status();
}

void EngineImpl::retire_scheduler(Scheduler next) {
  const SchedulerStats& old = scheduler_.stats();
  retired_stats_.num_preemptions += old.num_preemptions;
  retired_stats_.num_prefix_query_tokens += old.num_prefix_query_tokens;
  retired_stats_.num_prefix_hit_tokens += old.num_prefix_hit_tokens;
  retired_stats_.num_steps += old.num_steps;
  scheduler_ = std::move(next);
}

Status EngineImpl::check_replacement(const Result<std::shared_ptr<const DeviceModel>>& model) const {
  if (!model.ok()) return model.status();
  if (!*model) return invalid_argument("the weight loader returned no model");
  if ((*model)->device() != config_.device)
    return invalid_argument("the new weights were loaded for device " + (*model)->device() + ", this engine runs on " +
                            config_.device);
  return same_architecture((*model)->config(), model_config_);
}

Status EngineImpl::replace_model(const ModelLoader& load, uint64_t identity) {
  if (!broken_.ok()) return broken_;
  if (sleep_level_ != 0)
    return failed_precondition("cannot replace the weights while the engine is asleep (level " +
                               std::to_string(sleep_level_.load()) + "): wake it up first");
  VOSTI_RETURN_IF_ERROR(check_idle("replace the weights"));
  EngineConfig config = config_;  // num_blocks and max_model_len: the ones derived at create()
  runner_.reset();                // frees the KV memory before the new weights load
  const auto restore = [&](const Status& error) {
    auto runner = model_->make_runner(config);
    if (!runner.ok()) {
      broken_ = runner.status().with_context("the engine stopped: its runner could not be made again after " +
                                             error.message());
      return broken_;
    }
    runner_ = std::move(runner).value();
    return error;
  };
  Result<std::shared_ptr<const DeviceModel>> model = load();
  if (Status ok = check_replacement(model); !ok.ok()) return restore(ok);
  auto runner = (*model)->make_runner(config);
  if (!runner.ok()) return restore(runner.status());
  SchedulerConfig sc = scheduler_config_;
  sc.pool.identity_seed = identity;
  auto scheduler = Scheduler::create(sc);
  if (!scheduler.ok()) return restore(scheduler.status());
  retire_scheduler(std::move(scheduler).value());
  scheduler_config_ = sc;
  runner_ = std::move(runner).value();
  model_ = std::move(model).value();
  model_config_ = model_->config();
  info_ = runner_->info();
  publish_stats();
  return Status();
}

Status EngineImpl::sleep(int level) {
  if (level != 1 && level != 2)
    return invalid_argument(
        "the sleep level must be 1 (free the KV cache) or 2 (free the KV cache and the weights), got " +
        std::to_string(level));
  if (!broken_.ok()) return broken_;
  if (sleep_level_ != 0)
    return failed_precondition("the engine is already asleep (level " + std::to_string(sleep_level_.load()) +
                               "): wake it up first");
  VOSTI_RETURN_IF_ERROR(check_idle("put the engine to sleep"));
  // The KV goes, and the prefix cache with it: a new, empty scheduler keyed as before.
  VOSTI_ASSIGN_OR_RETURN(Scheduler scheduler, Scheduler::create(scheduler_config_));
  retire_scheduler(std::move(scheduler));
  runner_.reset();
  info_.kv_cache_bytes = 0;
  if (level == 2) {
    model_.reset();
    info_.weight_bytes = 0;
  }
  sleep_level_ = level;
  publish_stats();
  return Status();
}

Status EngineImpl::wake_up(const ModelLoader& load) {
  if (sleep_level_ == 0) return failed_precondition("the engine is awake: there is nothing to wake up");
  std::shared_ptr<const DeviceModel> model = model_;
  if (!model) {
    Result<std::shared_ptr<const DeviceModel>> loaded = load();
    VOSTI_RETURN_IF_ERROR(check_replacement(loaded));
    model = std::move(loaded).value();
  }
  VOSTI_ASSIGN_OR_RETURN(std::unique_ptr<ModelRunner> runner, model->make_runner(config_));
  runner_ = std::move(runner);
  model_ = std::move(model);
  info_ = runner_->info();
  sleep_level_ = 0;
  publish_stats();
  return Status();
}

}  // namespace

Result<std::unique_ptr<Engine>> Engine::create(std::shared_ptr<const Model> model, const EngineConfig& config,
                                               std::shared_ptr<const Tokenizer> tokenizer) {
  if (!model) return invalid_argument("Engine::create needs a model");
  if (config.device != "cpu")
    return invalid_argument("a loaded Model runs on the cpu device; for --device " + config.device +
                            " load the model with load_device_model()");
  return create(cpu_device_model(std::move(model)), config, std::move(tokenizer));
}

Result<std::unique_ptr<Engine>> Engine::create(std::shared_ptr<const DeviceModel> model, const EngineConfig& input,
                                               std::shared_ptr<const Tokenizer> tokenizer,
                                               std::shared_ptr<const Drafter> drafter, EngineHooks hooks) {
  if (!model) return invalid_argument("Engine::create needs a model");
  EngineConfig config = input;
  if (config.device != model->device())
    return invalid_argument("the model was loaded for device " + model->device() + ", the engine config asks for " +
                            config.device);
  if (config.block_size <= 0 || config.block_size > 1024)
    return invalid_argument("block_size must be in [1, 1024], got " + std::to_string(config.block_size));
  if (config.max_num_seqs <= 0) return invalid_argument("max_num_seqs must be positive");
  if (config.max_num_batched_tokens <= 0) return invalid_argument("max_num_batched_tokens must be positive");
  if (config.structured_output_threads < 0) return invalid_argument("structured_output_threads must be >= 0");
  if (config.structured_output_pool_threshold <= 0)
    return invalid_argument("structured_output_pool_threshold must be positive, got " +
                            std::to_string(config.structured_output_pool_threshold));
  if (LogprobsMode mode; !parse_logprobs_mode(config.logprobs_mode, mode))
    return invalid_argument(
        "logprobs_mode must be raw_logprobs, raw_logits, processed_logprobs or processed_logits, got \"" +
        config.logprobs_mode + "\"");
  VOSTI_ASSIGN_OR_RETURN(SpeculativeConfig speculative, parse_speculative_config(config.speculative_config));
  if (drafter != nullptr && !speculative.enabled())
    return invalid_argument("a drafter was given but speculative_config does not enable speculation");
  VOSTI_ASSIGN_OR_RETURN(std::unique_ptr<ModelRunner> runner, model->make_runner(config));
  const RunnerInfo& info = runner->info();
  config.num_blocks = info.num_blocks;
  config.max_model_len = info.max_model_len;
  if (speculative.enabled() && drafter == nullptr) {
    VOSTI_ASSIGN_OR_RETURN(drafter, make_drafter(speculative, config, model->config()));
  }
  SchedulerConfig sc;
  sc.pool.block_size = config.block_size;
  sc.pool.num_blocks = config.num_blocks;
  sc.pool.enable_prefix_caching = config.enable_prefix_caching;
  sc.pool.identity_seed = XXH3_64bits(model->path().data(), model->path().size());
  sc.pool.shuffle_seed = config.block_shuffle_seed;
  sc.max_num_seqs = config.max_num_seqs;
  sc.max_num_batched_tokens = config.max_num_batched_tokens;
  sc.max_model_len = config.max_model_len;
  sc.window.window = info.kv_window;
  sc.window.num_blocks = info.num_window_blocks;
  sc.window.full_layers = info.full_kv_layers;
  VOSTI_ASSIGN_OR_RETURN(Scheduler scheduler, Scheduler::create(sc));
  return std::unique_ptr<Engine>(new EngineImpl(std::move(model), config, std::move(tokenizer), std::move(runner), sc,
                                                std::move(scheduler), std::move(speculative), std::move(drafter),
                                                std::move(hooks)));
}

}  // namespace vosti
