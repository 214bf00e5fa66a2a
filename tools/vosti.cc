// vosti: the command-line tool. `vosti <command> --help` describes each command.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "tools/commands.h"

namespace vosti::tools {

const char* default_model_path() {
  static std::string path = [] {
    if (const char* p = std::getenv("VOSTI_DEFAULT_MODEL"); p && *p) return std::string(p);
    std::string cache;
    if (const char* c = std::getenv("VOSTI_CACHE"); c && *c) {
      cache = c;
    } else {
      const char* home = std::getenv("HOME");
      cache = std::string(home ? home : ".") + "/.cache/vosti";
    }
    return cache + "/models/SmolLM2-135M-Instruct.Q4_1.gguf";
  }();
  return path.c_str();
}

}  // namespace vosti::tools

namespace {

struct Command {
  const char* name;
  int (*run)(int, char**);
  const char* help;
};

constexpr Command kCommands[] = {
    {"generate", vosti::tools::cmd_generate, "generate text from a prompt"},
    {"serve", vosti::tools::cmd_serve, "run the OpenAI-compatible HTTP server"},
    {"bench", vosti::tools::cmd_bench, "benchmark serving: TTFT, TPOT, ITL, throughput (in-process or HTTP)"},
    {"verify", vosti::tools::cmd_verify, "check bitwise determinism under the variation matrix"},
    {"inspect", vosti::tools::cmd_inspect, "print a model file's architecture, tensors and metadata"},
    {"make-model", vosti::tools::cmd_make_model, "write a random-weight model with a real model's config"},
    {"tokenize", vosti::tools::cmd_tokenize, "print the token ids of a text"},
    {"detokenize", vosti::tools::cmd_detokenize, "print the text of token ids"},
    {"engine-options", vosti::tools::cmd_engine_options, "print the engine options the commands share (JSON)"},
};

void usage(FILE* out) {
  std::fprintf(out, "usage: vosti <command> [options]\n\ncommands:\n");
  for (const auto& c : kCommands) std::fprintf(out, "  %-14s %s\n", c.name, c.help);
  std::fprintf(out, "\n`vosti <command> --help` for a command's options.\n");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    usage(stderr);
    return 2;
  }
  if (!std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h") || !std::strcmp(argv[1], "help")) {
    usage(stdout);
    return 0;
  }
  for (const auto& c : kCommands) {
    if (!std::strcmp(argv[1], c.name)) return c.run(argc - 1, argv + 1);
  }
  std::fprintf(stderr, "vosti: unknown command '%s'\n\n", argv[1]);
  usage(stderr);
  return 2;
}
