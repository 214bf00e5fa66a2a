// vosti serve: the OpenAI-compatible HTTP server on one model (src/server/).
//
// Signals: SIGINT/SIGTERM stop accepting connections, let running requests finish
// within --shutdown-timeout seconds, abort the rest, and exit 0. The signals are
// blocked in every thread and taken synchronously by the main thread (sigwait).
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <string>
#include <thread>

#include <CLI/CLI.hpp>

#include "engine/engine.h"
#include "model/model.h"
#include "model/model_file.h"
#include "offline/weights_identity.h"
#include "runner/load_device_model.h"
#include "server/engine_loop.h"
#include "server/http_server.h"
#include "server/openai_service.h"
#include "server/tool_call_parser.h"
#include "tokenizer/tokenizer.h"
#include "tools/commands.h"
#include "tools/engine_options.h"

namespace vosti::tools {
namespace {

struct ServeFlags {
  std::string model;
  std::string host = "127.0.0.1";
  int port = 8000;
  std::string api_key;
  std::string served_model_name;
  EngineConfig engine;
  int io_threads = 2;
  int64_t max_body_bytes = 8 << 20;
  double shutdown_timeout_s = 30;
  bool no_access_log = false;
  std::string tool_call_parser;  // empty: the model family's (server/tool_call_parser.h)
  bool enable_auto_tool_choice = false;
};

// Blocks SIGINT/SIGTERM in this thread and every thread started after; returns the set.
sigset_t block_shutdown_signals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  return set;
}

// Stops accepting, waits for running requests up to the deadline, aborts the rest.
void shut_down(HttpServer& server, OpenAiService& service, EngineLoop& loop, double timeout_s) {
  using Clock = std::chrono::steady_clock;
  server.stop_accepting();
  service.begin_shutdown();
  loop.resume();  // a paused engine finishes its requests too (kept ones, and those held meanwhile)
  std::fprintf(stderr, "vosti serve: shutting down; %lld request(s) in flight, waiting up to %.0f s\n",
               static_cast<long long>(service.num_active()), timeout_s);
  const auto deadline = Clock::now() + std::chrono::duration<double>(timeout_s);
  while (service.num_active() > 0 && Clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  if (service.num_active() > 0) {
    std::fprintf(stderr, "vosti serve: aborting %lld request(s) at the deadline\n",
                 static_cast<long long>(service.num_active()));
    service.abort_all();
    const auto abort_deadline = Clock::now() + std::chrono::seconds(5);
    while (service.num_active() > 0 && Clock::now() < abort_deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // let the last bytes reach the sockets
  server.stop();
  loop.stop();
}

int run_serve(const ServeFlags& f) {
  const sigset_t signals = block_shutdown_signals();
  auto file = ModelFile::open(f.model);
  if (!file.ok()) {
    std::fprintf(stderr, "vosti serve: %s\n", file.status().to_string().c_str());
    return 1;
  }
  // The weights' digest names them in every response (and GET /deployment); the digester keeps
  // the per-tensor digests so that a weight update re-hashes only what it replaced.
  WeightsDigester digester;
  auto weights_digest = digester.digest(**file);
  if (!weights_digest.ok()) {
    std::fprintf(stderr, "vosti serve: %s\n", weights_digest.status().to_string().c_str());
    return 1;
  }
  auto model = load_device_model(*file, f.engine.device);
  if (!model.ok()) {
    std::fprintf(stderr, "vosti serve: %s\n", model.status().to_string().c_str());
    return 1;
  }
  auto tokenizer = Tokenizer::load_for_model(f.model);
  if (!tokenizer.ok()) {
    std::fprintf(stderr, "vosti serve: %s\n", tokenizer.status().to_string().c_str());
    return 1;
  }
  const EngineConfig& config = f.engine;
  std::shared_ptr<const DeviceModel> loaded = std::move(model).value();
  auto engine = Engine::create(loaded, config, *tokenizer);
  if (!engine.ok()) {
    std::fprintf(stderr, "vosti serve: %s\n", engine.status().to_string().c_str());
    return 1;
  }
  const ModelConfig model_config = loaded->config();
  loaded.reset();  // the engine's reference alone: sleep level 2 frees the weights
  {
    const RunnerInfo& info = (*engine)->runner_info();
    const ModelConfig& mc = model_config;
    std::fprintf(
        stderr,
        "vosti serve: device %s; model %s (%lld layers, hidden %lld, vocab %lld), weights %.2f GiB; KV cache "
        "%s, %lld blocks of %d tokens (%.2f GiB, %lld tokens); max_num_seqs %d, max_num_batched_tokens %d\n",
        info.device.c_str(), mc.name.c_str(), static_cast<long long>(mc.num_layers),
        static_cast<long long>(mc.hidden_size), static_cast<long long>(mc.vocab_size),
        static_cast<double>(info.weight_bytes) / (1u << 30), info.kv_cache_dtype.c_str(),
        static_cast<long long>(info.num_blocks), info.block_size, static_cast<double>(info.kv_cache_bytes) / (1u << 30),
        static_cast<long long>(info.num_blocks) * info.block_size, config.max_num_seqs, config.max_num_batched_tokens);
  }
  auto deployment = std::make_shared<DeploymentInfo>(describe_deployment(
      *weights_digest, 0, f.model, (*file)->config(), (*engine)->config(), (*engine)->runner_info()));
  std::fprintf(stderr, "vosti serve: deployment %s (weights %s, %s, %s)\n", deployment->deployment_id.c_str(),
               deployment->weights_id.c_str(), deployment->kernel_plan.c_str(), deployment->vosti_version.c_str());
  // Destroyed explicitly before the server: the engine's callbacks hold connections.
  auto loop_holder = std::make_unique<EngineLoop>(std::move(engine).value(), std::move(deployment));
  EngineLoop& loop = *loop_holder;

  HttpServerOptions http;
  http.host = f.host;
  http.port = static_cast<uint16_t>(f.port);
  http.num_io_threads = f.io_threads;
  http.max_body_bytes = f.max_body_bytes;
  http.access_log = !f.no_access_log;
  ServiceOptions service_options;
  service_options.served_model_name =
      f.served_model_name.empty() ? std::filesystem::path(f.model).stem().string() : f.served_model_name;
  service_options.api_key = f.api_key;
  service_options.tool_call_parser = f.tool_call_parser;
  service_options.enable_auto_tool_choice = f.enable_auto_tool_choice;
  if (f.enable_auto_tool_choice) {
    const std::string parser = !f.tool_call_parser.empty() ? f.tool_call_parser
                               : (*tokenizer)->chat_template()
                                   ? tool_call_parser_for_template(*(*tokenizer)->chat_template())
                                   : "hermes";
    std::fprintf(stderr, "vosti serve: tool_choice \"auto\" parses tool calls with the %s parser\n", parser.c_str());
  }
  service_options.model_file = *file;
  service_options.digester = std::move(digester);
  HttpServer* server_ptr = nullptr;
  service_options.num_connections = [&server_ptr] { return server_ptr ? server_ptr->num_connections() : 0; };
  OpenAiService service(loop, *tokenizer, service_options);
  HttpServer server(
      http, [&service](const HttpRequest& r, std::shared_ptr<HttpResponder> w) { service.handle(r, std::move(w)); });
  server_ptr = &server;
  if (Status s = server.start(); !s.ok()) {
    std::fprintf(stderr, "vosti serve: %s\n", s.to_string().c_str());
    loop.stop();
    return 1;
  }
  std::fprintf(stderr, "vosti serve: serving '%s' (max_model_len %d) on http://%s:%u\n",
               service_options.served_model_name.c_str(), loop.config().max_model_len, f.host.c_str(),
               static_cast<unsigned>(server.port()));
  std::fflush(stderr);
  int signal_number = 0;
  sigwait(&signals, &signal_number);
  std::fprintf(stderr, "vosti serve: got %s\n", signal_number == SIGINT ? "SIGINT" : "SIGTERM");
  shut_down(server, service, loop, f.shutdown_timeout_s);
  loop_holder.reset();
  std::fprintf(stderr, "vosti serve: stopped\n");
  return 0;
}

}  // namespace

int cmd_serve(int argc, char** argv) {
  ServeFlags f;
  f.model = default_model_path();
  CLI::App app{"Run the OpenAI-compatible HTTP server (POST /v1/completions, /v1/chat/completions, ...)",
               "vosti serve"};
  app.add_option("--model", f.model, "model: a .gguf file or a Hugging Face directory")->capture_default_str();
  app.add_option("--host", f.host, "address to bind (loopback by default)")->capture_default_str();
  app.add_option("--port", f.port, "TCP port (0: any free port, printed at start)")
      ->check(CLI::Range(0, 65535))
      ->capture_default_str();
  app.add_option("--api-key", f.api_key, "require 'Authorization: Bearer KEY' on every route but /health");
  app.add_option("--served-model-name", f.served_model_name, "model id for /v1/models (default: the file's stem)");
  app.add_option("--io-threads", f.io_threads, "HTTP I/O threads")->check(CLI::Range(1, 64))->capture_default_str();
  add_engine_options(app, f.engine);
  app.add_option("--max-body-bytes", f.max_body_bytes, "largest request body accepted (413 above)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--shutdown-timeout", f.shutdown_timeout_s, "seconds running requests get to finish on SIGTERM")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_flag("--no-access-log", f.no_access_log, "do not print one JSON line per request on stderr");
  app.add_option("--tool-call-parser", f.tool_call_parser,
                 "the tool-call format, which tool calls are parsed from and \"required\" or named calls are "
                 "forced into: " +
                     tool_call_parser_names() + " (default: the model family's, from its chat template)")
      ->check([](const std::string& name) {
        return make_tool_call_parser(name)
                   ? std::string()
                   : "unknown tool-call parser '" + name + "' (choose " + tool_call_parser_names() + ")";
      });
  app.add_flag("--enable-auto-tool-choice", f.enable_auto_tool_choice,
               "serve tool_choice \"auto\" (the default with tools): parse the model's own tool calls");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  return run_serve(f);
}

}  // namespace vosti::tools
