// The engine options (tools/engine_options.h): every flag writes its EngineConfig field, a
// command's own defaults survive, the deployment subset is only the (D) fields, bad values are
// refused, and the JSON table agrees with what the flags do.
#include "tools/engine_options.h"

#include <gtest/gtest.h>

#include <CLI/CLI.hpp>
#include <set>
#include <string>
#include <vector>

namespace vosti::tools {
namespace {

// Parses `args` into `config` through a fresh app; returns CLI11's exit code (0: parsed).
int parse(EngineConfig& config, std::vector<std::string> args, EngineOptionSet set = EngineOptionSet::kAll) {
  CLI::App app{"test"};
  add_engine_options(app, config, set);
  args.insert(args.begin(), "vosti");
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  try {
    app.parse(static_cast<int>(argv.size()), argv.data());
  } catch (const CLI::ParseError& e) {
    return e.get_exit_code();
  }
  return 0;
}

TEST(EngineOptions, EveryFlagWritesItsField) {
  EngineConfig c;
  ASSERT_EQ(parse(c, {"--device",
                      "cuda",
                      "--backend",
                      "ref",
                      "--block-size",
                      "32",
                      "--kv-cache-dtype",
                      "f32",
                      "--attention-split",
                      "64",
                      "--logprobs-mode",
                      "processed_logits",
                      "--max-model-len",
                      "300",
                      "--max-num-seqs",
                      "3",
                      "--max-num-batched-tokens",
                      "77",
                      "--kv-cache-mb",
                      "5",
                      "--gpu-memory-utilization",
                      "0.5",
                      "--num-blocks",
                      "99",
                      "--no-prefix-caching",
                      "--window-local-kv",
                      "--no-cuda-graphs",
                      "--threads",
                      "4",
                      "--structured-output-threads",
                      "3",
                      "--structured-output-pool-threshold",
                      "5",
                      "--speculative-config",
                      R"({"method":"ngram","num_speculative_tokens":2})",
                      "--check-invariants"}),
            0);
  EXPECT_EQ(c.device, "cuda");
  EXPECT_EQ(c.backend, "ref");
  EXPECT_EQ(c.block_size, 32);
  EXPECT_EQ(c.kv_cache_dtype, "f32");
  EXPECT_EQ(c.attention_split, 64);
  EXPECT_EQ(c.logprobs_mode, "processed_logits");
  EXPECT_EQ(c.max_model_len, 300);
  EXPECT_EQ(c.max_num_seqs, 3);
  EXPECT_EQ(c.max_num_batched_tokens, 77);
  EXPECT_EQ(c.kv_cache_bytes, int64_t{5} << 20);
  EXPECT_EQ(c.gpu_memory_utilization, 0.5);
  EXPECT_EQ(c.num_blocks, 99);
  EXPECT_FALSE(c.enable_prefix_caching);
  EXPECT_TRUE(c.window_local_kv);
  EXPECT_FALSE(c.cuda_graphs);
  EXPECT_EQ(c.num_threads, 4);
  EXPECT_EQ(c.structured_output_threads, 3);
  EXPECT_EQ(c.structured_output_pool_threshold, 5);
  EXPECT_TRUE(c.check_invariants);
  EXPECT_EQ(c.speculative_config, R"({"method":"ngram","num_speculative_tokens":2})");
  // Every option of the table was given above: the JSON lists no flag this test does not know.
  EXPECT_EQ(engine_options_json().size(), 20u);
}

TEST(EngineOptions, NoFlagsLeaveTheCommandsDefaults) {
  EngineConfig c;
  c.max_num_seqs = 1;  // as `vosti generate` sets it before adding the options
  c.kv_cache_bytes = int64_t{3} << 20;
  ASSERT_EQ(parse(c, {}), 0);
  EXPECT_EQ(c.max_num_seqs, 1);
  EXPECT_EQ(c.kv_cache_bytes, int64_t{3} << 20);
  EXPECT_TRUE(c.enable_prefix_caching);
  EXPECT_TRUE(c.cuda_graphs);

  CLI::App app{"test"};
  add_engine_options(app, c);
  const std::string help = app.help();
  EXPECT_NE(help.find("--max-num-seqs INT:POSITIVE=1"), std::string::npos) << help;
  EXPECT_NE(help.find("--kv-cache-mb INT:POSITIVE=3"), std::string::npos) << help;
  EXPECT_NE(help.find("Engine options"), std::string::npos) << help;
}

TEST(EngineOptions, TheDeploymentSetIsTheDeploymentFields) {
  EngineConfig c;
  EXPECT_EQ(parse(c,
                  {"--device", "cpu", "--backend", "ref", "--block-size", "8", "--kv-cache-dtype", "auto",
                   "--attention-split", "128"},
                  EngineOptionSet::kDeployment),
            0);
  EXPECT_EQ(c.backend, "ref");
  EXPECT_EQ(c.block_size, 8);
  EXPECT_NE(parse(c, {"--max-num-seqs", "4"}, EngineOptionSet::kDeployment), 0);
  std::set<std::string> deployment;
  for (const auto& o : engine_options_json())
    if (o["deployment"].get<bool>()) deployment.insert(o["flag"].get<std::string>());
  EXPECT_EQ(deployment, (std::set<std::string>{"--device", "--backend", "--block-size", "--kv-cache-dtype",
                                               "--attention-split", "--logprobs-mode"}));
}

TEST(EngineOptions, BadValuesAreRefused) {
  EngineConfig c;
  EXPECT_NE(parse(c, {"--device", "tpu"}), 0);
  EXPECT_NE(parse(c, {"--backend", "cpu-planted-bug"}), 0);  // test-only backends are not user values
  EXPECT_NE(parse(c, {"--kv-cache-dtype", "f16"}), 0);
  EXPECT_NE(parse(c, {"--block-size", "0"}), 0);
  EXPECT_NE(parse(c, {"--kv-cache-mb", "0"}), 0);
  EXPECT_NE(parse(c, {"--gpu-memory-utilization", "1.5"}), 0);
  EXPECT_NE(parse(c, {"--threads", "-1"}), 0);
  EXPECT_NE(parse(c, {"--logprobs-mode", "processed"}), 0);
  EXPECT_EQ(c.device, "cpu");
  EXPECT_EQ(c.backend, "cpu");
}

TEST(EngineOptions, TheJsonTableDescribesTheFlags) {
  const EngineConfig defaults;
  std::set<std::string> flags, fields;
  for (const auto& o : engine_options_json()) {
    const std::string flag = o["flag"].get<std::string>();
    EXPECT_TRUE(flags.insert(flag).second) << "two options named " << flag;
    EXPECT_TRUE(fields.insert(o["field"].get<std::string>()).second) << "two flags set " << o["field"];
    EXPECT_FALSE(o["help"].get<std::string>().empty()) << flag;
    for (const char* key : {"type", "default", "flag_unit", "negated", "choices", "deployment"})
      EXPECT_TRUE(o.contains(key)) << flag << " lacks " << key;
  }
  // Spot checks of the defaults (a default EngineConfig's values, in the field's units).
  for (const auto& o : engine_options_json()) {
    if (o["field"] == "kv_cache_bytes") {
      EXPECT_EQ(o["default"].get<int64_t>(), defaults.kv_cache_bytes);
      EXPECT_EQ(o["flag_unit"].get<int64_t>(), int64_t{1} << 20);
    }
    if (o["field"] == "cuda_graphs") {
      EXPECT_EQ(o["type"], "bool");
      EXPECT_TRUE(o["negated"].get<bool>());
      EXPECT_EQ(o["default"].get<bool>(), defaults.cuda_graphs);
    }
    if (o["field"] == "device") {
      EXPECT_EQ(o["choices"], nlohmann::ordered_json({"cpu", "cuda"}));
    }
    if (o["field"] == "gpu_memory_utilization") {
      EXPECT_EQ(o["type"], "float");
    }
  }
  // The test-only fields are no options.
  EXPECT_EQ(fields.count("attention_split_follows_batch"), 0u);
  EXPECT_EQ(fields.count("block_shuffle_seed"), 0u);
}

}  // namespace
}  // namespace vosti::tools
