#include "tools/bench/workload.h"

#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>

#include "tokenizer/tokenizer.h"
#include "tools/bench/copy_workload.h"

namespace vosti::bench {
namespace {

using nlohmann::json;

// Uniform in [lo, hi] from the generator's raw bits (the same on every standard library).
int64_t uniform(std::mt19937_64& rng, int64_t lo, int64_t hi) {
  return lo + static_cast<int64_t>(rng() % static_cast<uint64_t>(hi - lo + 1));
}

int32_t draw_length(std::mt19937_64& rng, const LengthRange& r) {
  return static_cast<int32_t>(uniform(rng, r.min, r.max));
}

std::vector<int32_t> random_ids(std::mt19937_64& rng, int32_t n, const Tokenizer& tok) {
  return random_token_ids(rng, n, tok);
}

Status need_tokenizer(const Tokenizer* tok, const std::string& kind) {
  if (tok) return Status();
  return invalid_argument("the " + kind + " workload needs the model's tokenizer: give --model (or --tokenizer) PATH");
}

Result<std::vector<BenchRequest>> random_workload(const WorkloadConfig& c, const Tokenizer* tok) {
  VOSTI_RETURN_IF_ERROR(need_tokenizer(tok, "random"));
  std::mt19937_64 rng(c.seed);
  std::vector<BenchRequest> out(static_cast<size_t>(c.num_prompts));
  for (int64_t i = 0; i < c.num_prompts; ++i) {
    BenchRequest& r = out[static_cast<size_t>(i)];
    r.index = i;
    r.prompt_ids = random_ids(rng, draw_length(rng, c.input_len), *tok);
    r.max_tokens = draw_length(rng, c.output_len);
    r.seed = request_seed(c.seed, i);
  }
  return out;
}

Result<std::vector<BenchRequest>> shared_prefix_workload(const WorkloadConfig& c, const Tokenizer* tok) {
  VOSTI_RETURN_IF_ERROR(need_tokenizer(tok, "shared-prefix"));
  std::mt19937_64 rng(c.seed);
  std::vector<BenchRequest> out;
  for (int64_t g = 0; g < c.num_groups; ++g) {
    const std::vector<int32_t> system = random_ids(rng, c.system_prompt_len, *tok);
    for (int64_t k = 0; k < c.prompts_per_group; ++k) {
      BenchRequest r;
      r.prompt_ids = system;
      const std::vector<int32_t> question = random_ids(rng, draw_length(rng, c.question_len), *tok);
      r.prompt_ids.insert(r.prompt_ids.end(), question.begin(), question.end());
      r.max_tokens = draw_length(rng, c.output_len);
      out.push_back(std::move(r));
    }
  }
  for (size_t i = out.size(); i > 1; --i) std::swap(out[i - 1], out[static_cast<size_t>(uniform(rng, 0, i - 1))]);
  for (size_t i = 0; i < out.size(); ++i) {
    out[i].index = static_cast<int64_t>(i);
    out[i].seed = request_seed(c.seed, out[i].index);
  }
  return out;
}

// One entry of a prompts file -> a request (index and seed set by the caller).
Result<BenchRequest> parse_entry(const json& e, const WorkloadConfig& c, const Tokenizer* tok,
                                 const std::string& where) {
  if (!e.is_object()) return invalid_argument(where + ": an entry must be a JSON object");
  BenchRequest r;
  std::optional<int64_t> length;
  for (const char* key : {"max_tokens", "output_len"}) {
    if (e.contains(key)) {
      if (!e[key].is_number_integer() || e[key].get<int64_t>() < 1)
        return invalid_argument(where + ": \"" + key + "\" must be a positive integer");
      length = e[key].get<int64_t>();
    }
  }
  if (e.contains("prompt")) {
    const json& p = e["prompt"];
    if (p.is_string()) {
      r.kind = PromptKind::kText;
      r.prompt_text = p.get<std::string>();
    } else if (p.is_array() && !p.empty() &&
               std::all_of(p.begin(), p.end(), [](const json& x) { return x.is_number_integer(); })) {
      r.kind = PromptKind::kTokenIds;
      r.prompt_ids = p.get<std::vector<int32_t>>();
    } else {
      return invalid_argument(where + ": \"prompt\" must be a string or a non-empty array of token ids");
    }
  } else if (e.contains("messages") || e.contains("conversations")) {
    const bool sharegpt = !e.contains("messages");
    const json& turns = sharegpt ? e["conversations"] : e["messages"];
    if (!turns.is_array()) return invalid_argument(where + ": the conversation must be an array");
    r.kind = PromptKind::kChat;
    for (const json& t : turns) {
      const char* role_key = sharegpt ? "from" : "role";
      const char* text_key = sharegpt ? "value" : "content";
      if (!t.is_object() || !t.contains(role_key) || !t[role_key].is_string() || !t.contains(text_key) ||
          !t[text_key].is_string())
        return invalid_argument(where + ": each turn needs string \"" + role_key + "\" and \"" + text_key + "\"");
      std::string role = t[role_key].get<std::string>();
      const std::string text = t[text_key].get<std::string>();
      if (role == "gpt" || (role == "assistant" && sharegpt)) {
        // ShareGPT: the first reply ends the prompt; its length is the output length.
        if (!length && tok) {
          auto ids = tok->encode(text, false);
          if (ids.ok()) length = std::max<int64_t>(1, static_cast<int64_t>(ids->size()));
        }
        break;
      }
      if (role == "human") role = "user";
      r.messages.push_back(ChatMessage{role, text});
    }
    if (r.messages.empty()) return invalid_argument(where + ": the conversation has no turn before the first reply");
  } else {
    return invalid_argument(where + ": an entry needs \"prompt\", \"messages\" or \"conversations\"");
  }
  if (c.output_len_given || !length) {
    r.max_tokens = c.output_len.min == c.output_len.max ? c.output_len.min : 0;  // a range: drawn by the caller
  } else {
    r.max_tokens = static_cast<int32_t>(*length);
  }
  return r;
}

Result<std::vector<BenchRequest>> file_workload(const WorkloadConfig& c, const Tokenizer* tok) {
  std::ifstream in(c.file);
  if (!in) return not_found("cannot open the prompts file " + c.file);
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string text = ss.str();
  std::vector<std::pair<json, std::string>> entries;  // (entry, where)
  const size_t first = text.find_first_not_of(" \t\r\n");
  if (first == std::string::npos) return invalid_argument(c.file + ": the prompts file is empty");
  if (text[first] == '[') {
    json all = json::parse(text, nullptr, false);
    if (all.is_discarded()) return invalid_argument(c.file + ": not valid JSON (a JSON array or one object a line)");
    for (size_t i = 0; i < all.size(); ++i) entries.emplace_back(all[i], c.file + ": entry " + std::to_string(i));
  } else {
    std::istringstream lines(text);
    std::string line;
    for (int64_t n = 1; std::getline(lines, line); ++n) {
      if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
      json e = json::parse(line, nullptr, false);
      if (e.is_discarded()) return invalid_argument(c.file + ":" + std::to_string(n) + ": not valid JSON");
      entries.emplace_back(std::move(e), c.file + ":" + std::to_string(n));
    }
  }
  std::mt19937_64 rng(c.seed);
  std::vector<BenchRequest> out;
  for (const auto& [e, where] : entries) {
    if (c.num_prompts > 0 && static_cast<int64_t>(out.size()) >= c.num_prompts) break;
    VOSTI_ASSIGN_OR_RETURN(BenchRequest r, parse_entry(e, c, tok, where));
    if (r.max_tokens == 0) r.max_tokens = draw_length(rng, c.output_len);
    r.index = static_cast<int64_t>(out.size());
    r.seed = request_seed(c.seed, r.index);
    out.push_back(std::move(r));
  }
  if (out.empty()) return invalid_argument(c.file + ": no prompts in the file");
  return out;
}

}  // namespace

uint64_t request_seed(uint64_t workload_seed, int64_t index) {
  return 1 + workload_seed * 1000003ull + static_cast<uint64_t>(index);
}

std::vector<int32_t> random_token_ids(std::mt19937_64& rng, int32_t n, const Tokenizer& tok) {
  std::vector<int32_t> ids;
  ids.reserve(static_cast<size_t>(n));
  while (static_cast<int32_t>(ids.size()) < n) {
    const auto id = static_cast<int32_t>(uniform(rng, 0, tok.vocab_size() - 1));
    if (!tok.is_special(id)) ids.push_back(id);
  }
  return ids;
}

Result<LengthRange> parse_length_range(const std::string& text, const std::string& what) {
  const auto bad = [&] {
    return invalid_argument(what + ": '" + text + "' is not a length N or a range MIN:MAX (1 <= MIN <= MAX)");
  };
  LengthRange r;
  const size_t colon = text.find(':');
  try {
    size_t used = 0;
    const std::string a = text.substr(0, colon);
    r.min = std::stoi(a, &used);
    if (used != a.size()) return bad();
    r.max = r.min;
    if (colon != std::string::npos) {
      const std::string b = text.substr(colon + 1);
      r.max = std::stoi(b, &used);
      if (used != b.size()) return bad();
    }
  } catch (const std::exception&) {
    return bad();
  }
  if (r.min < 1 || r.max < r.min) return bad();
  return r;
}

Result<std::vector<BenchRequest>> make_workload(const WorkloadConfig& config, const Tokenizer* tokenizer) {
  if (config.kind == "random") return random_workload(config, tokenizer);
  if (config.kind == "shared-prefix") return shared_prefix_workload(config, tokenizer);
  if (config.kind == "file") return file_workload(config, tokenizer);
  if (config.kind == "copy") return copy_workload(config);
  return invalid_argument("unknown workload '" + config.kind + "' (random, shared-prefix, file or copy)");
}

}  // namespace vosti::bench
