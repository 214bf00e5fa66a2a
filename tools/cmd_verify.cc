// vosti verify: the determinism harness as a user command (tools/verify/).
#include <CLI/CLI.hpp>
#include <cstdio>

#include "runner/load_device_model.h"
#include "tools/commands.h"
#include "tools/verify/verify_harness.h"

namespace vosti::tools {

int cmd_verify(int argc, char** argv) {
  CLI::App app{
      "Runs a request set alone (the reference F_D) and under the variation matrix, and compares\n"
      "every logit of every output position bit for bit.",
      "vosti verify"};
  std::vector<std::string> models;
  bool full = false;
  std::string backend = "cpu";
  std::string device = "cpu";
  std::string kv_dtype = "auto";
  uint64_t seed = 7;
  int32_t block_size = 16;
  int32_t attention_split = 0;
  app.add_option("--model", models, "model file or directory (repeatable; default: the default model)");
  app.add_flag("--full", full, "the longer matrix: more requests, longer generations");
  app.add_option("--device", device, "where the model runs: cpu or cuda")->check(CLI::IsMember({"cpu", "cuda"}));
  app.add_option("--backend", backend, "cpu kernel backend: cpu, ref (cpu-planted-bug: a deliberately broken kernel)");
  app.add_option("--kv-cache-dtype", kv_dtype, "cuda: KV pool dtype (auto = bf16, or f32)")
      ->check(CLI::IsMember({"auto", "bf16", "f32"}));
  app.add_option("--seed", seed, "seed of the generated request set");
  app.add_option("--block-size", block_size, "KV block size (tokens)");
  app.add_option("--attention-split", attention_split,
                 "cuda: KV positions per attention split, a multiple of 64 (0: 512); 64 exercises the split "
                 "states within the harness's 128-token contexts");
  CLI11_PARSE(app, argc, argv);
  if (models.empty()) models.push_back(default_model_path());

  std::vector<HarnessReport> reports;
  bool ok = true;
  for (const auto& path : models) {
    auto model = load_device_model(path, device);
    if (!model.ok()) {
      std::fprintf(stderr, "vosti verify: %s\n", model.status().to_string().c_str());
      return 1;
    }
    EngineConfig ref;
    ref.device = device;
    ref.backend = backend;
    ref.kv_cache_dtype = kv_dtype;
    // The cuda runner checks every device-sampled row against the host sampler on its logits.
    ref.check_device_sampler = device == "cuda";
    ref.block_size = block_size;
    ref.attention_split = attention_split;
    ref.max_model_len = full ? 512 : 128;
    ref.num_blocks = 4 * ref.max_model_len / block_size;
    ref.num_threads = 2;
    ref.check_invariants = true;
    const auto requests = make_harness_requests((*model)->config(), full, seed);
    const auto variations = make_variations(ref, full);
    std::printf("model %s on %s: %zu requests, %zu variations\n", (*model)->config().name.c_str(), device.c_str(),
                requests.size(), variations.size());
    auto report = run_determinism_harness(*model, requests, ref, variations, [](const VariationResult& r) {
      std::printf("  %-28s %s %s\n", r.name.c_str(), r.identical ? "identical" : "DIFFERS", r.first_difference.c_str());
      std::fflush(stdout);
    });
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

}  // namespace vosti::tools
