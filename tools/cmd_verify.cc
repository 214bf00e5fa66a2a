#include <cstdio>

#include "tools/commands.h"

namespace vosti::tools {
int cmd_verify(int, char**) {
  std::fprintf(stderr, "vosti verify: not built yet\n");
  return 1;
}
}  // namespace vosti::tools
