// Ids shared by every layer: one RequestId type from the server down to the scheduler
// and the runners, so that a request is named the same everywhere.
// Thread safety: value types.
#pragma once

#include <cstdint>

namespace vosti {

using RequestId = uint64_t;  // assigned by Engine::add_request, unique per engine

}  // namespace vosti
