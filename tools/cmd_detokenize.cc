// vosti detokenize [--model PATH] [--skip-special] ID...: prints the text of token ids.
#include <CLI/CLI.hpp>
#include <fmt/core.h>

#include <string>
#include <vector>

#include "tokenizer/tokenizer.h"
#include "tools/commands.h"

namespace vosti::tools {

int cmd_detokenize(int argc, char** argv) {
  std::string model;
  std::vector<int64_t> raw_ids;
  bool skip_special = false;
  CLI::App app{"Print the text of token ids (ids as arguments).", "vosti detokenize"};
  app.add_option("--model,-m", model, "GGUF file or HF directory (default: the default model)");
  app.add_flag("--skip-special", skip_special, "leave out special tokens, as skip_special_tokens=True");
  app.add_option("ids", raw_ids, "token ids")->required();
  CLI11_PARSE(app, argc, argv);
  if (model.empty()) model = default_model_path();

  std::vector<int32_t> ids;
  for (int64_t id : raw_ids) {
    if (id < 0 || id > INT32_MAX) {
      fmt::print(stderr, "vosti detokenize: token id {} is out of range\n", id);
      return 2;
    }
    ids.push_back(static_cast<int32_t>(id));
  }
  auto tok = Tokenizer::load_for_model(model);
  if (!tok.ok()) {
    fmt::print(stderr, "vosti detokenize: {}\n", tok.status().to_string());
    return 1;
  }
  auto text = (*tok)->decode(ids, skip_special);
  if (!text.ok()) {
    fmt::print(stderr, "vosti detokenize: {}\n", text.status().to_string());
    return 1;
  }
  fmt::print("{}\n", *text);
  return 0;
}

}  // namespace vosti::tools
