#include "tools/cmd_verify_paper.h"

#include <chrono>
#include <cstdio>
#include <fstream>

#include "model/model_config.h"
#include "runner/device_model.h"
#include "runner/load_device_model.h"
#include "tokenizer/tokenizer.h"
#include "tools/bench/build_info.h"
#include "tools/verify/engine_backend.h"
#include "tools/verify/paper_runner.h"

namespace vosti::tools {
namespace {

// Each progress line carries the seconds since the command began, so a slow arm shows itself.
void say(const std::string& line) {
  static const auto start = std::chrono::steady_clock::now();
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("[%7.1f s] %s\n", s, line.c_str());
  std::fflush(stdout);
}

void print_plan(const PaperPlan& plan) {
  std::string counts;
  int64_t total = 0;
  for (Relation r : kRelations) {
    counts += (counts.empty() ? "" : ", ") + std::to_string(plan.expected(r)) + " " + relation_name(r);
    total += plan.expected(r);
  }
  say("plan: " + std::to_string(total) + " comparisons (" + counts + "); context " + std::to_string(plan.context) +
      " tokens, " + std::to_string(plan.cuts.size()) + " prompt lengths cut to fit; about " +
      std::to_string(plan.num_prompt_tokens()) + " prompt tokens to compute");
}

// The KV blocks the largest call needs (a composition of 8 prompts at the longest length), and a margin.
int64_t blocks_for_plan(const PaperPlan& plan, int32_t block_size) {
  return 8 * ((plan.longest_sequence() + block_size - 1) / block_size) + 16;
}

Result<std::vector<ProtocolReport>> run_in_process(const PaperCommand& c, const std::string& path) {
  VOSTI_ASSIGN_OR_RETURN(const std::vector<Relation> relations, parse_relations(c.relations));
  VOSTI_ASSIGN_OR_RETURN(std::shared_ptr<const DeviceModel> model, load_device_model(path, c.deployment.device));
  const ModelConfig& mc = model->config();
  auto tokenizer = Tokenizer::load_for_model(path);  // optional: the special ids, when the model has one
  const TokenDomain domain = token_domain(mc, tokenizer.ok() ? tokenizer->get() : nullptr);
  const int32_t context = c.max_context > 0 ? c.max_context : static_cast<int32_t>(mc.max_position_embeddings);
  VOSTI_ASSIGN_OR_RETURN(
      PaperPlan plan, make_paper_plan(paper_protocol_spec(), domain, static_cast<int32_t>(mc.sliding_window), context));
  say("model " + mc.name + " on " + c.deployment.device);
  print_plan(plan);
  std::vector<std::pair<std::string, bool>> modes = {{"cpu", false}};
  if (c.deployment.device == "cuda") {
    modes.clear();
    if (c.cuda_graphs != "off") modes.push_back({"cuda graphs on (padded)", true});
    if (c.cuda_graphs != "on") modes.push_back({"cuda graphs off", false});
  }
  std::vector<ProtocolReport> reports;
  for (const auto& [mode, graphs] : modes) {
    EngineConfig d = c.deployment;
    d.cuda_graphs = graphs;
    d.max_model_len = plan.longest_sequence();
    if (d.device == "cpu") d.num_blocks = blocks_for_plan(plan, d.block_size);
    d.check_invariants = true;
    d.check_device_sampler = d.device == "cuda";
    say("mode " + mode);
    EngineBackend backend(model, d);
    ProtocolReport report = run_paper_protocol(plan, backend, say, relations);
    report.model = mc.name;
    report.mode = mode;
    reports.push_back(std::move(report));
  }
  return reports;
}

Result<std::vector<ProtocolReport>> run_remote(const PaperCommand& c) {
  VOSTI_ASSIGN_OR_RETURN(const std::vector<Relation> relations, parse_relations(c.relations));
  VOSTI_ASSIGN_OR_RETURN(std::unique_ptr<HttpBackend> backend, HttpBackend::connect(c.http));
  const int32_t context = c.max_context > 0 ? c.max_context : backend->context();
  if (context <= 0) return invalid_argument("the server does not say its context length: give --max-context N");
  VOSTI_ASSIGN_OR_RETURN(PaperPlan plan,
                         make_paper_plan(paper_protocol_spec(), backend->domain(), backend->window(), context));
  say("server " + backend->description());
  print_plan(plan);
  ProtocolReport report = run_paper_protocol(plan, *backend, say, relations);
  report.model = backend->model();
  report.mode = "remote";
  return std::vector<ProtocolReport>{std::move(report)};
}

}  // namespace

int run_paper_command(const PaperCommand& c) {
  std::vector<ProtocolReport> reports;
  if (!c.http.base_url.empty()) {
    auto r = run_remote(c);
    if (!r.ok()) {
      std::fprintf(stderr, "vosti verify: %s\n", r.status().to_string().c_str());
      return r.status().code() == StatusCode::kInvalidArgument ? 2 : 1;
    }
    reports = std::move(r).value();
  } else {
    for (const std::string& path : c.models) {
      auto r = run_in_process(c, path);
      if (!r.ok()) {
        std::fprintf(stderr, "vosti verify: %s\n", r.status().to_string().c_str());
        return r.status().code() == StatusCode::kInvalidArgument ? 2 : 1;
      }
      for (auto& rep : *r) reports.push_back(std::move(rep));
    }
  }
  std::printf("\n%s", format_protocol_table(reports).c_str());
  bool ok = true;
  for (const ProtocolReport& r : reports) ok = ok && r.passed();
  if (!c.json_path.empty()) {
    nlohmann::ordered_json doc = protocol_json(reports);
    doc["commit"] = bench::build_commit();
    doc["command"] = c.command_line;
    std::ofstream out(c.json_path);
    out << doc.dump(1) << "\n";
    if (!out) {
      std::fprintf(stderr, "vosti verify: cannot write %s\n", c.json_path.c_str());
      return 1;
    }
    std::printf("wrote %s\n", c.json_path.c_str());
  }
  std::printf("\n%s\n", ok ? "verify: the paper protocol passed: every compared row is identical"
                           : "verify: FAILED: the paper protocol found differences or could not test a relation");
  return ok ? 0 : 1;
}

}  // namespace vosti::tools
