// Loaders for Tokenizer: HF tokenizer.json (+ tokenizer_config.json) and GGUF metadata.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "io/gguf.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"

namespace vosti {
namespace {

using nlohmann::json;

// Added tokens that end a turn in the chat formats we know (llama.cpp treats the same as EOG).
constexpr const char* kEndOfTurnTokens[] = {"<|eot_id|>",    "<|eom_id|>",    "<|im_end|>", "<|end_of_text|>",
                                            "<|endoftext|>", "<end_of_turn>", "</s>",       "<|end|>"};

Result<std::string> read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return not_found("cannot open " + path.string());
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// A special-token entry of tokenizer_config.json: a string or {"content": ...}.
std::optional<std::string> token_text(const json& config, const char* key) {
  if (!config.contains(key)) return std::nullopt;
  const json& v = config.at(key);
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object() && v.contains("content") && v.at("content").is_string()) return v.at("content").get<std::string>();
  return std::nullopt;
}

std::optional<std::string> chat_template_from_config(const json& config) {
  if (!config.contains("chat_template")) return std::nullopt;
  const json& t = config.at("chat_template");
  if (t.is_string()) return t.get<std::string>();
  if (t.is_array()) {
    for (const auto& entry : t) {
      if (entry.value("name", "") == "default" && entry.contains("template"))
        return entry.at("template").get<std::string>();
    }
  }
  return std::nullopt;
}

Status parse_post_processor(const json& j, TokenizerParts& parts) {
  if (j.is_null()) return Status();
  const std::string type = j.value("type", "");
  if (type == "Sequence") {
    for (const auto& sub : j.at("processors")) VOSTI_RETURN_IF_ERROR(parse_post_processor(sub, parts));
    return Status();
  }
  if (type == "ByteLevel") return Status();  // only adjusts offsets
  if (type == "TemplateProcessing") {
    const json& specials = j.value("special_tokens", json::object());
    bool after = false;
    for (const auto& item : j.at("single")) {
      if (item.contains("Sequence")) {
        after = true;
        continue;
      }
      const std::string name = item.at("SpecialToken").at("id").get<std::string>();
      if (!specials.contains(name))
        return invalid_argument("post_processor names special token '" + name + "' it does not define");
      for (const auto& id : specials.at(name).at("ids"))
        (after ? parts.suffix_ids : parts.prefix_ids).push_back(id.get<int32_t>());
    }
    return Status();
  }
  if (type == "RobertaProcessing" || type == "BertProcessing") {
    parts.prefix_ids.push_back(j.at("cls").at(1).get<int32_t>());
    parts.suffix_ids.push_back(j.at("sep").at(1).get<int32_t>());
    return Status();
  }
  return unimplemented("tokenizer.json post_processor type '" + type + "' is not supported");
}

Result<std::vector<std::pair<std::string, std::string>>> parse_merges(const json& merges) {
  std::vector<std::pair<std::string, std::string>> out;
  out.reserve(merges.size());
  for (const auto& m : merges) {
    if (m.is_array() && m.size() == 2) {
      out.emplace_back(m.at(0).get<std::string>(), m.at(1).get<std::string>());
    } else if (m.is_string()) {
      const std::string s = m.get<std::string>();
      const size_t sp = s.find(' ');
      if (sp == std::string::npos || s.find(' ', sp + 1) != std::string::npos) {
        return invalid_argument("BPE merge '" + s + "' is not two tokens separated by one space");
      }
      out.emplace_back(s.substr(0, sp), s.substr(sp + 1));
    } else {
      return invalid_argument("BPE merge entry is neither \"a b\" nor [a, b]");
    }
  }
  return out;
}

Status parse_model(const json& m, TokenizerParts& parts) {
  const std::string type = m.value("type", "BPE");
  if (type != "BPE") return unimplemented("tokenizer.json model type '" + type + "' is not supported (only BPE)");
  if (!m.value("continuing_subword_prefix", json()).is_null() || !m.value("end_of_word_suffix", json()).is_null()) {
    return unimplemented("BPE continuing_subword_prefix / end_of_word_suffix are not supported");
  }
  if (!m.value("dropout", json()).is_null())
    return unimplemented("BPE dropout is not supported (it is not deterministic)");
  std::vector<std::string> tokens;
  for (const auto& [token, id_json] : m.at("vocab").items()) {
    const int64_t id = id_json.get<int64_t>();
    if (id < 0 || id > (int64_t{1} << 24))
      return invalid_argument("vocabulary id " + std::to_string(id) + " of '" + token + "' is out of range");
    if (static_cast<size_t>(id) >= tokens.size()) tokens.resize(static_cast<size_t>(id) + 1);
    tokens[static_cast<size_t>(id)] = token;
  }
  VOSTI_ASSIGN_OR_RETURN(auto merges, parse_merges(m.value("merges", json::array())));
  BpeModel::Options opt;
  opt.byte_fallback = m.value("byte_fallback", false);
  opt.fuse_unk = m.value("fuse_unk", false);
  opt.ignore_merges = m.value("ignore_merges", false);
  if (m.contains("unk_token") && m.at("unk_token").is_string()) {
    const std::string unk = m.at("unk_token").get<std::string>();
    const auto it = std::find(tokens.begin(), tokens.end(), unk);
    if (it != tokens.end()) opt.unk_id = static_cast<int32_t>(it - tokens.begin());
  }
  parts.unk_id = opt.unk_id;
  VOSTI_ASSIGN_OR_RETURN(parts.model, BpeModel::create(std::move(tokens), merges, opt));
  return Status();
}

std::optional<int32_t> lookup(const TokenizerParts& parts, const std::optional<std::string>& text) {
  if (!text) return std::nullopt;
  if (const AddedToken* t = parts.added.find_content(*text)) return t->id;
  return parts.model->token_to_id(*text);
}

void add_end_of_turn_ids(TokenizerParts& parts) {
  for (const char* name : kEndOfTurnTokens) {
    const AddedToken* t = parts.added.find_content(name);
    if (t != nullptr && t->special) parts.extra_stop_ids.push_back(t->id);
  }
}

Status fill_from_hf(const json& tj, const json& config, TokenizerParts& parts) {
  VOSTI_RETURN_IF_ERROR(parse_model(tj.at("model"), parts));
  std::vector<AddedToken> added;
  for (const auto& a : tj.value("added_tokens", json::array())) {
    AddedToken t;
    t.id = a.at("id").get<int32_t>();
    t.content = a.at("content").get<std::string>();
    if (t.content.empty()) return invalid_argument("added token with id " + std::to_string(t.id) + " is empty");
    t.special = a.value("special", false);
    t.single_word = a.value("single_word", false);
    t.lstrip = a.value("lstrip", false);
    t.rstrip = a.value("rstrip", false);
    t.normalized = a.value("normalized", !t.special);
    added.push_back(std::move(t));
  }
  parts.added = AddedVocabulary(std::move(added));
  VOSTI_ASSIGN_OR_RETURN(parts.normalizer, Normalizer::from_json(tj.value("normalizer", json())));
  VOSTI_ASSIGN_OR_RETURN(parts.pre_tokenizer, PreTokenizer::from_json(tj.value("pre_tokenizer", json())));
  VOSTI_ASSIGN_OR_RETURN(parts.decoder, Decoder::from_json(tj.value("decoder", json())));
  VOSTI_RETURN_IF_ERROR(parse_post_processor(tj.value("post_processor", json()), parts));
  parts.bos_id = lookup(parts, token_text(config, "bos_token"));
  parts.eos_id = lookup(parts, token_text(config, "eos_token"));
  parts.pad_id = lookup(parts, token_text(config, "pad_token"));
  if (auto unk = lookup(parts, token_text(config, "unk_token"))) parts.unk_id = unk;
  parts.chat_template = chat_template_from_config(config);
  add_end_of_turn_ids(parts);
  return Status();
}

Result<TokenizerParts> hf_parts(std::string_view tokenizer_json, std::string_view tokenizer_config_json,
                                const std::string& source) {
  TokenizerParts parts;
  parts.source = source;
  try {
    const json tj = json::parse(tokenizer_json);
    const json config = tokenizer_config_json.empty() ? json::object() : json::parse(tokenizer_config_json);
    if (!tj.is_object() || !tj.contains("model")) return invalid_argument(source + ": tokenizer.json has no \"model\"");
    VOSTI_RETURN_IF_ERROR(fill_from_hf(tj, config.is_object() ? config : json::object(), parts));
  } catch (const json::exception& e) {
    return invalid_argument(source + ": malformed tokenizer JSON: " + e.what());
  }
  return parts;
}

}  // namespace

Result<std::shared_ptr<const Tokenizer>> Tokenizer::from_hf_json(std::string_view tokenizer_json,
                                                                 std::string_view tokenizer_config_json,
                                                                 const std::string& source) {
  VOSTI_ASSIGN_OR_RETURN(auto parts, hf_parts(tokenizer_json, tokenizer_config_json, source));
  return create(std::move(parts));
}

Result<std::shared_ptr<const Tokenizer>> Tokenizer::from_hf_dir(const std::string& dir) {
  const std::filesystem::path base(dir);
  if (!std::filesystem::exists(base / "tokenizer.json")) {
    return not_found("no tokenizer.json in '" + dir + "' (an HF model directory needs one)");
  }
  VOSTI_ASSIGN_OR_RETURN(std::string tj, read_file(base / "tokenizer.json"));
  std::string config;
  if (std::filesystem::exists(base / "tokenizer_config.json")) {
    VOSTI_ASSIGN_OR_RETURN(config, read_file(base / "tokenizer_config.json"));
  }
  VOSTI_ASSIGN_OR_RETURN(auto parts, hf_parts(tj, config, dir));
  if (!parts.chat_template && std::filesystem::exists(base / "chat_template.jinja")) {
    VOSTI_ASSIGN_OR_RETURN(std::string tmpl, read_file(base / "chat_template.jinja"));
    parts.chat_template = std::move(tmpl);
  }
  return create(std::move(parts));
}

}  // namespace vosti
