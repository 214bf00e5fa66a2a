// vosti tokenize [--model PATH] [--text T | stdin] [--no-special] [--verbose]: prints the
// token ids of a text as the model's tokenizer (GGUF or HF directory) produces them.
#include <CLI/CLI.hpp>
#include <fmt/core.h>

#include <iostream>
#include <nlohmann/json.hpp>
#include <iterator>
#include <string>

#include "tokenizer/tokenizer.h"
#include "tools/commands.h"

namespace vosti::tools {

int cmd_tokenize(int argc, char** argv) {
  std::string model, text;
  bool no_special = false, verbose = false;
  CLI::App app{"Print the token ids of a text (one line of space-separated ids; --verbose: id<TAB>piece per line).",
               "vosti tokenize"};
  app.add_option("--model,-m", model, "GGUF file or HF directory (default: the default model)");
  auto* text_opt = app.add_option("--text,-t", text, "the text (default: read stdin)");
  app.add_flag("--no-special", no_special, "do not add BOS/EOS (the post-processor's special tokens)");
  app.add_flag("--verbose,-v", verbose, "print id<TAB>piece lines (pieces as JSON strings)");
  CLI11_PARSE(app, argc, argv);
  if (model.empty()) model = default_model_path();
  if (!text_opt->count()) text.assign(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());

  auto tok = Tokenizer::load_for_model(model);
  if (!tok.ok()) {
    fmt::print(stderr, "vosti tokenize: {}\n", tok.status().to_string());
    return 1;
  }
  auto ids = (*tok)->encode(text, !no_special);
  if (!ids.ok()) {
    fmt::print(stderr, "vosti tokenize: {}\n", ids.status().to_string());
    return 1;
  }
  if (verbose) {
    for (int32_t id : *ids) {
      // The decoded text of the single token, JSON-quoted so whitespace and control characters show.
      const std::string piece = (*tok)->decode_lenient(std::span<const int32_t>(&id, 1));
      fmt::print("{}\t{}\n", id, nlohmann::json(piece).dump());
    }
    return 0;
  }
  for (size_t i = 0; i < ids->size(); ++i) fmt::print("{}{}", i ? " " : "", (*ids)[i]);
  fmt::print("\n");
  return 0;
}

}  // namespace vosti::tools
