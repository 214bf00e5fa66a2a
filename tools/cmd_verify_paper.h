// `vosti verify --protocol paper`: the paper's determinism protocol (tools/verify/paper_*.h) on
// models in this process (--device cpu or cuda; on cuda once with CUDA graphs, once without) or
// against an OpenAI-compatible server (--base-url). cmd_verify.cc parses the flags.
#pragma once

#include <string>
#include <vector>

#include "core/engine_config.h"
#include "tools/verify/http_backend.h"

namespace vosti::tools {

struct PaperCommand {
  std::vector<std::string> models;     // in-process: model paths
  EngineConfig deployment;             // in-process: the deployment's options
  std::string cuda_graphs = "both";    // cuda: on, off or both (one report each)
  HttpBackendOptions http;             // remote when http.base_url is set (http.model: the served name)
  int32_t max_context = 0;             // the longest sequence the protocol builds; 0: the model's / server's
  std::string json_path;               // write the JSON here
  std::string command_line;            // recorded in the JSON
  std::vector<std::string> relations;  // keys of the relations to run; empty: all four
};

// Runs it, prints the table; returns the exit code (0: every relation of every report passed).
int run_paper_command(const PaperCommand& command);

}  // namespace vosti::tools
