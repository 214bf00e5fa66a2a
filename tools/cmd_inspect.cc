#include <cstdio>

#include "tools/commands.h"

namespace vosti::tools {
int cmd_inspect(int, char**) {
  std::fprintf(stderr, "vosti inspect: not built yet\n");
  return 1;
}
}  // namespace vosti::tools
