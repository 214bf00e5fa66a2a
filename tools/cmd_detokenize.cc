#include <cstdio>

#include "tools/commands.h"

namespace vosti::tools {
int cmd_detokenize(int, char**) {
  std::fprintf(stderr, "vosti detokenize: not built yet\n");
  return 1;
}
}  // namespace vosti::tools
