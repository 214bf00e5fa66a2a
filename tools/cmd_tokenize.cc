#include <cstdio>

#include "tools/commands.h"

namespace vosti::tools {
int cmd_tokenize(int, char**) {
  std::fprintf(stderr, "vosti tokenize: not built yet\n");
  return 1;
}
}  // namespace vosti::tools
