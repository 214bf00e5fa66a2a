// vosti: the command-line tool (generate, serve, verify, bench, inspect).
#include <cstdio>
#include <string>

int main(int argc, char** argv) {
  std::fprintf(stderr, "usage: vosti <inspect|generate|serve|verify> ...\n");
  return argc > 1 ? 1 : 2;
}
