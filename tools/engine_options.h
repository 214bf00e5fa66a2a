// The engine options: every EngineConfig field a user may set from the command line, each bound
// to one flag with one help text, in one table (engine_options.cc). `vosti serve`, `generate`,
// `bench` and `verify` take them from add_engine_options; `vosti engine-options` prints the table
// as JSON, and the Python package's LLM(...) keywords are checked against that JSON
// (tests/python/test_engine_options.py), so a flag added here without its Python mirror, or
// with another default there, fails a test.
//
// A command's own default is the value its EngineConfig holds when it calls add_engine_options
// (the help shows it); the fields the table leaves out (block_shuffle_seed,
// check_device_sampler, the test-only ones) are set by code, never by a flag.
// Thread safety: functions of their arguments; no state.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>

#include "core/engine_config.h"

namespace CLI {
class App;
}

namespace vosti::tools {

enum class EngineOptionSet : uint8_t {
  kAll,         // every engine option
  kDeployment,  // the deployment's (D) fields only: device, backend, block size, KV dtype, attention split
};

// Adds the engine options of `set` to `app` (in its "Engine options" group), each writing its
// field of `config` when given; the help shows `config`'s present values as the defaults.
// REQUIRES: `config` outlives app.parse().
void add_engine_options(CLI::App& app, EngineConfig& config, EngineOptionSet set = EngineOptionSet::kAll);

// The table as a JSON array, one object per option in --help order:
//   {"flag", "field" (the EngineConfig member), "type" ("str", "int", "float", "bool"),
//    "default" (a default EngineConfig's value, in the field's units), "flag_unit" (field units
//    per unit of the flag's value: 1048576 for --kv-cache-mb), "negated" (the flag sets the bool
//    field to false), "choices" (empty: any value), "deployment" (a (D) field), "help"}.
nlohmann::ordered_json engine_options_json();

}  // namespace vosti::tools
