#include <cstdio>

#include "tools/commands.h"

namespace vosti::tools {
int cmd_serve(int, char**) {
  std::fprintf(stderr, "vosti serve: not built yet\n");
  return 1;
}
}  // namespace vosti::tools
