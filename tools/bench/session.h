// One `vosti bench` invocation after its flags are parsed: opens the target, builds the
// workload, runs the warm-ups, the measured run (or the concurrency sweep, or the two
// determinism passes), prints the report, writes the JSON and the plots.
// Thread safety: runs on the caller's thread; `interrupted` may be set from any thread.
#pragma once

#include <atomic>
#include <string>

#include "tools/bench/bench_config.h"

namespace vosti::bench {

// The process exit status (see tools/cmd_bench.cc). REQUIRES: finalize_config(config) ok.
int run_session(const BenchConfig& config, const std::string& command_line, const std::atomic<bool>& interrupted);

}  // namespace vosti::bench
