// vosti verify: the determinism harness as a user command (tools/verify/).
#include <CLI/CLI.hpp>
#include <cstdio>

#include "runner/load_device_model.h"
#include "tools/cmd_verify_paper.h"
#include "tokenizer/tokenizer.h"
#include "tools/commands.h"
#include "tools/engine_options.h"
#include "tools/verify/verify_harness.h"

namespace vosti::tools {

namespace {

// --protocol paper: the command's settings into `paper`, then the protocol (cmd_verify_paper.h).
int start_paper(PaperCommand& paper, const std::vector<std::string>& models, const EngineConfig& deployment, int argc,
                char** argv) {
  paper.deployment = deployment;
  paper.command_line = "vosti";
  for (int i = 0; i < argc; ++i) paper.command_line += std::string(" ") + argv[i];
  if (!paper.http.base_url.empty()) {
    if (models.size() > 1) {
      std::fprintf(stderr, "vosti verify: with --base-url, --model names the one served model\n");
      return 2;
    }
    if (!models.empty()) paper.http.model = models[0];
  } else {
    paper.models = models.empty() ? std::vector<std::string>{default_model_path()} : models;
  }
  return run_paper_command(paper);
}

// The variation matrix on each model: prints each variation as it ends, then the table.
int run_matrix(const std::vector<std::string>& models, const EngineConfig& deployment, bool full, uint64_t seed,
               const std::string& speculative_config) {
  std::vector<HarnessReport> reports;
  bool ok = true;
  for (const auto& path : models) {
    auto model = load_device_model(path, deployment.device);
    if (!model.ok()) {
      std::fprintf(stderr, "vosti verify: %s\n", model.status().to_string().c_str());
      return 1;
    }
    EngineConfig ref = deployment;
    // The cuda runner checks every device-sampled row against the host sampler on its logits.
    ref.check_device_sampler = deployment.device == "cuda";
    ref.max_model_len = full ? 512 : 128;
    ref.num_blocks = 4 * ref.max_model_len / deployment.block_size;
    ref.num_threads = 2;
    ref.check_invariants = true;
    auto requests = make_harness_requests((*model)->config(), full, seed);
    // Structured outputs join the matrix where the model has a tokenizer.
    std::shared_ptr<const Tokenizer> tokenizer;
    if (auto t = Tokenizer::load_for_model(path); t.ok()) tokenizer = *t;
    if (tokenizer) add_structured_requests(requests);
    auto variations = make_variations(ref, full);
    if (!speculative_config.empty()) variations.push_back(speculative_variation(ref, speculative_config));
    std::printf("model %s on %s: %zu requests, %zu variations\n", (*model)->config().name.c_str(),
                deployment.device.c_str(), requests.size(), variations.size());
    auto report = run_determinism_harness(
        *model, requests, ref, variations,
        [](const VariationResult& r) {
          std::printf("  %-28s %s %s\n", r.name.c_str(), r.identical ? "identical" : "DIFFERS",
                      r.first_difference.c_str());
          std::fflush(stdout);
        },
        tokenizer);
    if (!report.ok()) {
      std::fprintf(stderr, "vosti verify: %s\n", report.status().to_string().c_str());
      return 1;
    }
    ok = ok && report->all_identical();
    reports.push_back(std::move(report).value());
  }
  std::printf("\n%s", format_report_table(reports).c_str());
  std::printf("\n%s\n", ok ? "verify: every logit of every position is bitwise identical to the reference"
                           : "verify: FAILED: some variation changed a logit");
  return ok ? 0 : 1;
}

}  // namespace

int cmd_verify(int argc, char** argv) {
  CLI::App app{
      "Runs a request set alone (the reference F_D) and under the variation matrix, and compares\n"
      "every logit of every output position bit for bit; or (--protocol paper) the Vosti paper's\n"
      "784-comparison protocol, in-process or against an OpenAI-compatible server (--base-url).",
      "vosti verify"};
  std::vector<std::string> models;
  bool full = false;
  uint64_t seed = 7;
  // The deployment under test; the harness sets the rest (its reference runs one token per step
  // with the cache off, and the variation matrix varies the scheduling and memory options).
  EngineConfig deployment;
  std::string protocol = "matrix";
  PaperCommand paper;
  app.add_option("--model", models,
                 "model file or directory (repeatable; default: the default model); with --base-url, the served "
                 "model's name");
  app.add_option("--protocol", protocol,
                 "matrix: Vosti's variation matrix (below); paper: the paper's protocol (batch composition, "
                 "chunking, prefill/decode, prefix reuse; seed 0x5EED2026)")
      ->check(CLI::IsMember({"matrix", "paper"}))
      ->capture_default_str();
  app.add_flag("--full", full, "matrix: the longer matrix: more requests, longer generations");
  app.add_option("--seed", seed, "matrix: seed of the generated request set");
  app.add_option("--base-url", paper.http.base_url,
                 "paper: test an OpenAI-compatible server at this URL (Vosti, vLLM, SGLang, llama-server)");
  app.add_option("--api-key", paper.http.api_key, "paper, --base-url: sent as 'Authorization: Bearer KEY'");
  app.add_option("--tokenizer", paper.http.tokenizer,
                 "paper, --base-url: a local copy of the served model (directory or GGUF) for its vocabulary, "
                 "when the server's /v1/models does not list it");
  app.add_option("--server-token-budget", paper.http.server_token_budget,
                 "paper, --base-url: the server's step token budget (its --max-num-batched-tokens) when its "
                 "/metrics does not say; chunking is induced below it");
  app.add_option("--max-context", paper.max_context,
                 "paper: the longest sequence (prompt + output) the protocol builds; the paper's longer prompts "
                 "are cut to fit and the report says so (default: the model's context, or the server's)");
  app.add_option("--cuda-graphs", paper.cuda_graphs,
                 "paper, --device cuda: run with CUDA graphs on (padded), off, or both (one report each)")
      ->check(CLI::IsMember({"on", "off", "both"}))
      ->capture_default_str();
  app.add_option("--json", paper.json_path, "paper: write every comparison and witness here as JSON");
  app.add_option("--relations", paper.relations,
                 "paper: run only these relations (batch, chunk, pd, cache; default all), e.g. to split a long run")
      ->delimiter(',');
  std::string speculative_config;
  app.add_option("--speculative-config", speculative_config,
                 "matrix: add speculative decoding with this config (vLLM's JSON, e.g. "
                 "'{\"method\":\"ngram\",\"num_speculative_tokens\":4,\"prompt_lookup_max\":4}') as a variation; "
                 "the matrix already holds n-gram k = 1, 3, 8");
  add_engine_options(app, deployment, EngineOptionSet::kDeployment);
  app.footer(
      "--attention-split 64 exercises the split states within the harness's 128-token contexts (512 with "
      "--full).");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;  // commands.h: 2 for a usage error (CLI11's own codes vary)
  }
  if (protocol == "paper") return start_paper(paper, models, deployment, argc, argv);
  if (!paper.http.base_url.empty()) {
    std::fprintf(stderr, "vosti verify: --base-url runs the paper protocol: add --protocol paper\n");
    return 2;
  }
  if (models.empty()) models.push_back(default_model_path());
  return run_matrix(models, deployment, full, seed, speculative_config);
}

}  // namespace vosti::tools
