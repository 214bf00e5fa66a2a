// vosti generate: text in, text out, streamed as it is produced.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <fstream>
#include <sstream>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <iterator>
#include <nlohmann/json.hpp>

#include "engine/engine.h"
#include "model/model.h"
#include "runner/load_device_model.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"
#include "tools/commands.h"
#include "tools/engine_options.h"

namespace vosti::tools {

namespace {

struct GenerateOptions {
  std::string model;
  std::string prompt;
  std::string system;
  std::vector<int32_t> prompt_ids;
  bool chat = false;
  std::string chat_template_file;  // a Jinja file used instead of the model's own template
  bool json = false;
  bool enable_thinking = false;
  EngineConfig engine;
  RequestSpec spec;
  double temperature = 0.7;
  uint64_t seed = 0;
  bool has_seed = false;
};

// A progress bar on stderr while the model loads (terminals only), advanced per layer.
class LoadProgress {
 public:
  explicit LoadProgress(const std::string& what) : active_(isatty(STDERR_FILENO)), what_(what) {
    t0_ = std::chrono::steady_clock::now();
  }
  void update(int64_t done, int64_t total) const {
    if (!active_ || total <= 0) return;
    constexpr int kWidth = 30;
    const int filled = static_cast<int>(kWidth * done / total);
    std::fprintf(stderr, "\rloading %s [%.*s%*s] %lld/%lld layers", what_.c_str(), filled,
                 "##############################", kWidth - filled, "", static_cast<long long>(done),
                 static_cast<long long>(total));
  }
  void done() const {
    if (!active_) return;
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
    std::fprintf(stderr, "\r\033[Kloaded %s in %.2f s\n", what_.c_str(), s);
  }

 private:
  bool active_;
  std::string what_;
  std::chrono::steady_clock::time_point t0_;
};

Result<std::vector<int32_t>> build_prompt(const GenerateOptions& o, const Tokenizer& tok) {
  if (!o.prompt_ids.empty()) return o.prompt_ids;
  if (!o.chat) return tok.encode(o.prompt, /*add_special_tokens=*/true);
  std::string source;
  if (!o.chat_template_file.empty()) {
    std::ifstream in(o.chat_template_file);
    if (!in) return not_found("--chat-template: cannot read " + o.chat_template_file);
    std::stringstream text;
    text << in.rdbuf();
    source = text.str();
  } else if (tok.chat_template()) {
    source = *tok.chat_template();
  } else {
    return invalid_argument("--chat: this model has no chat template (give one with --chat-template FILE)");
  }
  std::vector<ChatMessage> messages;
  if (!o.system.empty()) messages.push_back({"system", o.system});
  messages.push_back({"user", o.prompt});
  ChatOptions chat;
  chat.add_generation_prompt = true;
  if (o.enable_thinking) chat.enable_thinking = true;  // otherwise the template's own default
  chat.bos_token = tok.bos_token();
  chat.eos_token = tok.eos_token();
  VOSTI_ASSIGN_OR_RETURN(std::string text, render_chat(source, messages, chat));
  // The template already holds BOS where the model wants it.
  return tok.encode(text, /*add_special_tokens=*/false);
}

// The model's tokenizer; null for a model without one run on --prompt-ids alone (ids in and out,
// no text: vLLM's skip_tokenizer_init), which says so on stderr.
Result<std::shared_ptr<const Tokenizer>> load_tokenizer(const GenerateOptions& o) {
  auto loaded = Tokenizer::load_for_model(o.model);
  if (loaded.ok() || o.prompt_ids.empty() || o.chat || !o.spec.stop.empty()) return loaded;
  std::fprintf(stderr, "\nvosti generate: no tokenizer (%s): token ids only\n", loaded.status().message().c_str());
  return std::shared_ptr<const Tokenizer>();
}

// The model on o.engine.device; on the cpu with a per-layer progress bar.
Result<std::shared_ptr<const DeviceModel>> load_model(const GenerateOptions& o, const LoadProgress& progress) {
  if (o.engine.device != "cpu") return load_device_model(o.model, o.engine.device);
  LoadOptions load_options;
  load_options.on_progress = [&progress](int64_t done, int64_t total) { progress.update(done, total); };
  VOSTI_ASSIGN_OR_RETURN(std::shared_ptr<const Model> cpu, Model::load(o.model, load_options));
  return cpu_device_model(cpu);
}

// [position][MoE layer][k] expert ids (the server's "routed_experts").
nlohmann::json routed_json(const RoutedExperts& r) {
  nlohmann::json out = nlohmann::json::array();
  const int64_t positions = r.num_positions();
  for (int64_t p = 0; p < positions; ++p) {
    nlohmann::json layers = nlohmann::json::array();
    for (int32_t l = 0; l < r.num_layers; ++l) {
      const auto first = r.ids.begin() + (p * r.num_layers + l) * r.top_k;
      layers.push_back(std::vector<int32_t>(first, first + r.top_k));
    }
    out.push_back(std::move(layers));
  }
  return out;
}

// Runs o.spec on `engine`, streaming text to stdout (or one JSON object at the end with --json);
// returns the exit code. `tok` may be null (ids only: empty token strings and text).
int run_generation(const GenerateOptions& o, Engine& engine, const Tokenizer* tok) {
  nlohmann::json result = {
      {"tokens", nlohmann::json::array()}, {"ids", nlohmann::json::array()}, {"logprobs", nlohmann::json::array()}};
  std::string text;
  bool done = false;
  auto t0 = std::chrono::steady_clock::now();
  auto id = engine.add_request(o.spec, [&](const RequestOutput& out) {
    for (size_t i = 0; i < out.new_tokens.size(); ++i) {
      result["ids"].push_back(out.new_tokens[i]);
      result["tokens"].push_back(tok ? tok->decode_lenient(std::vector<int32_t>{out.new_tokens[i]}, false) : "");
      result["logprobs"].push_back(out.new_logprobs[i].logprob);
    }
    text += out.new_text;
    if (!o.json) {
      std::fwrite(out.new_text.data(), 1, out.new_text.size(), stdout);
      std::fflush(stdout);
    }
    if (out.finished) {
      done = true;
      result["seed"] = out.seed;
      result["finish_reason"] = finish_reason_name(out.finish_reason);
      result["usage"] = {{"prompt_tokens", out.num_prompt_tokens}, {"completion_tokens", out.num_output_tokens}};
      if (!out.error.empty()) result["error"] = out.error;
      if (o.spec.routed_experts) result["routed_experts"] = routed_json(out.routed_experts);
    }
  });
  if (!id.ok()) {
    std::fprintf(stderr, "vosti generate: %s\n", id.status().to_string().c_str());
    return 1;
  }
  while (!done) engine.step();
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const EngineStats stats = engine.stats();
  if (stats.num_draft_tokens > 0)
    result["speculation"] = {{"draft_tokens", stats.num_draft_tokens}, {"accepted_tokens", stats.num_accepted_tokens}};
  if (o.json) {
    result["text"] = text;
    std::printf("%s\n", result.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
  } else {
    std::printf("\n");
    const auto n = result["ids"].size();
    std::fprintf(stderr, "[%zu tokens in %.2f s, %.1f tok/s, seed %llu, finish: %s]\n", n, secs,
                 static_cast<double>(n) / secs, static_cast<unsigned long long>(result["seed"].get<uint64_t>()),
                 result["finish_reason"].get<std::string>().c_str());
    if (stats.num_draft_tokens > 0)
      std::fprintf(stderr, "[speculation: %lld of %lld draft tokens accepted]\n",
                   static_cast<long long>(stats.num_accepted_tokens), static_cast<long long>(stats.num_draft_tokens));
  }
  return 0;
}

}  // namespace

int cmd_generate(int argc, char** argv) {
  GenerateOptions o;
  o.spec.max_tokens = 128;
  std::vector<std::string> stop;
  CLI::App app{"Generates text from a prompt; tokens stream to stdout as they are produced.", "vosti generate"};
  app.add_option("--model,-m", o.model, "GGUF file or HF directory (default: the default model)");
  app.add_option("--prompt,-p", o.prompt, "the prompt (default: read stdin)");
  app.add_option("--prompt-ids", o.prompt_ids, "the prompt as token ids instead of text");
  app.add_flag("--chat", o.chat, "apply the model's chat template to the prompt (a user message)");
  app.add_option("--system", o.system, "a system message (with --chat)");
  app.add_option("--chat-template", o.chat_template_file,
                 "with --chat: a Jinja chat template file to use instead of the model's (a GGUF without one)");
  app.add_flag("--enable-thinking", o.enable_thinking, "chat templates with a thinking switch (Qwen3): enable it");
  app.add_option("--max-tokens,-n", o.spec.max_tokens, "output tokens at most")->check(CLI::NonNegativeNumber);
  app.add_option("--temperature,-t", o.temperature, "0 = greedy");
  app.add_option("--top-k", o.spec.sampling.top_k, "keep the k most likely tokens (0 = off)");
  app.add_option("--top-p", o.spec.sampling.top_p, "nucleus sampling mass (1 = off)");
  app.add_option("--min-p", o.spec.sampling.min_p, "drop tokens below min_p x the top probability");
  app.add_option("--repetition-penalty", o.spec.sampling.repetition_penalty, "HF-style repetition penalty");
  auto* seed_opt = app.add_option("--seed", o.seed, "sampling seed (default: a fresh one, reported)");
  app.add_option("--stop", stop, "stop string (repeatable)");
  app.add_flag("--ignore-eos", o.spec.ignore_eos, "keep generating past end-of-sequence tokens");
  app.add_flag("--json", o.json, "print one JSON object: text, tokens, ids, logprobs, seed, finish reason");
  app.add_flag("--return-routed-experts", o.spec.routed_experts,
               "with --json, MoE models: routed_experts, the experts each computed position chose per MoE layer");
  std::string json_schema_file, regex, grammar_file;
  std::vector<std::string> choices;
  auto* constraint = app.add_option_group("structured outputs", "the output must match one of these (--device cpu)");
  constraint->add_option("--json-schema", json_schema_file, "a JSON schema file: the output is JSON valid under it");
  constraint->add_option("--regex", regex, "a regular expression the whole output matches");
  constraint->add_option("--choice", choices, "an allowed output (repeatable): the output is one of them");
  constraint->add_option("--grammar", grammar_file, "an EBNF grammar file (xgrammar's GBNF, root rule `root`)");
  constraint->require_option(0, 1);
  // One request at a time: generate's own default (serve's is 64).
  o.engine.max_num_seqs = 1;
  add_engine_options(app, o.engine);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;  // commands.h: 2 for a usage error (CLI11's own codes vary)
  }
  if (o.spec.routed_experts && !o.json) {
    std::fprintf(stderr, "vosti generate: --return-routed-experts needs --json (the experts go in its object)\n");
    return 2;
  }
  if (!json_schema_file.empty() || !grammar_file.empty()) {
    const std::string& path = json_schema_file.empty() ? grammar_file : json_schema_file;
    std::ifstream in(path, std::ios::binary);
    if (!in) {
      std::fprintf(stderr, "vosti generate: cannot read %s\n", path.c_str());
      return 2;
    }
    StructuredOutputs so;
    so.kind = json_schema_file.empty() ? StructuredKind::kGrammar : StructuredKind::kJsonSchema;
    so.text.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    o.spec.structured = std::move(so);
  } else if (!regex.empty()) {
    o.spec.structured = StructuredOutputs{StructuredKind::kRegex, regex, {}};
  } else if (!choices.empty()) {
    o.spec.structured = StructuredOutputs{StructuredKind::kChoice, "", choices};
  }
  if (o.model.empty()) o.model = default_model_path();
  o.spec.sampling.temperature = static_cast<float>(o.temperature);
  if (seed_opt->count()) o.spec.sampling.seed = o.seed;
  o.spec.stop = stop;
  if (o.prompt.empty() && o.prompt_ids.empty()) {
    o.prompt.assign(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
    if (o.prompt.empty()) {
      std::fprintf(stderr, "vosti generate: no prompt: give --prompt, --prompt-ids or text on stdin\n");
      return 2;
    }
  }

  LoadProgress progress(o.model);
  auto model = load_model(o, progress);
  if (!model.ok()) {
    std::fprintf(stderr, "\nvosti generate: %s\n", model.status().to_string().c_str());
    return 1;
  }
  auto tok = load_tokenizer(o);
  if (!tok.ok()) {
    std::fprintf(stderr, "\nvosti generate: %s\n", tok.status().to_string().c_str());
    return 1;
  }
  progress.done();
  Result<std::vector<int32_t>> prompt = o.prompt_ids;
  if (*tok) prompt = build_prompt(o, **tok);
  if (!prompt.ok()) {
    std::fprintf(stderr, "vosti generate: %s\n", prompt.status().to_string().c_str());
    return 1;
  }
  o.spec.prompt = *prompt;
  auto engine = Engine::create(*model, o.engine, *tok);
  if (!engine.ok()) {
    std::fprintf(stderr, "vosti generate: %s\n", engine.status().to_string().c_str());
    return 1;
  }
  return run_generation(o, **engine, tok->get());
}

}  // namespace vosti::tools
