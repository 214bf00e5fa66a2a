// Where the tests find the checkout's data (tests/golden, tests/io/data, tests/tokenizer/data, ...)
// at run time. A test binary may run far from the tree it was built in (scripts/gpu-bundle packs
// the GPU tests; scripts/gpu-run runs them on another machine), so the path compiled in is only
// the fallback: $VOSTI_SOURCE_DIR, when set, names the checkout (scripts/gpu-run sets it).
#pragma once

#include <cstdlib>
#include <string>

namespace vosti::testing {

// The checkout's root: $VOSTI_SOURCE_DIR if set and not empty, else the source directory the
// test was compiled from (the VOSTI_SOURCE_DIR definition, CMakeLists.txt's vosti_test).
inline std::string source_dir() {
  const char* dir = std::getenv("VOSTI_SOURCE_DIR");
  return dir != nullptr && *dir != '\0' ? std::string(dir) : std::string(VOSTI_SOURCE_DIR);
}

}  // namespace vosti::testing
