// vosti._core: the nanobind extension under the Python package (python/vosti). It binds
// OfflineEngine (src/offline) and the value types it takes and returns; python/vosti/llm.py
// builds the vLLM-shaped API on top of it.
//
// The GIL: every call that loads, steps or waits runs with the GIL released. A waiting call
// takes the GIL back only to ask Python for pending signals (Ctrl-C), at most every 20 ms,
// between steps; on KeyboardInterrupt it cancels the batch (its requests aborted, their final
// outputs taken), so the engine is ready for the next call, and re-raises.
#include <nanobind/nanobind.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/shared_ptr.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <chrono>

#include "python/src/binding_util.h"
#include "runner/load_device_model.h"

namespace nb = nanobind;
using namespace nb::literals;

namespace vosti::python {

namespace {

// Asks Python for pending signals, at most every 20 ms; keeps the KeyboardInterrupt (or a
// handler's other exception) to re-raise once the batch is cancelled.
class InterruptCheck {
 public:
  bool operator()() {
    const auto now = std::chrono::steady_clock::now();
    if (now - last_ < std::chrono::milliseconds(20)) return false;
    last_ = now;
    nb::gil_scoped_acquire gil;
    if (PyErr_CheckSignals() == 0) return false;
    error_.emplace();  // takes the exception Python has set
    return true;
  }
  // REQUIRES: the GIL is held.
  [[noreturn]] void rethrow() { throw nb::python_error(*error_); }

 private:
  std::chrono::steady_clock::time_point last_{};
  std::optional<nb::python_error> error_;
};

void bind_config(nb::module_& m) {
  nb::class_<EngineConfig>(m, "EngineConfig")
      .def(nb::init<>())
      .def_rw("device", &EngineConfig::device)
      .def_rw("backend", &EngineConfig::backend)
      .def_rw("block_size", &EngineConfig::block_size)
      .def_rw("kv_cache_dtype", &EngineConfig::kv_cache_dtype)
      .def_rw("num_blocks", &EngineConfig::num_blocks)
      .def_rw("kv_cache_bytes", &EngineConfig::kv_cache_bytes)
      .def_rw("gpu_memory_utilization", &EngineConfig::gpu_memory_utilization)
      .def_rw("cuda_graphs", &EngineConfig::cuda_graphs)
      .def_rw("attention_split", &EngineConfig::attention_split)
      .def_rw("max_num_seqs", &EngineConfig::max_num_seqs)
      .def_rw("max_num_batched_tokens", &EngineConfig::max_num_batched_tokens)
      .def_rw("max_model_len", &EngineConfig::max_model_len)
      .def_rw("enable_prefix_caching", &EngineConfig::enable_prefix_caching)
      .def_rw("window_local_kv", &EngineConfig::window_local_kv)
      .def_rw("speculative_config", &EngineConfig::speculative_config)
      .def_rw("logprobs_mode", &EngineConfig::logprobs_mode)
      .def_rw("num_threads", &EngineConfig::num_threads)
      .def_rw("structured_output_threads", &EngineConfig::structured_output_threads)
      .def_rw("structured_output_pool_threshold", &EngineConfig::structured_output_pool_threshold)
      .def_rw("block_shuffle_seed", &EngineConfig::block_shuffle_seed)
      .def_rw("check_invariants", &EngineConfig::check_invariants);

  nb::class_<SamplingParams>(m, "EngineSamplingParams")
      .def(nb::init<>())
      .def_rw("temperature", &SamplingParams::temperature)
      .def_rw("top_k", &SamplingParams::top_k)
      .def_rw("top_p", &SamplingParams::top_p)
      .def_rw("min_p", &SamplingParams::min_p)
      .def_rw("repetition_penalty", &SamplingParams::repetition_penalty)
      .def_rw("presence_penalty", &SamplingParams::presence_penalty)
      .def_rw("frequency_penalty", &SamplingParams::frequency_penalty)
      .def_rw("logit_bias", &SamplingParams::logit_bias)
      .def_rw("seed", &SamplingParams::seed)
      .def_rw("num_top_logprobs", &SamplingParams::num_top_logprobs);

  nb::class_<RequestSpec>(m, "RequestSpec")
      .def(nb::init<>())
      .def_rw("prompt", &RequestSpec::prompt)
      .def_rw("sampling", &RequestSpec::sampling)
      .def_rw("max_tokens", &RequestSpec::max_tokens)
      .def_rw("stop_token_ids", &RequestSpec::stop_token_ids)
      .def_rw("stop", &RequestSpec::stop)
      .def_rw("ignore_eos", &RequestSpec::ignore_eos)
      .def_rw("include_stop_str_in_output", &RequestSpec::include_stop_str_in_output)
      .def_rw("priority", &RequestSpec::priority)
      .def_rw("prompt_logprobs", &RequestSpec::prompt_logprobs)
      .def_rw("logits_digests", &RequestSpec::logits_digests)
      .def_rw("routed_experts", &RequestSpec::routed_experts)
      .def_rw("sampling_masks", &RequestSpec::sampling_masks)
      // kind: "json" (text: the schema's JSON), "json_object", "regex", "choice" (choices), "grammar".
      .def("set_structured",
           [](RequestSpec& s, const std::string& kind, std::string text, std::vector<std::string> choices) {
             StructuredOutputs so;
             if (kind == "json") {
               so.kind = StructuredKind::kJsonSchema;
             } else if (kind == "json_object") {
               so.kind = StructuredKind::kJsonObject;
             } else if (kind == "regex") {
               so.kind = StructuredKind::kRegex;
             } else if (kind == "choice") {
               so.kind = StructuredKind::kChoice;
             } else if (kind == "grammar") {
               so.kind = StructuredKind::kGrammar;
             } else {
               throw nb::value_error(("unknown structured output kind '" + kind + "'").c_str());
             }
             so.text = std::move(text);
             so.choices = std::move(choices);
             s.structured = std::move(so);
           });
}

void bind_results(nb::module_& m) {
  nb::class_<RequestResult>(m, "RequestResult")
      .def_ro("id", &RequestResult::id)
      .def_ro("seed", &RequestResult::seed)
      .def_ro("token_ids", &RequestResult::token_ids)
      .def_ro("text", &RequestResult::text)
      .def_ro("finished", &RequestResult::finished)
      .def_ro("error", &RequestResult::error)
      .def_ro("num_cached_prompt_tokens", &RequestResult::num_cached_prompt_tokens)
      .def_prop_ro("finish_reason",
                   [](const RequestResult& r) -> std::optional<std::string> {
                     if (r.finish_reason == FinishReason::kNone) return std::nullopt;
                     return std::string(finish_reason_name(r.finish_reason));
                   })
      .def_prop_ro("logprobs", [](const RequestResult& r) { return chosen_logprobs(r.logprobs); })
      .def_prop_ro("top_logprobs", [](const RequestResult& r) { return top_lists(r.logprobs); })
      .def_prop_ro("prompt_logprobs", [](const RequestResult& r) { return chosen_logprobs(r.prompt_logprobs); })
      .def_prop_ro("prompt_top_logprobs", [](const RequestResult& r) { return top_lists(r.prompt_logprobs); })
      .def_prop_ro("logits_digests",
                   [](const RequestResult& r) {
                     std::vector<std::string> out;
                     out.reserve(r.digests.size());
                     for (const LogitsDigest& d : r.digests) out.push_back(digest_hex(d));
                     return out;
                   })
      // Per output position: None (every token) or the kept token ids, ascending.
      .def_prop_ro("sampling_masks",
                   [](const RequestResult& r) {
                     std::vector<std::optional<std::vector<int32_t>>> out;
                     out.reserve(r.sampling_masks.size());
                     for (const SamplingSupport& s : r.sampling_masks)
                       out.push_back(s.every_token ? std::nullopt : std::optional(s.kept));
                     return out;
                   })
      // (ids [positions * layers * top_k], layers, top_k): the Python side shapes the array.
      .def_prop_ro("routed_experts", [](const RequestResult& r) {
        return std::make_tuple(r.routed_experts.ids, r.routed_experts.num_layers, r.routed_experts.top_k);
      });

  nb::class_<RequestBatch>(m, "RequestBatch")
      .def("__len__", &RequestBatch::size)
      .def_prop_ro("ids", [](const RequestBatch& b) { return b.ids(); })
      .def_prop_ro("weights", [](const RequestBatch& b) { return weights_tuple(b.weights()); })
      .def("results", [](const RequestBatch& b) { return b.results(); });
}

void bind_engine(nb::module_& m) {
  nb::class_<OfflineEngine> engine(m, "Engine");
  engine
      .def_static(
          "create",
          [](const std::string& path, const EngineConfig& config, bool load_tokenizer) {
            Result<std::unique_ptr<OfflineEngine>> e = internal_error("not loaded");
            {
              nb::gil_scoped_release release;
              e = OfflineEngine::create(path, config, load_tokenizer);
            }
            if (!e.ok()) throw_status(e.status(), /*loading=*/true);
            return std::shared_ptr<OfflineEngine>(std::move(e).value());
          },
          "path"_a, "config"_a, "load_tokenizer"_a = true)
      .def_prop_ro("model_path", &OfflineEngine::model_path)
      .def_prop_ro("config", [](const OfflineEngine& e) { return e.config(); })
      .def_prop_ro("weights", [](const OfflineEngine& e) { return weights_tuple(e.weights()); })
      .def_prop_ro("num_in_flight", &OfflineEngine::num_in_flight)
      .def_prop_ro("sleep_level", &OfflineEngine::sleep_level)
      .def_prop_ro("kernel_plan", [](const OfflineEngine& e) { return kernel_plan(e.config()); })
      .def(
          "sleep",
          [](OfflineEngine& e, int level) {
            Status s;
            {
              nb::gil_scoped_release release;
              s = e.sleep(level);
            }
            if (!s.ok()) throw_status(s);
          },
          "level"_a)
      .def("wake_up",
           [](OfflineEngine& e) {
             Status s;
             {
               nb::gil_scoped_release release;
               s = e.wake_up();
             }
             if (!s.ok()) throw_status(s);
           })
      .def_prop_ro("runner_info", [](const OfflineEngine& e) { return runner_info_dict(e.runner_info()); })
      .def_prop_ro("model_config", [](const OfflineEngine& e) { return model_config_dict(e.model_config()); })
      .def_prop_ro("stats", [](const OfflineEngine& e) { return stats_dict(e.stats()); })
      .def("submit",
           [](OfflineEngine& e, std::vector<RequestSpec> specs, bool stream) {
             Result<std::shared_ptr<RequestBatch>> b = internal_error("not submitted");
             {
               nb::gil_scoped_release release;
               b = e.submit(std::move(specs), stream);
             }
             if (!b.ok()) throw_status(b.status());
             return std::move(b).value();
           })
      .def("wait",
           [](OfflineEngine& e, RequestBatch& batch) {
             InterruptCheck check;
             Result<bool> done = false;
             {
               nb::gil_scoped_release release;
               done = e.wait(batch, std::ref(check));
               if (done.ok() && !*done) e.cancel(batch);
             }
             if (!done.ok()) throw_status(done.status());
             if (!*done) check.rethrow();
           })
      .def("next_event",
           [](OfflineEngine& e, RequestBatch& batch) -> std::optional<std::pair<size_t, RequestResult>> {
             InterruptCheck check;
             bool interrupted = false;
             Result<std::optional<StreamEvent>> event = std::optional<StreamEvent>();
             {
               nb::gil_scoped_release release;
               event = e.next_event(batch, std::ref(check), &interrupted);
               if (interrupted) e.cancel(batch);
             }
             if (!event.ok()) throw_status(event.status());
             if (interrupted) check.rethrow();
             if (!event->has_value()) return std::nullopt;
             return std::make_pair((*event)->index, std::move((*event)->delta));
           })
      .def("cancel",
           [](OfflineEngine& e, RequestBatch& batch) {
             nb::gil_scoped_release release;
             e.cancel(batch);
           })
      .def("encode",
           [](const OfflineEngine& e, const std::string& text, bool add_special_tokens) {
             Result<std::vector<int32_t>> ids = tokenizer_of(e).encode(text, add_special_tokens);
             if (!ids.ok()) throw_status(ids.status());
             return std::move(ids).value();
           })
      .def("decode",
           [](const OfflineEngine& e, const std::vector<int32_t>& ids, bool skip_special_tokens) {
             Result<std::string> text = tokenizer_of(e).decode(ids, skip_special_tokens);
             if (!text.ok()) throw_status(text.status());
             return std::move(text).value();
           })
      .def("token_text",
           [](const OfflineEngine& e, int32_t id) -> std::optional<std::string> {
             if (!e.tokenizer()) return std::nullopt;
             const int32_t ids[1] = {id};
             return e.tokenizer()->decode_lenient(ids);
           })
      .def_prop_ro("has_tokenizer", [](const OfflineEngine& e) { return e.tokenizer() != nullptr; })
      .def_prop_ro("eos_token_id", [](const OfflineEngine& e) { return tokenizer_of(e).eos_id(); })
      .def_prop_ro("bos_token_id", [](const OfflineEngine& e) { return tokenizer_of(e).bos_id(); })
      .def_prop_ro("chat_template", [](const OfflineEngine& e) { return tokenizer_of(e).chat_template(); })
      .def("render_chat", &render_chat_text, "messages_json"_a, "add_generation_prompt"_a, "template"_a,
           "extra_context_json"_a, "tool_fallback"_a = false);
  bind_weights(engine);
}

}  // namespace

}  // namespace vosti::python

NB_MODULE(_core, m) {
  m.doc() = "Vosti's engine, bound for the vosti package (use vosti.LLM).";
  m.attr("__version__") = vosti::vosti_version();
  m.def("built_with_cuda", &vosti::built_with_cuda, "Whether this build has the CUDA runner.");
  vosti::python::bind_config(m);
  vosti::python::bind_results(m);
  vosti::python::bind_engine(m);
}
