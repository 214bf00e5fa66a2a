// The vosti subcommands; each lives in tools/cmd_<name>.cc.
// Each returns the process exit code (0 ok, 1 runtime error, 2 usage error).
#pragma once

namespace vosti::tools {
int cmd_inspect(int argc, char** argv);
int cmd_tokenize(int argc, char** argv);
int cmd_detokenize(int argc, char** argv);
int cmd_generate(int argc, char** argv);
int cmd_serve(int argc, char** argv);
int cmd_verify(int argc, char** argv);
int cmd_make_model(int argc, char** argv);
int cmd_bench(int argc, char** argv);
int cmd_engine_options(int argc, char** argv);
// The default model path: $VOSTI_DEFAULT_MODEL, else $VOSTI_CACHE/models/..., else ~/.cache/vosti/models/...
const char* default_model_path();
}  // namespace vosti::tools
