// The engine end to end on one device (cpu or cuda), two workloads:
//   decode:  one request, a prompt of --prompt-len random tokens, --output-len greedy tokens
//            (EOS ignored), after a warm-up request of another prompt of that length (2 tokens;
//            its time to first token, with the first launch of every kernel, is cold_ttft_s):
//            time to first token, time per output token after the first, tok/s, and on the GPU
//            the fraction of the weights/bandwidth roofline (weight bytes read once per token at
//            the copy bandwidth measured in the same run);
//   rollout: --requests requests of --prompt-len random tokens and --output-len sampled tokens
//            (EOS ignored, temperature 1), all submitted at once, --max-num-seqs running:
//            wall time and output tok/s (SGLang's deterministic-mode workload is 256 x 1024 /
//            1024 on a Qwen3-8B shape);
//   speculative: batch-1 decode of one prompt three times in fresh engines: plain, then with k
//            draft tokens a step that are always right, then always wrong (a drafter replaying the
//            plain run's output, engine/replay_drafter.h: random-weight models copy nothing, so
//            this measures the mechanism's ceiling and its cost); tok/s of each and the ratios,
//            and whether the three outputs are the same tokens (they must be).
// --speculative-config JSON runs decode and rollout with speculation (vLLM's config).
// Prints a table and one JSON line per run (--json FILE appends them). A benchmark: its
// numbers go to docs/BENCHMARKS.md with the command, machine and commit, never into a test.
//   build/bench/engine_decode_bench --model DIR --device cuda --workload decode|rollout|both
//       [--prompt-len 1024] [--output-len 256] [--requests 256] [--max-num-seqs 256]
//       [--max-num-batched-tokens 8192] [--no-cuda-graphs] [--json FILE]
//       [--speculative-config JSON] [--num-speculative-tokens 4 (the speculative workload's k)]
//       [--window-local-kv]
#include <chrono>
#include <cstdio>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#if VOSTI_HAVE_CUDA
#include <cuda_runtime.h>
#endif

#include "engine/engine.h"
#include "engine/replay_drafter.h"
#include "runner/load_device_model.h"

using namespace vosti;

namespace {

double now_s() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

// Device-to-device copy bandwidth (bytes read + written per second), or 0 without CUDA.
double copy_bandwidth() {
#if VOSTI_HAVE_CUDA
  const size_t bytes = size_t{2} << 30;
  void *a = nullptr, *b = nullptr;
  if (cudaMalloc(&a, bytes) != cudaSuccess || cudaMalloc(&b, bytes) != cudaSuccess) return 0;
  cudaMemset(a, 1, bytes);
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  float best = 1e30f;
  for (int i = 0; i < 6; ++i) {
    cudaEventRecord(e0);
    cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice);
    cudaEventRecord(e1);
    cudaEventSynchronize(e1);
    float ms = 0;
    cudaEventElapsedTime(&ms, e0, e1);
    if (i > 0) best = std::min(best, ms);
  }
  cudaFree(a);
  cudaFree(b);
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  return 2.0 * static_cast<double>(bytes) / (best * 1e-3);
#else
  return 0;
#endif
}

struct Options {
  std::string model, device = "cuda", workload = "both", json, speculative_config;
  int num_speculative_tokens = 4;
  int prompt_len = 1024, output_len = 256, requests = 256, max_num_seqs = 256, max_num_batched_tokens = 8192;
  bool graphs = true, window_local_kv = false;
  double gpu_memory_utilization = 0.9;
};

std::vector<int32_t> random_prompt(std::mt19937_64& rng, int n, int64_t vocab) {
  std::vector<int32_t> p(static_cast<size_t>(n));
  for (auto& t : p) t = static_cast<int32_t>(rng() % static_cast<uint64_t>(vocab));
  return p;
}

void emit(const Options& o, const std::string& line) {
  std::printf("%s\n", line.c_str());
  if (!o.json.empty()) std::ofstream(o.json, std::ios::app) << line << "\n";
}

// The batch-1 engine of the decode and speculative workloads.
EngineConfig decode_config(const Options& o) {
  EngineConfig c;
  c.device = o.device;
  c.max_num_seqs = 1;
  c.max_num_batched_tokens = std::max(o.prompt_len, 512);
  c.max_model_len = o.prompt_len + o.output_len + 16;
  c.cuda_graphs = o.graphs;
  c.gpu_memory_utilization = o.gpu_memory_utilization;
  c.speculative_config = o.speculative_config;
  c.window_local_kv = o.window_local_kv;
  return c;
}

// Runs one greedy request of `prompt` for max_tokens tokens (EOS ignored) to its end: the times its
// tokens arrived, from the request's submission, and (with `tokens`) the tokens. Empty on failure.
std::vector<double> timed_request(Engine& engine, std::vector<int32_t> prompt, int max_tokens,
                                  std::vector<int32_t>* tokens = nullptr) {
  RequestSpec spec;
  spec.prompt = std::move(prompt);
  spec.max_tokens = max_tokens;
  spec.ignore_eos = true;
  spec.sampling.temperature = 0.0f;
  std::vector<double> times;
  const double t0 = now_s();
  const auto on_output = [&](const RequestOutput& out) {
    for (const int32_t token : out.new_tokens) {
      times.push_back(now_s() - t0);
      if (tokens != nullptr) tokens->push_back(token);
    }
  };
  if (!engine.add_request(spec, on_output).ok()) return {};
  while (engine.has_work()) engine.step();
  return times;
}

int run_decode(const Options& o, const std::shared_ptr<const DeviceModel>& model, double copy_bw) {
  const EngineConfig c = decode_config(o);
  auto engine = Engine::create(model, c);
  if (!engine.ok()) {
    std::fprintf(stderr, "decode: %s\n", engine.status().to_string().c_str());
    return 1;
  }
  std::mt19937_64 rng(1);
  const auto timed = [&](int max_tokens) {  // a prompt of its own: no prefix shared
    return timed_request(**engine, random_prompt(rng, o.prompt_len, model->config().vocab_size), max_tokens);
  };
  const std::vector<double> warm_up = timed(2);
  const EngineStats before = (*engine)->stats();
  const std::vector<double> token_times = timed(o.output_len);
  if (warm_up.empty() || token_times.size() < 2) return 1;
  const double cold_ttft = warm_up.front(), ttft = token_times.front();
  const double tpot = (token_times.back() - token_times.front()) / static_cast<double>(token_times.size() - 1);
  const RunnerInfo& info = (*engine)->runner_info();
  EngineStats st = (*engine)->stats();  // the measured request's part
  st.num_steps -= before.num_steps;
  st.seconds_in_forward -= before.seconds_in_forward;
  st.seconds_in_sampling -= before.seconds_in_sampling;
  st.seconds_in_steps -= before.seconds_in_steps;
  const double weight_bytes = static_cast<double>(info.weight_bytes);
  const double roofline_tok_s = copy_bw > 0 ? copy_bw / weight_bytes : 0;
  char line[1024];
  std::snprintf(
      line, sizeof line,
      "{\"workload\":\"decode\",\"model\":\"%s\",\"device\":\"%s\",\"prompt_len\":%d,\"output_len\":%d,"
      "\"cuda_graphs\":%s,\"ttft_s\":%.5f,\"cold_ttft_s\":%.5f,\"tpot_ms\":%.4f,\"tok_s\":%.2f,\"weight_bytes\":%.0f,"
      "\"copy_bw_Bps\":%.4g,\"roofline_tok_s\":%.2f,\"fraction_of_roofline\":%.4f,"
      "\"steps\":%lld,\"forward_s\":%.4f,\"sampling_s\":%.4f,\"step_s\":%.4f,\"window_local_kv\":%s,"
      "\"kv_blocks\":%lld,\"kv_window_blocks\":%lld,\"kv_bytes\":%lld}",
      model->config().name.c_str(), info.device.c_str(), o.prompt_len, o.output_len, o.graphs ? "true" : "false", ttft,
      cold_ttft, tpot * 1e3, 1.0 / tpot, weight_bytes, copy_bw, roofline_tok_s,
      roofline_tok_s > 0 ? (1.0 / tpot) / roofline_tok_s : 0.0, static_cast<long long>(st.num_steps),
      st.seconds_in_forward, st.seconds_in_sampling, st.seconds_in_steps, o.window_local_kv ? "true" : "false",
      static_cast<long long>(info.num_blocks), static_cast<long long>(info.num_window_blocks),
      static_cast<long long>(info.kv_cache_bytes));
  emit(o, line);
  return 0;
}

int run_rollout(const Options& o, const std::shared_ptr<const DeviceModel>& model) {
  EngineConfig c;
  c.device = o.device;
  c.max_num_seqs = o.max_num_seqs;
  c.max_num_batched_tokens = o.max_num_batched_tokens;
  c.max_model_len = o.prompt_len + o.output_len + 16;
  c.cuda_graphs = o.graphs;
  c.gpu_memory_utilization = o.gpu_memory_utilization;
  c.speculative_config = o.speculative_config;
  c.window_local_kv = o.window_local_kv;
  auto engine = Engine::create(model, c);
  if (!engine.ok()) {
    std::fprintf(stderr, "rollout: %s\n", engine.status().to_string().c_str());
    return 1;
  }
  std::mt19937_64 rng(2);
  int64_t outputs = 0;
  int done = 0;
  const double t0 = now_s();
  for (int i = 0; i < o.requests; ++i) {
    RequestSpec spec;
    spec.prompt = random_prompt(rng, o.prompt_len, model->config().vocab_size);
    spec.max_tokens = o.output_len;
    spec.ignore_eos = true;
    spec.sampling.temperature = 1.0f;
    spec.sampling.seed = 1000 + static_cast<uint64_t>(i);
    if (!(*engine)
             ->add_request(spec,
                           [&](const RequestOutput& out) {
                             outputs += static_cast<int64_t>(out.new_tokens.size());
                             done += out.finished ? 1 : 0;
                           })
             .ok())
      return 1;
  }
  while ((*engine)->has_work()) (*engine)->step();
  const double wall = now_s() - t0;
  const EngineStats st = (*engine)->stats();
  char line[1024];
  std::snprintf(line, sizeof line,
                "{\"workload\":\"rollout\",\"model\":\"%s\",\"device\":\"%s\",\"requests\":%d,\"prompt_len\":%d,"
                "\"output_len\":%d,\"max_num_seqs\":%d,\"max_num_batched_tokens\":%d,\"cuda_graphs\":%s,"
                "\"wall_s\":%.3f,\"output_tokens\":%lld,\"output_tok_s\":%.1f,\"finished\":%d,\"steps\":%lld,"
                "\"preemptions\":%lld,\"forward_s\":%.3f,\"sampling_s\":%.3f,\"kv_blocks\":%lld,"
                "\"draft_tokens\":%lld,\"accepted_tokens\":%lld}",
                model->config().name.c_str(), (*engine)->runner_info().device.c_str(), o.requests, o.prompt_len,
                o.output_len, o.max_num_seqs, o.max_num_batched_tokens, o.graphs ? "true" : "false", wall,
                static_cast<long long>(outputs), static_cast<double>(outputs) / wall, done,
                static_cast<long long>(st.num_steps), static_cast<long long>(st.num_preemptions), st.seconds_in_forward,
                st.seconds_in_sampling, static_cast<long long>((*engine)->runner_info().num_blocks),
                static_cast<long long>(st.num_draft_tokens), static_cast<long long>(st.num_accepted_tokens));
  emit(o, line);
  return done == o.requests ? 0 : 1;
}

// One greedy request of `prompt` for output_len tokens in a fresh engine (after a 2-token warm-up
// request of another prompt, which also records the decode graph), with `drafter` when given.
struct SpecRun {
  std::vector<int32_t> tokens;
  double tpot = 0;
  EngineStats stats;
};

SpecRun decode_once(const Options& o, const std::shared_ptr<const DeviceModel>& model,
                    const std::vector<int32_t>& prompt, const std::vector<int32_t>& warm_prompt,
                    std::shared_ptr<const Drafter> drafter) {
  EngineConfig c = decode_config(o);
  c.speculative_config =
      drafter ? R"({"method": "ngram", "num_speculative_tokens": )" + std::to_string(o.num_speculative_tokens) + "}"
              : "";
  auto engine = Engine::create(model, c, nullptr, std::move(drafter));
  if (!engine.ok()) {
    std::fprintf(stderr, "speculative: %s\n", engine.status().to_string().c_str());
    return {};
  }
  SpecRun run;
  if (timed_request(**engine, warm_prompt, 2).empty()) return {};
  const std::vector<double> times = timed_request(**engine, prompt, o.output_len, &run.tokens);
  if (times.size() >= 2) run.tpot = (times.back() - times.front()) / static_cast<double>(times.size() - 1);
  run.stats = (*engine)->stats();
  return run;
}

int run_speculative(const Options& o, const std::shared_ptr<const DeviceModel>& model) {
  std::mt19937_64 rng(3);
  const int64_t vocab = model->config().vocab_size;
  const std::vector<int32_t> prompt = random_prompt(rng, o.prompt_len, vocab);
  const std::vector<int32_t> warm = random_prompt(rng, o.prompt_len, vocab);
  const SpecRun plain = decode_once(o, model, prompt, warm, nullptr);
  if (plain.tokens.size() < 2) return 1;
  std::vector<std::pair<std::vector<int32_t>, std::vector<int32_t>>> known = {{prompt, plain.tokens}};
  const auto v = static_cast<int32_t>(vocab);
  const SpecRun right = decode_once(o, model, prompt, warm, std::make_shared<ReplayDrafter>(known, false, v));
  const SpecRun wrong = decode_once(o, model, prompt, warm, std::make_shared<ReplayDrafter>(known, true, v));
  if (right.tpot <= 0 || wrong.tpot <= 0) return 1;
  const bool same = right.tokens == plain.tokens && wrong.tokens == plain.tokens;
  char line[1024];
  std::snprintf(line, sizeof line,
                "{\"workload\":\"speculative\",\"model\":\"%s\",\"device\":\"%s\",\"prompt_len\":%d,"
                "\"output_len\":%d,\"k\":%d,\"cuda_graphs\":%s,\"plain_tok_s\":%.2f,\"right_tok_s\":%.2f,"
                "\"wrong_tok_s\":%.2f,\"right_speedup\":%.3f,\"wrong_ratio\":%.4f,\"right_steps\":%lld,"
                "\"right_accepted\":%lld,\"right_drafted\":%lld,\"wrong_steps\":%lld,\"same_tokens\":%s}",
                model->config().name.c_str(), o.device.c_str(), o.prompt_len, o.output_len, o.num_speculative_tokens,
                o.graphs ? "true" : "false", 1.0 / plain.tpot, 1.0 / right.tpot, 1.0 / wrong.tpot,
                plain.tpot / right.tpot, plain.tpot / wrong.tpot, static_cast<long long>(right.stats.num_steps),
                static_cast<long long>(right.stats.num_accepted_tokens),
                static_cast<long long>(right.stats.num_draft_tokens), static_cast<long long>(wrong.stats.num_steps),
                same ? "true" : "false");
  emit(o, line);
  return same ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string k = argv[i];
    const auto next = [&]() -> std::string { return i + 1 < argc ? argv[++i] : ""; };
    if (k == "--model")
      o.model = next();
    else if (k == "--device")
      o.device = next();
    else if (k == "--workload")
      o.workload = next();
    else if (k == "--json")
      o.json = next();
    else if (k == "--prompt-len")
      o.prompt_len = std::stoi(next());
    else if (k == "--output-len")
      o.output_len = std::stoi(next());
    else if (k == "--requests")
      o.requests = std::stoi(next());
    else if (k == "--max-num-seqs")
      o.max_num_seqs = std::stoi(next());
    else if (k == "--max-num-batched-tokens")
      o.max_num_batched_tokens = std::stoi(next());
    else if (k == "--gpu-memory-utilization")
      o.gpu_memory_utilization = std::stod(next());
    else if (k == "--no-cuda-graphs")
      o.graphs = false;
    else if (k == "--window-local-kv")
      o.window_local_kv = true;
    else if (k == "--speculative-config")
      o.speculative_config = next();
    else if (k == "--num-speculative-tokens")
      o.num_speculative_tokens = std::stoi(next());
    else {
      std::fprintf(stderr, "unknown option %s (see the header of bench/engine_decode_bench.cc)\n", k.c_str());
      return 2;
    }
  }
  if (o.model.empty()) {
    std::fprintf(stderr, "give --model\n");
    return 2;
  }
  const double t_load = now_s();
  auto model = load_device_model(o.model, o.device);
  if (!model.ok()) {
    std::fprintf(stderr, "%s\n", model.status().to_string().c_str());
    return 1;
  }
  std::printf("loaded %s for %s in %.2f s\n", o.model.c_str(), o.device.c_str(), now_s() - t_load);
  const double copy_bw = o.device == "cuda" ? copy_bandwidth() : 0.0;
  if (copy_bw > 0) std::printf("device-to-device copy: %.3f TB/s (read + write)\n", copy_bw / 1e12);
  int rc = 0;
  if (o.workload == "decode" || o.workload == "both") rc |= run_decode(o, *model, copy_bw);
  if (o.workload == "rollout" || o.workload == "both") rc |= run_rollout(o, *model);
  if (o.workload == "speculative") rc |= run_speculative(o, *model);
  return rc;
}
