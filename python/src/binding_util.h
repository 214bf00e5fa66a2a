// Conversions between the engine's C++ values and Python objects for vosti._core, and the
// mapping of a Status to a Python exception (the engine's message, unchanged).
// Thread safety: every function here needs the GIL.
#pragma once

#include <nanobind/nanobind.h>

#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "core/status.h"
#include "offline/offline_engine.h"
#include "offline/weights_identity.h"

namespace vosti::python {

// Raises the Python exception for `status`: ValueError for bad arguments (kInvalidArgument,
// kOutOfRange, kNotFound, kDataLoss), FileNotFoundError for kNotFound while loading a model,
// NotImplementedError (kUnimplemented), MemoryError (kResourceExhausted), RuntimeError otherwise.
[[noreturn]] void throw_status(const Status& status, bool loading = false);

// The engine's tokenizer; RuntimeError when it was created without one.
const Tokenizer& tokenizer_of(const OfflineEngine& engine);

// The chosen tokens' logprobs of scored positions.
std::vector<float> chosen_logprobs(const std::vector<ScoredToken>& scored);
// Their top-n lists as (token id, logprob) pairs, best first.
std::vector<std::vector<std::pair<int32_t, float>>> top_lists(const std::vector<ScoredToken>& scored);

// (version, weights digest, deployment digest).
std::tuple<int64_t, std::string, std::string> weights_tuple(const WeightsInfo& w);
nanobind::dict runner_info_dict(const RunnerInfo& info);
nanobind::dict model_config_dict(const ModelConfig& config);
nanobind::dict stats_dict(const EngineStats& stats);

// The model's chat template (or `template_source` when given) rendered over the messages (a
// JSON array, as the OpenAI API sends them) with the tokenizer's BOS/EOS and the extra
// template variables (a JSON object). tool_fallback: the variable `tools` and the messages are
// placed as the server places them (tokenizer/chat_tools.h: LLM.chat); else `tools` is a variable
// like any other (apply_chat_template, as transformers). Raises ValueError naming the problem.
std::string render_chat_text(const OfflineEngine& engine, const std::string& messages_json, bool add_generation_prompt,
                             const std::optional<std::string>& template_source, const std::string& extra_context_json,
                             bool tool_fallback);

// Engine.update_weights_from_path / update_weights_from_arrays / get_weights / tensor_names.
void bind_weights(nanobind::class_<OfflineEngine>& engine);

}  // namespace vosti::python
