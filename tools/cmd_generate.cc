#include <cstdio>

#include "tools/commands.h"

namespace vosti::tools {
int cmd_generate(int, char**) {
  std::fprintf(stderr, "vosti generate: not built yet\n");
  return 1;
}
}  // namespace vosti::tools
