// Tokenizer::from_gguf: the tokenizer a GGUF file's tokenizer.ggml.* metadata describes,
// built the way transformers' GGUF loader builds it (gguf_tokenizer_mapping.py), except
// that the byte-level pre-tokenizer follows tokenizer.ggml.pre as llama.cpp does (the
// model's own split rules, e.g. SmolLM2's digit splitting).
#include <algorithm>
#include <map>
#include <tuple>

#include "io/gguf.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"

namespace vosti {
namespace {

// llama.cpp token types.
constexpr int64_t kTypeControl = 3;
constexpr int64_t kTypeUserDefined = 4;

std::optional<int32_t> optional_id(const GgufFile& g, const char* key) {
  const auto r = g.get_int(key);
  if (!r.ok() || *r < 0 || *r > INT32_MAX) return std::nullopt;
  return static_cast<int32_t>(*r);
}

bool optional_bool(const GgufFile& g, const char* key, bool fallback) {
  const auto r = g.get_bool(key);
  return r.ok() ? *r : fallback;
}

// Whether every character of `token` is in the GPT-2 byte alphabet.
bool in_byte_alphabet(const std::string& token) {
  if (!is_valid_utf8(token)) return false;
  size_t pos = 0;
  while (pos < token.size()) {
    if (gpt2_byte_for_char(next_code_point(token, pos)) < 0) return false;
  }
  return true;
}

size_t code_point_count(const std::string& s) {
  size_t n = 0;
  for (char c : s) n += (static_cast<uint8_t>(c) & 0xC0) != 0x80;
  return n;
}

// transformers' generate_merges(vocab, scores): every split of every token into two
// tokens, ordered by the token's score (highest first), then longer left / right pieces.
std::vector<std::pair<std::string, std::string>> merges_from_scores(const std::vector<std::string>& tokens,
                                                                    const std::vector<double>& scores) {
  std::unordered_map<std::string, int32_t> index;
  for (size_t i = 0; i < tokens.size(); ++i) index.emplace(tokens[i], static_cast<int32_t>(i));
  struct Candidate {
    int32_t left, right;
    double score;
    size_t left_len, right_len;
  };
  std::vector<Candidate> all;
  for (size_t t = 0; t < tokens.size(); ++t) {
    const std::string& tok = tokens[t];
    std::vector<Candidate> local;
    for (size_t cut = 1; cut < tok.size(); ++cut) {
      if ((static_cast<uint8_t>(tok[cut]) & 0xC0) == 0x80) continue;  // split on code points only
      const auto l = index.find(tok.substr(0, cut));
      const auto r = index.find(tok.substr(cut));
      if (l != index.end() && r != index.end()) {
        local.push_back({l->second, r->second, scores[t], code_point_count(l->first), code_point_count(r->first)});
      }
    }
    std::stable_sort(local.begin(), local.end(), [](const Candidate& a, const Candidate& b) {
      return std::tie(a.left, a.right) < std::tie(b.left, b.right);
    });
    all.insert(all.end(), local.begin(), local.end());
  }
  std::stable_sort(all.begin(), all.end(), [](const Candidate& a, const Candidate& b) {
    return std::tie(a.score, a.left_len, a.right_len) > std::tie(b.score, b.left_len, b.right_len);
  });
  std::vector<std::pair<std::string, std::string>> out;
  out.reserve(all.size());
  for (const auto& c : all) out.emplace_back(tokens[static_cast<size_t>(c.left)], tokens[static_cast<size_t>(c.right)]);
  return out;
}

Result<std::vector<std::pair<std::string, std::string>>> gguf_merges(const GgufFile& g) {
  std::vector<std::pair<std::string, std::string>> out;
  VOSTI_ASSIGN_OR_RETURN(auto merges, g.get_string_array("tokenizer.ggml.merges"));
  out.reserve(merges.size());
  for (const auto& m : merges) {
    const size_t sp = m.find(' ');
    if (sp == std::string::npos || m.find(' ', sp + 1) != std::string::npos) {
      return invalid_argument(g.path() + ": tokenizer.ggml.merges entry '" + m +
                              "' is not two tokens separated by one space");
    }
    out.emplace_back(m.substr(0, sp), m.substr(sp + 1));
  }
  return out;
}

// Control (3) tokens become special added tokens, user-defined (4) ones plain added
// tokens, and the bos/eos/unk/pad tokens are special too (transformers registers them
// from the tokenizer config it builds).
Status fill_added_tokens(const GgufFile& g, const std::vector<std::string>& tokens, bool byte_level,
                         TokenizerParts& parts) {
  std::vector<int64_t> types;
  if (g.find("tokenizer.ggml.token_type") != nullptr) {
    VOSTI_ASSIGN_OR_RETURN(types, g.get_int_array("tokenizer.ggml.token_type"));
    if (types.size() != tokens.size()) {
      return invalid_argument(g.path() + ": tokenizer.ggml.token_type has " + std::to_string(types.size()) +
                              " entries for " + std::to_string(tokens.size()) + " tokens");
    }
  }
  std::vector<AddedToken> added;
  auto named_special = [&](size_t i) {
    for (auto id : {parts.bos_id, parts.eos_id, parts.unk_id, parts.pad_id}) {
      if (id && static_cast<size_t>(*id) == i) return true;
    }
    return false;
  };
  for (size_t i = 0; i < types.size(); ++i) {
    const bool control = (types[i] == kTypeControl || named_special(i)) && (!byte_level || in_byte_alphabet(tokens[i]));
    if ((control || types[i] == kTypeUserDefined) && !tokens[i].empty()) {
      AddedToken t;
      t.content = tokens[i];
      t.id = static_cast<int32_t>(i);
      t.special = control;
      added.push_back(std::move(t));
    }
  }
  parts.added = AddedVocabulary(std::move(added));
  return Status();
}

void fill_stop_ids(const GgufFile& g, TokenizerParts& parts) {
  for (const char* key : {"tokenizer.ggml.eot_token_id", "tokenizer.ggml.eom_token_id"}) {
    if (auto id = optional_id(g, key)) parts.extra_stop_ids.push_back(*id);
  }
  for (const char* name :
       {"<|eot_id|>", "<|eom_id|>", "<|im_end|>", "<|end_of_text|>", "<|endoftext|>", "<end_of_turn>"}) {
    const AddedToken* t = parts.added.find_content(name);
    if (t != nullptr && t->special) parts.extra_stop_ids.push_back(t->id);
  }
}

}  // namespace

Result<std::shared_ptr<const Tokenizer>> Tokenizer::from_gguf(const GgufFile& g) {
  TokenizerParts parts;
  parts.source = g.path();
  VOSTI_ASSIGN_OR_RETURN(const std::string model, g.get_string("tokenizer.ggml.model"));
  VOSTI_ASSIGN_OR_RETURN(std::vector<std::string> tokens, g.get_string_array("tokenizer.ggml.tokens"));
  if (tokens.empty()) return invalid_argument(g.path() + ": tokenizer.ggml.tokens is empty");
  const bool has_merges = g.find("tokenizer.ggml.merges") != nullptr;
  BpeModel::Options opt;
  std::vector<std::pair<std::string, std::string>> merges;
  if (model == "gpt2") {
    // Tokens outside the byte alphabet are spelled in it, as transformers does.
    for (auto& t : tokens) {
      if (!in_byte_alphabet(t)) t = gpt2_chars_from_bytes(t);
    }
    std::string pre = "default";
    if (auto p = g.get_string("tokenizer.ggml.pre"); p.ok()) pre = *p;
    VOSTI_ASSIGN_OR_RETURN(parts.pre_tokenizer, PreTokenizer::for_gguf_pre(pre));
    parts.decoder = Decoder::byte_level();
    if (!has_merges) return invalid_argument(g.path() + ": a gpt2 tokenizer needs tokenizer.ggml.merges");
    VOSTI_ASSIGN_OR_RETURN(merges, gguf_merges(g));
  } else if (model == "llama") {
    const bool add_space = optional_bool(g, "tokenizer.ggml.add_space_prefix", true);
    parts.pre_tokenizer = PreTokenizer::metaspace(add_space);
    parts.decoder = Decoder::sentencepiece(add_space);
    opt.byte_fallback = true;
    opt.fuse_unk = true;
    if (has_merges) {
      VOSTI_ASSIGN_OR_RETURN(merges, gguf_merges(g));
    } else {
      VOSTI_ASSIGN_OR_RETURN(auto scores, g.get_double_array("tokenizer.ggml.scores"));
      if (scores.size() != tokens.size())
        return invalid_argument(g.path() + ": tokenizer.ggml.scores and tokens differ in length");
      merges = merges_from_scores(tokens, scores);
    }
  } else {
    return unimplemented(g.path() + ": tokenizer.ggml.model '" + model + "' is not supported (supported: gpt2, llama)");
  }
  parts.bos_id = optional_id(g, "tokenizer.ggml.bos_token_id");
  parts.eos_id = optional_id(g, "tokenizer.ggml.eos_token_id");
  parts.unk_id = optional_id(g, "tokenizer.ggml.unknown_token_id");
  parts.pad_id = optional_id(g, "tokenizer.ggml.padding_token_id");
  if (model == "llama") opt.unk_id = parts.unk_id;
  VOSTI_RETURN_IF_ERROR(fill_added_tokens(g, tokens, model == "gpt2", parts));
  const auto n = static_cast<int64_t>(tokens.size());
  for (auto id : {parts.bos_id, parts.eos_id, parts.unk_id, parts.pad_id}) {
    if (id && *id >= n)
      return invalid_argument(g.path() + ": special token id " + std::to_string(*id) + " >= vocabulary size " +
                              std::to_string(n));
  }
  VOSTI_ASSIGN_OR_RETURN(parts.model, BpeModel::create(std::move(tokens), merges, opt));
  if (optional_bool(g, "tokenizer.ggml.add_bos_token", model == "llama") && parts.bos_id)
    parts.prefix_ids.push_back(*parts.bos_id);
  if (optional_bool(g, "tokenizer.ggml.add_eos_token", false) && parts.eos_id)
    parts.suffix_ids.push_back(*parts.eos_id);
  if (auto t = g.get_string("tokenizer.chat_template"); t.ok()) parts.chat_template = *t;
  fill_stop_ids(g, parts);
  return create(std::move(parts));
}

}  // namespace vosti
