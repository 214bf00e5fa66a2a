#include "tools/engine_options.h"

#include <CLI/CLI.hpp>
#include <span>
#include <string>
#include <type_traits>
#include <variant>
#include <vector>

namespace vosti::tools {
namespace {

using Field = std::variant<std::string EngineConfig::*, int32_t EngineConfig::*, int64_t EngineConfig::*,
                           double EngineConfig::*, bool EngineConfig::*>;

enum class Form : uint8_t {
  kValue,      // --flag VALUE
  kSwitch,     // --flag sets the bool field to true
  kOffSwitch,  // --no-x sets the bool field to false
};

enum class Check : uint8_t { kNone, kPositive, kNonNegative, kFraction };

enum class Kind : uint8_t {
  kDeployment,  // a field EngineConfig marks (D): part of the deployment
  kExecution,   // the rest: how the engine runs (context and scheduling limits, memory, threads, graphs)
};

struct EngineOption {
  const char* flag;
  const char* field;  // the EngineConfig member's name (and the Python binding's attribute)
  Field member;
  Form form;
  Check check;
  std::span<const char* const> choices;  // empty: any value
  Kind kind;
  const char* help;
  int64_t flag_unit = 1;  // field units per unit of the flag's value
};

constexpr const char* kDevices[] = {"cpu", "cuda"};
constexpr const char* kBackends[] = {"cpu", "ref"};
constexpr const char* kKvDtypes[] = {"auto", "bf16", "f32"};
constexpr const char* kLogprobsModes[] = {"raw_logprobs", "raw_logits", "processed_logprobs", "processed_logits"};
constexpr std::span<const char* const> kAnyValue;

// FIELD(name): the member's name and pointer, spelt once.
#define FIELD(name) #name, &EngineConfig::name

// The one table; --help lists the options in this order.
const EngineOption kOptions[] = {
    {"--device", FIELD(device), Form::kValue, Check::kNone, kDevices, Kind::kDeployment,
     "where the model runs: cpu (f32 host kernels) or cuda (bf16 weights on the GPU)"},
    {"--backend", FIELD(backend), Form::kValue, Check::kNone, kBackends, Kind::kDeployment,
     "cpu: host kernel backend: cpu (SIMD + threads) or ref (the scalar oracle)"},
    {"--block-size", FIELD(block_size), Form::kValue, Check::kPositive, kAnyValue, Kind::kDeployment,
     "KV cache block size in tokens"},
    {"--kv-cache-dtype", FIELD(kv_cache_dtype), Form::kValue, Check::kNone, kKvDtypes, Kind::kDeployment,
     "KV cache dtype: auto (f32 on cpu, bf16 on cuda), or on cuda bf16 or f32"},
    {"--attention-split", FIELD(attention_split), Form::kValue, Check::kNonNegative, kAnyValue, Kind::kDeployment,
     "cuda: KV positions per attention split, a multiple of 64 (0: 1,024)"},
    {"--logprobs-mode", FIELD(logprobs_mode), Form::kValue, Check::kNone, kLogprobsModes, Kind::kDeployment,
     "what logprobs report (vLLM's): the raw row's logprobs or logits, or those of the row the sampler drew "
     "from (after penalties, temperature, top-k/top-p/min-p; dropped tokens -inf)"},
    {"--max-model-len", FIELD(max_model_len), Form::kValue, Check::kNonNegative, kAnyValue, Kind::kExecution,
     "context length (0: the model's, capped by the KV cache)"},
    {"--max-num-seqs", FIELD(max_num_seqs), Form::kValue, Check::kPositive, kAnyValue, Kind::kExecution,
     "sequences per engine step"},
    {"--max-num-batched-tokens", FIELD(max_num_batched_tokens), Form::kValue, Check::kPositive, kAnyValue,
     Kind::kExecution, "tokens per engine step"},
    {"--kv-cache-mb", FIELD(kv_cache_bytes), Form::kValue, Check::kPositive, kAnyValue, Kind::kExecution,
     "cpu: KV cache size in MiB (cuda: --gpu-memory-utilization)", int64_t{1} << 20},
    {"--gpu-memory-utilization", FIELD(gpu_memory_utilization), Form::kValue, Check::kFraction, kAnyValue,
     Kind::kExecution, "cuda: fraction of GPU memory for the weights, buffers and KV cache (as vLLM's)"},
    {"--num-blocks", FIELD(num_blocks), Form::kValue, Check::kNonNegative, kAnyValue, Kind::kExecution,
     "KV cache blocks (0: sized by --kv-cache-mb on cpu, by --gpu-memory-utilization on cuda)"},
    {"--no-prefix-caching", FIELD(enable_prefix_caching), Form::kOffSwitch, Check::kNone, kAnyValue, Kind::kExecution,
     "disable the prefix cache"},
    {"--window-local-kv", FIELD(window_local_kv), Form::kSwitch, Check::kNone, kAnyValue, Kind::kExecution,
     "sliding-window layers keep only the KV blocks their window reads (same bits, less memory)"},
    {"--no-cuda-graphs", FIELD(cuda_graphs), Form::kOffSwitch, Check::kNone, kAnyValue, Kind::kExecution,
     "cuda: launch every step's kernels instead of replaying graphs (same bits, slower)"},
    {"--threads", FIELD(num_threads), Form::kValue, Check::kNonNegative, kAnyValue, Kind::kExecution,
     "cpu: threads for the forward pass (0: all cores)"},
    {"--structured-output-threads", FIELD(structured_output_threads), Form::kValue, Check::kNonNegative, kAnyValue,
     Kind::kExecution, "threads advancing a step's grammars of structured outputs (0: up to 8, half the cores)"},
    {"--structured-output-pool-threshold", FIELD(structured_output_pool_threshold), Form::kValue, Check::kPositive,
     kAnyValue, Kind::kExecution,
     "grammars a step must hold to advance them on the structured-output threads (fewer: on the step thread)"},
    {"--speculative-config", FIELD(speculative_config), Form::kValue, Check::kNone, kAnyValue, Kind::kExecution,
     "speculative decoding as vLLM's JSON, e.g. '{\"method\":\"ngram\",\"num_speculative_tokens\":4,"
     "\"prompt_lookup_max\":4}' or '{\"model\":PATH,\"num_speculative_tokens\":4}' (lossless: the same "
     "tokens and logprobs as without it)"},
    {"--check-invariants", FIELD(check_invariants), Form::kSwitch, Check::kNone, kAnyValue, Kind::kExecution,
     "check the scheduler's and the cache's invariants after every step (slow; debug builds always do)"},
};

#undef FIELD

void add_check(CLI::Option* option, const EngineOption& o) {
  switch (o.check) {
    case Check::kNone:
      break;
    case Check::kPositive:
      option->check(CLI::PositiveNumber);
      break;
    case Check::kNonNegative:
      option->check(CLI::NonNegativeNumber);
      break;
    case Check::kFraction:
      option->check(CLI::Range(0.01, 1.0));
      break;
  }
  if (!o.choices.empty()) option->check(CLI::IsMember(std::vector<std::string>(o.choices.begin(), o.choices.end())));
}

// Binds `o` to its field of `config`.
CLI::Option* bind(CLI::App& app, EngineConfig& config, const EngineOption& o) {
  return std::visit(
      [&](auto member) -> CLI::Option* {
        auto& field = config.*member;
        using T = std::remove_reference_t<decltype(field)>;
        if constexpr (std::is_same_v<T, bool>) {
          const bool value = o.form == Form::kSwitch;
          return app.add_flag_callback(
              o.flag, [&field, value] { field = value; }, o.help);
        } else if constexpr (std::is_integral_v<T>) {
          if (o.flag_unit == 1) return app.add_option(o.flag, field, o.help)->capture_default_str();
          const int64_t unit = o.flag_unit;
          CLI::Option* option = app.add_option_function<T>(
              o.flag, [&field, unit](const T& v) { field = v * unit; }, o.help);
          return option->default_str(std::to_string(field / unit));
        } else {
          return app.add_option(o.flag, field, o.help)->capture_default_str();
        }
      },
      o.member);
}

const char* type_name(const Field& member) {
  constexpr const char* kNames[] = {"str", "int", "int", "float", "bool"};
  return kNames[member.index()];
}

}  // namespace

void add_engine_options(CLI::App& app, EngineConfig& config, EngineOptionSet set) {
  for (const EngineOption& o : kOptions) {
    if (set == EngineOptionSet::kDeployment && o.kind != Kind::kDeployment) continue;
    CLI::Option* option = bind(app, config, o);
    add_check(option, o);
    option->group("Engine options");
  }
}

nlohmann::ordered_json engine_options_json() {
  const EngineConfig defaults;
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  for (const EngineOption& o : kOptions) {
    nlohmann::ordered_json j;
    j["flag"] = o.flag;
    j["field"] = o.field;
    j["type"] = type_name(o.member);
    j["default"] = std::visit([&](auto member) { return nlohmann::ordered_json(defaults.*member); }, o.member);
    j["flag_unit"] = o.flag_unit;
    j["negated"] = o.form == Form::kOffSwitch;
    j["choices"] = std::vector<std::string>(o.choices.begin(), o.choices.end());
    j["deployment"] = o.kind == Kind::kDeployment;
    j["help"] = o.help;
    out.push_back(std::move(j));
  }
  return out;
}

}  // namespace vosti::tools
