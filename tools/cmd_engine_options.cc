// vosti engine-options: the engine options serve, generate, bench and verify share, as JSON
// (tools/engine_options.h); tests/python/test_engine_options.py checks the Python package's
// LLM(...) keywords against it.
#include <CLI/CLI.hpp>
#include <cstdio>

#include "tools/commands.h"
#include "tools/engine_options.h"

namespace vosti::tools {

int cmd_engine_options(int argc, char** argv) {
  CLI::App app{
      "Prints the engine options (the flags serve, generate, bench and verify share) as a JSON array: flag, "
      "EngineConfig field, type, default, help.",
      "vosti engine-options"};
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;  // commands.h: 2 for a usage error (CLI11's own codes vary)
  }
  std::printf("%s\n", engine_options_json().dump(2).c_str());
  return 0;
}

}  // namespace vosti::tools
