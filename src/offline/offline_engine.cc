#include "offline/offline_engine.h"

#include "runner/load_device_model.h"

namespace vosti {

namespace {

// Appends one engine output (a delta) to `r`.
void merge(RequestResult& r, const RequestOutput& out) {
  r.id = out.id;
  r.seed = out.seed;
  r.token_ids.insert(r.token_ids.end(), out.new_tokens.begin(), out.new_tokens.end());
  r.logprobs.insert(r.logprobs.end(), out.new_logprobs.begin(), out.new_logprobs.end());
  r.digests.insert(r.digests.end(), out.new_digests.begin(), out.new_digests.end());
  r.sampling_masks.insert(r.sampling_masks.end(), out.new_sampling_masks.begin(), out.new_sampling_masks.end());
  if (!out.prompt_logprobs.empty()) r.prompt_logprobs = out.prompt_logprobs;
  r.text += out.new_text;
  r.num_cached_prompt_tokens = out.num_cached_prompt_tokens;
  if (out.finished) {
    r.finished = true;
    r.finish_reason = out.finish_reason;
    r.error = out.error;
    r.routed_experts = out.routed_experts;
  }
}

}  // namespace

Result<std::unique_ptr<OfflineEngine>> OfflineEngine::create(const std::string& path, const EngineConfig& config,
                                                             bool load_tokenizer) {
  std::unique_ptr<OfflineEngine> e(new OfflineEngine());
  e->path_ = path;
  VOSTI_ASSIGN_OR_RETURN(e->file_, ModelFile::open(path));
  VOSTI_ASSIGN_OR_RETURN(LogitsDigest digest, e->digester_.digest(*e->file_));
  VOSTI_ASSIGN_OR_RETURN(std::shared_ptr<const DeviceModel> model, load_device_model(e->file_, config.device));
  if (load_tokenizer) {
    VOSTI_ASSIGN_OR_RETURN(e->tokenizer_, Tokenizer::load_for_model(path));
  }
  VOSTI_ASSIGN_OR_RETURN(e->engine_, Engine::create(std::move(model), config, e->tokenizer_));
  e->runner_info_ = e->engine_->runner_info();
  e->weights_.weights_digest = digest_hex(digest);
  e->weights_.deployment_digest =
      deployment_digest_hex(digest, e->file_->config(), e->engine_->config(), e->engine_->runner_info());
  return e;
}

WeightsInfo OfflineEngine::weights() const {
  std::lock_guard<std::mutex> lock(state_mu_);
  return weights_;
}

RunnerInfo OfflineEngine::runner_info() const {
  std::lock_guard<std::mutex> lock(state_mu_);
  return runner_info_;
}

ModelConfig OfflineEngine::model_config() const {
  std::lock_guard<std::mutex> lock(state_mu_);
  return file_->config();
}

std::shared_ptr<const ModelFile> OfflineEngine::model_file() const {
  std::lock_guard<std::mutex> lock(state_mu_);
  return file_;
}

int64_t OfflineEngine::num_in_flight() const {
  std::lock_guard<std::mutex> lock(state_mu_);
  return num_in_flight_;
}

OutputCallback OfflineEngine::collector(const std::shared_ptr<RequestBatch>& batch, size_t index) {
  return [this, batch, index](const RequestOutput& out) {
    std::lock_guard<std::mutex> lock(state_mu_);
    RequestResult& r = batch->results_[index];
    merge(r, out);
    if (batch->stream_) {
      StreamEvent e;
      e.index = index;
      merge(e.delta, out);
      batch->events_.push_back(std::move(e));
    }
    if (out.finished) {
      ++batch->num_finished_;
      --num_in_flight_;
    }
  };
}

Result<std::shared_ptr<RequestBatch>> OfflineEngine::submit(std::vector<RequestSpec> specs, bool stream) {
  auto batch = std::make_shared<RequestBatch>();
  batch->stream_ = stream;
  batch->results_.resize(specs.size());
  batch->ids_.assign(specs.size(), 0);
  std::lock_guard<std::mutex> admit(admit_mu_);
  {
    std::lock_guard<std::mutex> lock(state_mu_);
    batch->weights_ = weights_;
  }
  for (size_t i = 0; i < specs.size(); ++i) {
    {
      std::lock_guard<std::mutex> lock(state_mu_);
      ++num_in_flight_;
    }
    Result<RequestId> id = engine_->add_request(std::move(specs[i]), collector(batch, i));
    if (!id.ok()) {
      {
        std::lock_guard<std::mutex> lock(state_mu_);
        --num_in_flight_;
        // The ones after i never ran: count them finished so that cancel() waits for 0..i-1 only.
        batch->num_finished_ += specs.size() - i;
        for (size_t j = i; j < specs.size(); ++j) batch->results_[j].finished = true;
      }
      cancel(*batch);
      const std::string where = specs.size() == 1 ? std::string() : "request " + std::to_string(i) + ": ";
      return Status(id.status().code(), where + id.status().message());
    }
    std::lock_guard<std::mutex> lock(state_mu_);
    batch->results_[i].id = *id;
    batch->ids_[i] = *id;
  }
  return batch;
}

bool OfflineEngine::finished(const RequestBatch& batch) const {
  std::lock_guard<std::mutex> lock(state_mu_);
  return batch.num_finished_ == batch.results_.size();
}

bool OfflineEngine::step_once() {
  std::lock_guard<std::mutex> lock(step_mu_);
  return engine_->step();
}

Result<bool> OfflineEngine::wait(RequestBatch& batch, const std::function<bool()>& interrupted) {
  while (!finished(batch)) {
    // Another waiter may have finished the batch while this one waited for step_mu_: check
    // again under it, so that no step runs for nothing.
    {
      std::lock_guard<std::mutex> lock(step_mu_);
      if (finished(batch)) break;
      if (!engine_->step() && !finished(batch))
        return internal_error("the engine has no work left but " + std::to_string(batch.size()) +
                              " submitted requests have not finished");
    }
    if (interrupted && interrupted()) return false;
  }
  return true;
}

Result<std::optional<StreamEvent>> OfflineEngine::next_event(RequestBatch& batch,
                                                             const std::function<bool()>& interrupted,
                                                             bool* was_interrupted) {
  VOSTI_CHECK(batch.stream_, "next_event on a batch submitted without stream");
  if (was_interrupted) *was_interrupted = false;
  while (true) {
    {
      std::lock_guard<std::mutex> lock(state_mu_);
      if (!batch.events_.empty()) {
        StreamEvent e = std::move(batch.events_.front());
        batch.events_.pop_front();
        return std::optional<StreamEvent>(std::move(e));
      }
      if (batch.num_finished_ == batch.results_.size()) return std::optional<StreamEvent>();
    }
    {
      std::lock_guard<std::mutex> lock(step_mu_);
      bool idle = false;
      {
        std::lock_guard<std::mutex> state(state_mu_);
        idle = batch.events_.empty() && batch.num_finished_ < batch.results_.size();
      }
      if (idle && !engine_->step()) {
        std::lock_guard<std::mutex> state(state_mu_);
        if (batch.events_.empty() && batch.num_finished_ < batch.results_.size())
          return internal_error("the engine has no work left but a streamed request has not finished");
      }
    }
    if (interrupted && interrupted()) {
      if (was_interrupted) *was_interrupted = true;
      return std::optional<StreamEvent>();
    }
  }
}

void OfflineEngine::cancel(RequestBatch& batch) {
  std::vector<RequestId> ids;
  {
    std::lock_guard<std::mutex> lock(state_mu_);
    for (const RequestResult& r : batch.results_)
      if (!r.finished && r.id != 0) ids.push_back(r.id);
  }
  for (RequestId id : ids) engine_->abort(id);
  // The aborts are taken at the next step; a step with nothing else to do only takes them.
  for (int i = 0; i < 1000 && !finished(batch); ++i) step_once();
  VOSTI_CHECK(finished(batch), "aborted requests did not finish");
}

Status OfflineEngine::update_weights(std::shared_ptr<const ModelFile> file) {
  if (!file) return invalid_argument("update_weights needs a model file");
  std::lock_guard<std::mutex> admit(admit_mu_);
  std::lock_guard<std::mutex> step(step_mu_);
  {
    std::lock_guard<std::mutex> lock(state_mu_);
    if (num_in_flight_ > 0)
      return failed_precondition("cannot update the weights while " + std::to_string(num_in_flight_) +
                                 " requests are in flight: wait for them (or a stream's end), or abort them first");
  }
  VOSTI_ASSIGN_OR_RETURN(LogitsDigest digest, digester_.digest(*file));
  const std::string device = engine_->config().device;
  VOSTI_RETURN_IF_ERROR(engine_->replace_model([&] { return load_device_model(file, device); }, digest[0]));
  std::lock_guard<std::mutex> lock(state_mu_);
  file_ = std::move(file);
  runner_info_ = engine_->runner_info();
  weights_.version += 1;
  weights_.weights_digest = digest_hex(digest);
  weights_.deployment_digest =
      deployment_digest_hex(digest, file_->config(), engine_->config(), engine_->runner_info());
  return Status();
}

Status OfflineEngine::sleep(int level) {
  std::lock_guard<std::mutex> admit(admit_mu_);
  std::lock_guard<std::mutex> step(step_mu_);
  {
    std::lock_guard<std::mutex> lock(state_mu_);
    if (num_in_flight_ > 0)
      return failed_precondition("cannot sleep while " + std::to_string(num_in_flight_) +
                                 " requests are in flight: wait for them (or a stream's end), or abort them first");
  }
  VOSTI_RETURN_IF_ERROR(engine_->sleep(level));
  std::lock_guard<std::mutex> lock(state_mu_);
  runner_info_ = engine_->runner_info();
  return Status();
}

Status OfflineEngine::wake_up() {
  std::lock_guard<std::mutex> admit(admit_mu_);
  std::lock_guard<std::mutex> step(step_mu_);
  if (engine_->sleep_level() == 0) return Status();
  std::shared_ptr<const ModelFile> file;
  {
    std::lock_guard<std::mutex> lock(state_mu_);
    file = file_;
  }
  const std::string device = engine_->config().device;
  VOSTI_RETURN_IF_ERROR(engine_->wake_up([&] { return load_device_model(file, device); }));
  std::lock_guard<std::mutex> lock(state_mu_);
  runner_info_ = engine_->runner_info();
  return Status();
}

}  // namespace vosti
