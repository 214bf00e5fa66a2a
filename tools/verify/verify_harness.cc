#include "tools/verify/verify_harness.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <map>
#include <random>

#include "engine/speculative.h"
#include "tokenizer/tokenizer.h"
#include "runner/device_model.h"

namespace vosti {

namespace {

// What one request produced in one run.
struct RequestRecord {
  std::vector<int32_t> tokens;
  std::vector<float> logprobs;
  std::vector<std::vector<float>> logits;  // [num_outputs][vocab]
  FinishReason finish = FinishReason::kNone;
  std::string error;
  std::vector<int32_t> routed;  // RequestSpec::routed_experts: [positions, MoE layers, top_k]
};

struct RunRecord {
  std::vector<RequestRecord> requests;  // [num_requests], in the harness's order
  EngineStats stats;
};

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Drives one engine through the request set under `v`; records every output.
Result<RunRecord> run_once(std::shared_ptr<const DeviceModel> model, const std::vector<HarnessRequest>& requests,
                           const Variation& v, uint64_t seed, const std::shared_ptr<const Tokenizer>& tokenizer,
                           const EngineHooks& hooks) {
  VOSTI_ASSIGN_OR_RETURN(std::unique_ptr<Engine> engine, Engine::create(model, v.config, tokenizer, nullptr, hooks));
  const size_t n = requests.size();
  std::vector<size_t> order(n);
  for (size_t i = 0; i < n; ++i) order[i] = i;
  std::mt19937_64 rng(seed);
  if (v.order == Variation::Order::kReverse) std::reverse(order.begin(), order.end());
  if (v.order == Variation::Order::kShuffled) std::shuffle(order.begin(), order.end(), rng);

  const int passes = v.warm_prefix_cache ? 2 : 1;
  RunRecord run;
  for (int pass = 0; pass < passes; ++pass) {
    run.requests.assign(n, RequestRecord{});
    size_t num_done = 0;
    std::vector<RequestId> neighbours;
    int64_t step = 0;
    size_t next = 0;  // index into order of the next arrival
    const int64_t vocab = model->config().vocab_size;
    auto add = [&](size_t idx) -> Status {
      RequestSpec spec = requests[idx].spec;
      spec.return_logits = true;
      auto id = engine->add_request(std::move(spec), [&run, &num_done, idx](const RequestOutput& out) {
        RequestRecord& rec = run.requests[idx];
        for (size_t k = 0; k < out.new_tokens.size(); ++k) {
          rec.tokens.push_back(out.new_tokens[k]);
          rec.logprobs.push_back(out.new_logprobs[k].logprob);
          rec.logits.push_back(out.new_logits[k]);
        }
        if (out.finished) {
          rec.finish = out.finish_reason;
          rec.error = out.error;
          rec.routed = out.routed_experts.ids;
          ++num_done;
        }
      });
      return id.ok() ? Status() : id.status();
    };
    while (num_done < n) {
      while (next < n && (v.stagger_steps == 0 || step >= static_cast<int64_t>(next) * v.stagger_steps)) {
        VOSTI_RETURN_IF_ERROR(add(order[next]));
        ++next;
      }
      // Neighbours: random prompts that arrive early and are aborted a few steps later.
      if (static_cast<int32_t>(neighbours.size()) < v.num_aborted_neighbours && step % 3 == 0) {
        RequestSpec spec;
        const int64_t len = 8 + static_cast<int64_t>(rng() % 40);
        for (int64_t i = 0; i < len; ++i)
          spec.prompt.push_back(static_cast<int32_t>(rng() % static_cast<uint64_t>(vocab)));
        spec.max_tokens = 64;
        spec.sampling.temperature = 1.0f;
        spec.sampling.seed = rng();
        auto id = engine->add_request(std::move(spec), nullptr);
        if (id.ok()) neighbours.push_back(*id);
      }
      if (step % 4 == 3)
        for (RequestId id : neighbours) engine->abort(id);
      if (!engine->step() && next >= n && num_done < n) {
        if (!engine->has_work()) return internal_error("engine idle with unfinished requests in variation " + v.name);
      }
      ++step;
      if (step > 1000000) return internal_error("variation " + v.name + " did not finish");
    }
    for (RequestId id : neighbours) engine->abort(id);
    while (engine->has_work()) engine->step();
  }
  run.stats = engine->stats();
  return run;
}

// The first difference between a run and the reference, or "" if identical.
std::string compare(const RunRecord& ref, const RunRecord& run, int64_t* num_positions) {
  for (size_t r = 0; r < ref.requests.size(); ++r) {
    const RequestRecord& a = ref.requests[r];
    const RequestRecord& b = run.requests[r];
    if (!b.error.empty()) return "request " + std::to_string(r) + ": error: " + b.error;
    const size_t n = std::min(a.tokens.size(), b.tokens.size());
    for (size_t p = 0; p < n; ++p) {
      ++*num_positions;
      if (a.logits[p].size() != b.logits[p].size() ||
          std::memcmp(a.logits[p].data(), b.logits[p].data(), a.logits[p].size() * sizeof(float)) != 0)
        return "request " + std::to_string(r) + ", position " + std::to_string(p) + ": logits differ";
      if (a.tokens[p] != b.tokens[p])
        return "request " + std::to_string(r) + ", position " + std::to_string(p) + ": token differs";
      if (std::memcmp(&a.logprobs[p], &b.logprobs[p], sizeof(float)) != 0)
        return "request " + std::to_string(r) + ", position " + std::to_string(p) + ": logprob differs";
    }
    if (a.tokens.size() != b.tokens.size() || a.finish != b.finish)
      return "request " + std::to_string(r) + ": " + std::to_string(b.tokens.size()) + " outputs (" +
             finish_reason_name(b.finish) + ") vs " + std::to_string(a.tokens.size()) + " (" +
             finish_reason_name(a.finish) + ")";
    if (a.routed != b.routed) {
      const auto d = std::mismatch(a.routed.begin(), a.routed.end(), b.routed.begin(), b.routed.end());
      return "request " + std::to_string(r) + ": routed experts differ at entry " +
             std::to_string(d.first - a.routed.begin()) + " of " + std::to_string(a.routed.size());
    }
  }
  return "";
}

}  // namespace

std::vector<HarnessRequest> make_harness_requests(const ModelConfig& model, bool full, uint64_t seed) {
  const int64_t vocab = model.vocab_size;
  std::mt19937_64 rng(seed);
  auto random_tokens = [&](int64_t n) {
    std::vector<int32_t> t(static_cast<size_t>(n));
    for (auto& x : t) x = static_cast<int32_t>(rng() % static_cast<uint64_t>(vocab));
    return t;
  };
  const std::vector<int32_t> shared = random_tokens(full ? 96 : 40);  // a prefix several prompts share
  std::vector<std::vector<int32_t>> prompts = {random_tokens(5), random_tokens(full ? 120 : 23), shared,
                                               random_tokens(1)};
  for (int64_t extra : {7, 19}) {  // shared prefix + distinct tails (prefix-cache hits, partial blocks)
    auto p = shared;
    auto tail = random_tokens(extra);
    p.insert(p.end(), tail.begin(), tail.end());
    prompts.push_back(p);
  }
  if (full)
    for (int64_t len : {33, 64, 200, 17}) prompts.push_back(random_tokens(len));
  std::vector<HarnessRequest> out;
  for (size_t i = 0; i < prompts.size(); ++i) {
    HarnessRequest r;
    r.spec.prompt = prompts[i];
    r.spec.max_tokens = static_cast<int32_t>((full ? 48 : 24) + (i % 3) * 4);
    r.spec.ignore_eos = true;
    if (i % 2 == 1) {
      r.spec.sampling.temperature = 0.9f;
      r.spec.sampling.top_p = 0.95f;
      r.spec.sampling.top_k = 50;
      r.spec.sampling.seed = 1000 + i;
    } else {
      r.spec.sampling.temperature = 0.0f;
      r.spec.sampling.seed = 0;
    }
    r.spec.sampling.num_top_logprobs = 2;
    // Every third request of an MoE model also records its routing (it skips the prefix cache).
    r.spec.routed_experts = model.has_moe() && i % 3 == 1;
    out.push_back(std::move(r));
  }
  return out;
}

void add_structured_requests(std::vector<HarnessRequest>& requests) {
  const StructuredOutputs constraints[] = {
      {StructuredKind::kJsonSchema,
       R"({"type":"object","properties":{"n":{"type":"integer"},"tags":{"type":"array","items":{"enum":["a","b"]},)"
       R"("maxItems":3}},"required":["n","tags"]})",
       {}},
      {StructuredKind::kRegex, "[a-z]{1,8}( [a-z]{1,8}){0,5}", {}},
      {StructuredKind::kChoice, "", {"red", "green", "blue"}},
  };
  const size_t n = requests.size();
  for (size_t i = 0; i < std::size(constraints); ++i) {
    for (const bool sampled : {false, true}) {
      HarnessRequest r = requests[(2 * i + (sampled ? 1 : 0)) % n];
      r.spec.structured = constraints[i];
      r.spec.routed_experts = false;
      if (sampled) {
        r.spec.sampling.temperature = 1.0f;
        r.spec.sampling.seed = 2000 + i;
      }
      requests.push_back(std::move(r));
    }
  }
}

std::vector<Variation> make_variations(const EngineConfig& ref, bool full) {
  std::vector<Variation> v;
  auto add = [&](std::string name, auto&& tweak) {
    Variation x;
    x.name = std::move(name);
    x.config = ref;
    tweak(x);
    v.push_back(std::move(x));
  };
  const std::vector<int32_t> seqs = {1, 2, 7, 64, 256};
  for (int32_t s : seqs)
    add("max_num_seqs=" + std::to_string(s), [&](Variation& x) {
      x.config.max_num_seqs = s;
      x.config.max_num_batched_tokens = 512;
    });
  for (int32_t b : {3, 16, 61, 512})
    add("token_budget=" + std::to_string(b), [&](Variation& x) {
      x.config.max_num_seqs = 64;
      x.config.max_num_batched_tokens = b;
    });
  add("prefix_cache=cold", [&](Variation& x) {
    x.config.enable_prefix_caching = true;
    x.config.max_num_batched_tokens = 16;
  });
  add("prefix_cache=warm", [&](Variation& x) {
    x.config.enable_prefix_caching = true;
    x.config.max_num_batched_tokens = 61;
    x.warm_prefix_cache = true;
  });
  // The least cache that fits one request: admitted requests outgrow it, so running ones
  // are preempted (and recomputed, partly from the prefix cache) again and again.
  for (int32_t budget : {7, 512})
    add("tiny_cache,budget=" + std::to_string(budget), [&](Variation& x) {
      x.config.enable_prefix_caching = true;
      x.config.max_num_batched_tokens = budget;
      x.config.num_blocks = (ref.max_model_len + ref.block_size - 1) / ref.block_size;
    });
  add("shuffled_blocks", [&](Variation& x) {
    x.config.block_shuffle_seed = 0x5eed;
    x.config.max_num_batched_tokens = 61;
  });
  add("reverse_arrival", [&](Variation& x) {
    x.order = Variation::Order::kReverse;
    x.config.max_num_batched_tokens = 61;
  });
  add("shuffled+staggered_arrival", [&](Variation& x) {
    x.order = Variation::Order::kShuffled;
    x.stagger_steps = 3;
    x.config.max_num_batched_tokens = 16;
  });
  add("aborted_neighbours", [&](Variation& x) {
    x.num_aborted_neighbours = 4;
    x.config.max_num_batched_tokens = 61;
  });
  // The structured-output grammar pool (EngineImpl::prepare_grammars): a step's grammars advance on
  // three threads from two of them on, so the set's few constrained requests go through it
  // (the product's threshold, 16, is never reached by them). No effect without constrained requests.
  add("grammar_pool", [&](Variation& x) {
    x.config.structured_output_threads = 3;
    x.config.structured_output_pool_threshold = 2;
    x.config.max_num_batched_tokens = 61;
  });
  // Speculative decoding: n-gram drafts of k tokens verified in the step (every device).
  for (int32_t k : {1, 3, 8})
    v.push_back(speculative_variation(ref, R"({"method": "ngram", "num_speculative_tokens": )" + std::to_string(k) +
                                               R"(, "prompt_lookup_min": 1, "prompt_lookup_max": 3})"));
  // Window-local KV (docs/SPEC.md section 4): the sliding-window layers' blocks in a pool of their
  // own, released as the window passes them; with hits, and in a pool so small that released
  // blocks are handed out again at once. No effect on a model without sliding-window layers.
  add("window_kv,warm", [&](Variation& x) {
    x.config.window_local_kv = true;
    x.config.max_num_batched_tokens = 61;
    x.warm_prefix_cache = true;
  });
  for (int32_t budget : {7, 512})
    add("window_kv,tiny_cache,budget=" + std::to_string(budget), [&](Variation& x) {
      x.config.window_local_kv = true;
      x.config.max_num_batched_tokens = budget;
      x.config.num_blocks = (ref.max_model_len + ref.block_size - 1) / ref.block_size;
    });
  // Both at once: a verify chunk claims window blocks for draft positions, a rejected draft rolls
  // the window tables back too, and a window block goes only once the positions that push it out
  // of the window are verified; with hits, and in the tiny pool.
  for (const auto& [k, rest] : {std::pair<int32_t, const char*>{3, ",warm"}, {8, ",tiny_cache,budget=16"}}) {
    Variation x = speculative_variation(ref, R"({"method": "ngram", "num_speculative_tokens": )" + std::to_string(k) +
                                                 R"(, "prompt_lookup_min": 1, "prompt_lookup_max": 3})");
    x.name = "window_kv,ngram,k=" + std::to_string(k) + rest;
    x.config.window_local_kv = true;
    if (k == 3) {
      x.warm_prefix_cache = true;
    } else {
      x.config.max_num_batched_tokens = 16;
      x.config.num_blocks = (ref.max_model_len + ref.block_size - 1) / ref.block_size;
    }
    v.push_back(std::move(x));
  }
  if (ref.device == "cpu") {
    for (int32_t t : {1, 3})
      add("threads=" + std::to_string(t), [&](Variation& x) {
        x.config.num_threads = t;
        x.config.max_num_batched_tokens = 61;
      });
  } else {
    add("cuda_graphs=off", [&](Variation& x) {
      x.config.cuda_graphs = false;
      x.config.max_num_batched_tokens = 61;
    });
  }
  return v;
}

Variation speculative_variation(const EngineConfig& ref, const std::string& speculative_config) {
  Variation x;
  x.config = ref;
  x.config.speculative_config = speculative_config;
  x.config.max_num_batched_tokens = 61;
  x.name = "speculative=" + speculative_config;
  auto parsed = parse_speculative_config(speculative_config);
  if (parsed.ok() && parsed->method == "draft_model")
    x.name = "draft_model,k=" + std::to_string(parsed->num_speculative_tokens);
  if (parsed.ok() && parsed->method == "ngram")
    x.name = "ngram,k=" + std::to_string(parsed->num_speculative_tokens) +
             ",n=" + std::to_string(parsed->prompt_lookup_min) + ".." + std::to_string(parsed->prompt_lookup_max);
  return x;
}

bool HarnessReport::all_identical() const {
  return std::all_of(results.begin(), results.end(), [](const VariationResult& r) { return r.identical; });
}

Result<HarnessReport> run_determinism_harness(std::shared_ptr<const DeviceModel> model,
                                              const std::vector<HarnessRequest>& requests,
                                              const EngineConfig& reference_config,
                                              const std::vector<Variation>& variations,
                                              const std::function<void(const VariationResult&)>& on_result,
                                              std::shared_ptr<const Tokenizer> tokenizer, const EngineHooks& hooks) {
  HarnessReport report;
  report.model_name = model->config().name;
  Variation ref;
  ref.name = "reference";
  ref.config = reference_config;
  ref.config.max_num_seqs = 1;
  ref.config.max_num_batched_tokens = 1;
  ref.config.enable_prefix_caching = false;
  auto t0 = std::chrono::steady_clock::now();
  VOSTI_ASSIGN_OR_RETURN(RunRecord reference, run_once(model, requests, ref, 1, tokenizer, hooks));
  report.reference_seconds = seconds_since(t0);
  for (size_t r = 0; r < reference.requests.size(); ++r)
    if (!reference.requests[r].error.empty())
      return internal_error("reference run: request " + std::to_string(r) + ": " + reference.requests[r].error);
  for (size_t i = 0; i < variations.size(); ++i) {
    VariationResult res;
    res.name = variations[i].name;
    t0 = std::chrono::steady_clock::now();
    auto run = run_once(model, requests, variations[i], 100 + i, tokenizer, hooks);
    res.seconds = seconds_since(t0);
    if (!run.ok()) {
      res.first_difference = run.status().to_string();
    } else {
      res.first_difference = compare(reference, *run, &res.num_positions);
      res.identical = res.first_difference.empty();
      res.num_preemptions = run->stats.num_preemptions;
      res.num_prefix_hit_tokens = run->stats.num_prefix_hits;
      res.num_draft_tokens = run->stats.num_draft_tokens;
      res.num_accepted_tokens = run->stats.num_accepted_tokens;
    }
    if (on_result) on_result(res);
    report.results.push_back(std::move(res));
  }
  return report;
}

std::string format_report_table(const std::vector<HarnessReport>& reports) {
  std::string out;
  char line[512];
  std::snprintf(line, sizeof line, "%-28s %-26s %-10s %9s %8s %8s %11s %7s\n", "variation", "model", "result",
                "positions", "preempt", "hits", "accepted", "secs");
  out += line;
  for (const auto& rep : reports) {
    for (const auto& r : rep.results) {
      // Speculation: accepted / drafted tokens ("-" where nothing was drafted).
      const std::string accepted =
          r.num_draft_tokens > 0 ? std::to_string(r.num_accepted_tokens) + "/" + std::to_string(r.num_draft_tokens)
                                 : "-";
      std::snprintf(line, sizeof line, "%-28s %-26s %-10s %9lld %8lld %8lld %11s %7.1f%s%s\n", r.name.c_str(),
                    rep.model_name.substr(0, 26).c_str(), r.identical ? "identical" : "DIFFERS",
                    static_cast<long long>(r.num_positions), static_cast<long long>(r.num_preemptions),
                    static_cast<long long>(r.num_prefix_hit_tokens), accepted.c_str(), r.seconds,
                    r.identical ? "" : "  ", r.first_difference.c_str());
      out += line;
    }
  }
  return out;
}

}  // namespace vosti
