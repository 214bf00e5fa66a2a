#include "tokenizer/tokenizer.h"

#include <algorithm>
#include <filesystem>

#include "io/gguf.h"
#include "tokenizer/utf8.h"

namespace vosti {

Tokenizer::Tokenizer(TokenizerParts parts) : parts_(std::move(parts)) {
  vocab_size_ = parts_.model->vocab_size();
  for (const auto& t : parts_.added.tokens()) vocab_size_ = std::max<int64_t>(vocab_size_, int64_t{t.id} + 1);
  if (parts_.eos_id) stop_ids_.push_back(*parts_.eos_id);
  for (int32_t id : parts_.extra_stop_ids) {
    if (std::find(stop_ids_.begin(), stop_ids_.end(), id) == stop_ids_.end()) stop_ids_.push_back(id);
  }
}

Result<std::shared_ptr<const Tokenizer>> Tokenizer::create(TokenizerParts parts) {
  if (!parts.model) return invalid_argument("tokenizer from " + parts.source + " has no model");
  int64_t size = parts.model->vocab_size();
  for (const auto& t : parts.added.tokens()) {
    if (t.id < 0) return invalid_argument("added token '" + t.content + "' has a negative id in " + parts.source);
    size = std::max<int64_t>(size, int64_t{t.id} + 1);
  }
  auto in_range = [&](std::optional<int32_t> id) { return !id || (*id >= 0 && *id < size); };
  for (const auto& list : {parts.prefix_ids, parts.suffix_ids, parts.extra_stop_ids}) {
    for (int32_t id : list) {
      if (id < 0 || id >= size) {
        return invalid_argument("special token id " + std::to_string(id) + " is outside the vocabulary of " +
                                std::to_string(size) + " in " + parts.source);
      }
    }
  }
  if (!in_range(parts.bos_id) || !in_range(parts.eos_id) || !in_range(parts.unk_id) || !in_range(parts.pad_id)) {
    return invalid_argument("a bos/eos/unk/pad token id is outside the vocabulary of " + std::to_string(size) + " in " +
                            parts.source);
  }
  return std::shared_ptr<const Tokenizer>(new Tokenizer(std::move(parts)));
}

Result<std::shared_ptr<const Tokenizer>> Tokenizer::load_for_model(const std::string& model_path) {
  std::error_code ec;
  if (std::filesystem::is_directory(model_path, ec)) return from_hf_dir(model_path);
  if (!std::filesystem::exists(model_path, ec)) {
    return not_found("model path '" + model_path + "' does not exist; pass a .gguf file or an HF model directory");
  }
  VOSTI_ASSIGN_OR_RETURN(auto gguf, GgufFile::open(model_path));
  return from_gguf(gguf);
}

void Tokenizer::encode_section(const InputSection& section, std::vector<int32_t>& out) const {
  if (section.token_id >= 0) {
    out.push_back(section.token_id);
    return;
  }
  for (const auto& piece : parts_.pre_tokenizer.pre_tokenize(section.text, section.at_start)) {
    parts_.model->tokenize(piece.text, out);
  }
}

Result<std::vector<int32_t>> Tokenizer::encode(std::string_view text, bool add_special_tokens) const {
  std::string repaired;
  if (!is_valid_utf8(text)) {
    repaired = repair_utf8(text);
    text = repaired;
  }
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3 + 4);
  if (add_special_tokens) ids.insert(ids.end(), parts_.prefix_ids.begin(), parts_.prefix_ids.end());
  for (const auto& section : parts_.added.split(text, parts_.normalizer)) encode_section(section, ids);
  if (add_special_tokens) ids.insert(ids.end(), parts_.suffix_ids.begin(), parts_.suffix_ids.end());
  return ids;
}

std::optional<std::string> Tokenizer::id_to_piece(int32_t id) const {
  if (const AddedToken* t = parts_.added.find_id(id)) return t->content;
  if (id < 0 || id >= parts_.model->vocab_size()) return std::nullopt;
  return parts_.model->id_to_token(id);
}

std::optional<int32_t> Tokenizer::piece_to_id(std::string_view piece) const {
  if (const AddedToken* t = parts_.added.find_content(piece)) return t->id;
  return parts_.model->token_to_id(piece);
}

bool Tokenizer::is_special(int32_t id) const {
  const AddedToken* t = parts_.added.find_id(id);
  return t != nullptr && t->special;
}

std::vector<int32_t> Tokenizer::special_token_ids() const {
  std::vector<int32_t> ids = stop_ids_;
  for (const AddedToken& t : parts_.added.tokens()) ids.push_back(t.id);
  for (const auto& id : {parts_.bos_id, parts_.eos_id, parts_.unk_id, parts_.pad_id})
    if (id) ids.push_back(*id);
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  return ids;
}

bool Tokenizer::is_stop(int32_t id) const {
  return std::find(stop_ids_.begin(), stop_ids_.end(), id) != stop_ids_.end();
}

std::string Tokenizer::bos_token() const {
  if (!parts_.bos_id) return "";
  return id_to_piece(*parts_.bos_id).value_or("");
}

std::string Tokenizer::eos_token() const {
  if (!parts_.eos_id) return "";
  return id_to_piece(*parts_.eos_id).value_or("");
}

std::string Tokenizer::decode_lenient(std::span<const int32_t> ids, bool skip_special_tokens) const {
  std::vector<std::string> tokens;
  tokens.reserve(ids.size());
  for (int32_t id : ids) {
    if (skip_special_tokens && is_special(id)) continue;
    auto piece = id_to_piece(id);
    if (piece) tokens.push_back(std::move(*piece));
  }
  return parts_.decoder.decode(std::move(tokens));
}

Result<std::string> Tokenizer::decode(std::span<const int32_t> ids, bool skip_special_tokens) const {
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0 || ids[i] >= vocab_size_ || !id_to_piece(ids[i])) {
      return out_of_range("token id " + std::to_string(ids[i]) + " at position " + std::to_string(i) +
                          " is outside the tokenizer's vocabulary of " + std::to_string(vocab_size_) + " ids");
    }
  }
  return decode_lenient(ids, skip_special_tokens);
}

StreamingDecoder::StreamingDecoder(const Tokenizer& tokenizer, bool skip_special_tokens)
    : tokenizer_(tokenizer), skip_special_tokens_(skip_special_tokens) {}

std::string StreamingDecoder::push(int32_t id) {
  if (!tokenizer_.id_to_piece(id)) return "";
  ids_.push_back(id);
  const std::span<const int32_t> all(ids_);
  const std::string prefix_text =
      tokenizer_.decode_lenient(all.subspan(prefix_, read_ - prefix_), skip_special_tokens_);
  const std::string new_text = tokenizer_.decode_lenient(all.subspan(prefix_), skip_special_tokens_);
  const bool ends_incomplete =
      new_text.size() >= kReplacementChar.size() &&
      new_text.compare(new_text.size() - kReplacementChar.size(), kReplacementChar.size(), kReplacementChar) == 0;
  if (new_text.size() <= prefix_text.size() || ends_incomplete ||
      new_text.compare(0, prefix_text.size(), prefix_text) != 0) {
    return "";
  }
  std::string out = new_text.substr(prefix_text.size());
  prefix_ = read_;
  read_ = ids_.size();
  return out;
}

std::string StreamingDecoder::flush() {
  const std::span<const int32_t> all(ids_);
  const std::string prefix_text =
      tokenizer_.decode_lenient(all.subspan(prefix_, read_ - prefix_), skip_special_tokens_);
  const std::string new_text = tokenizer_.decode_lenient(all.subspan(prefix_), skip_special_tokens_);
  // Emit what follows the part already sent. (new_text only diverges from prefix_text
  // when an invalid byte run turned already-sent bytes into U+FFFD; see the header.)
  size_t common = 0;
  while (common < prefix_text.size() && common < new_text.size() && prefix_text[common] == new_text[common]) ++common;
  while (common > 0 && common < new_text.size() && (static_cast<uint8_t>(new_text[common]) & 0xC0) == 0x80) --common;
  std::string out = new_text.substr(common);
  prefix_ = read_ = ids_.size();
  return out;
}

}  // namespace vosti
