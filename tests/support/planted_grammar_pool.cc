// The planted grammar-pool violation (tests/support/planted.h): a mask that depends on the pool
// worker that filled it.
#include <bit>

#include "tests/support/planted.h"

namespace vosti {

EngineHooks planted_worker_dependent_mask_hooks() {
  EngineHooks hooks;
  hooks.pooled_mask = [](std::span<uint32_t> mask, int worker) {
    if (worker == 0) return;
    int64_t num_allowed = 0;
    for (const uint32_t w : mask) num_allowed += std::popcount(w);
    if (num_allowed < 2) return;  // the grammar must keep a token
    for (uint32_t& w : mask) {
      if (w != 0) {
        w &= w - 1;  // drops the lowest allowed token
        return;
      }
    }
  };
  return hooks;
}

}  // namespace vosti
