// The commit this binary was built from, recorded in every benchmark result. Generated at
// build time by tools/bench/build_info.cmake (re-run on every build, rewritten only on change).
// Thread safety: constants.
#pragma once

namespace vosti::bench {

// The full commit hash, "+dirty" appended when tracked files differed from it; "unknown"
// outside a git checkout.
const char* build_commit();

}  // namespace vosti::bench
