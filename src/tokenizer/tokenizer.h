// Tokenizer: text <-> token ids exactly as Hugging Face `tokenizers` does it, loaded
// from a GGUF file's tokenizer.ggml.* metadata or from an HF directory
// (tokenizer.json + tokenizer_config.json). Two model kinds: byte-level BPE (GPT-2,
// SmolLM2, Llama 3, Qwen2/3) and SentencePiece-style BPE with byte fallback and the
// metaspace (Llama 2, TinyLlama, Mistral v0.1).
//
// encode = repair invalid UTF-8 (one U+FFFD per maximal invalid subpart, as Python's
// errors="replace") -> split out added/special tokens -> normalize -> pre-tokenize ->
// BPE per word -> post-process (BOS/EOS template when add_special_tokens).
// decode = ids -> token strings (special ones dropped when skip_special_tokens) ->
// decoder chain -> valid UTF-8.
//
// Invariants: every id encode() returns is in [0, vocab_size()); decode() output is
// valid UTF-8. Thread safety: a Tokenizer is immutable after loading (its BPE word cache
// is internally synchronized); share it as shared_ptr<const Tokenizer> across threads.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "tokenizer/added_vocabulary.h"
#include "tokenizer/bpe_model.h"
#include "tokenizer/decoder.h"
#include "tokenizer/normalizer.h"
#include "tokenizer/pre_tokenizer.h"

namespace vosti {

class GgufFile;

// Everything a Tokenizer is made of; the loaders fill it in.
struct TokenizerParts {
  std::unique_ptr<BpeModel> model;
  AddedVocabulary added;
  Normalizer normalizer;
  PreTokenizer pre_tokenizer;
  Decoder decoder;
  std::vector<int32_t> prefix_ids;  // post-processor: ids put before the text (e.g. BOS)
  std::vector<int32_t> suffix_ids;  // and after it (e.g. EOS)
  std::optional<int32_t> bos_id, eos_id, unk_id, pad_id;
  std::vector<int32_t> extra_stop_ids;  // end-of-turn tokens besides EOS (eot, eom)
  std::optional<std::string> chat_template;
  std::string source;  // file or directory it was loaded from, for messages
};

class Tokenizer {
 public:
  // From a GGUF's tokenizer.ggml.* keys (model gpt2 or llama).
  static Result<std::shared_ptr<const Tokenizer>> from_gguf(const GgufFile& gguf);
  // From a directory holding tokenizer.json and optionally tokenizer_config.json / chat_template.jinja.
  static Result<std::shared_ptr<const Tokenizer>> from_hf_dir(const std::string& dir);
  // From tokenizer.json text and tokenizer_config.json text (may be empty).
  static Result<std::shared_ptr<const Tokenizer>> from_hf_json(std::string_view tokenizer_json,
                                                               std::string_view tokenizer_config_json,
                                                               const std::string& source);
  // model_path: a .gguf file, or an HF model directory (with tokenizer.json).
  static Result<std::shared_ptr<const Tokenizer>> load_for_model(const std::string& model_path);
  // Validates the parts and builds the tokenizer.
  static Result<std::shared_ptr<const Tokenizer>> create(TokenizerParts parts);

  // The ids of `text` (any bytes; invalid UTF-8 is repaired as documented above).
  Result<std::vector<int32_t>> encode(std::string_view text, bool add_special_tokens = true) const;
  // The text of `ids`; OUT_OF_RANGE naming the first id outside [0, vocab_size()).
  Result<std::string> decode(std::span<const int32_t> ids, bool skip_special_tokens = false) const;
  // decode() for ids known to be in range; ids outside it are dropped (HF's behaviour).
  std::string decode_lenient(std::span<const int32_t> ids, bool skip_special_tokens = false) const;

  // Number of ids: model vocabulary plus added tokens outside it.
  int64_t vocab_size() const { return vocab_size_; }
  std::optional<int32_t> bos_id() const { return parts_.bos_id; }
  std::optional<int32_t> eos_id() const { return parts_.eos_id; }
  std::optional<int32_t> pad_id() const { return parts_.pad_id; }
  std::optional<int32_t> unk_id() const { return parts_.unk_id; }
  // Ids that end generation: EOS and the end-of-turn tokens (<|eot_id|>, <|im_end|>, ...).
  const std::vector<int32_t>& stop_ids() const { return stop_ids_; }
  bool is_stop(int32_t id) const;
  // The text of the BOS/EOS tokens, for chat templates ("" when absent).
  std::string bos_token() const;
  std::string eos_token() const;
  const std::optional<std::string>& chat_template() const { return parts_.chat_template; }
  // True for added tokens marked special (those skip_special_tokens drops).
  bool is_special(int32_t id) const;
  // Every added token's id (special or not) and the BOS, EOS, UNK, PAD and stop ids, ascending
  // and unique: the ids that are not ordinary text tokens.
  std::vector<int32_t> special_token_ids() const;
  // The raw token text (byte-level or metaspace alphabet), nullopt when out of range.
  std::optional<std::string> id_to_piece(int32_t id) const;
  std::optional<int32_t> piece_to_id(std::string_view piece) const;
  bool adds_bos() const { return !parts_.prefix_ids.empty(); }
  // The alphabet of id_to_piece()'s pieces (structured outputs map them to bytes).
  PieceEncoding piece_encoding() const { return parts_.decoder.piece_encoding(); }
  const std::string& source() const { return parts_.source; }

 private:
  explicit Tokenizer(TokenizerParts parts);
  void encode_section(const InputSection& section, std::vector<int32_t>& out) const;

  TokenizerParts parts_;
  int64_t vocab_size_ = 0;
  std::vector<int32_t> stop_ids_;
};

// StreamingDecoder: turns ids produced one at a time into text pieces whose
// concatenation equals decode(all ids) (after flush) whenever that decode holds no
// U+FFFD from invalid bytes (SentencePiece byte fallback replaces a whole invalid byte
// run, which can reach back into bytes already streamed; a stream cannot retract them,
// so it stays valid UTF-8 but may differ there). push() never returns half a UTF-8
// character: it holds text back while the decoded tail ends in U+FFFD from an
// incomplete byte sequence, and it decodes a small window of previous ids so tokens
// that only make sense together (byte fallback, SentencePiece's leading space) come out
// right.
//
// Invariants: the window [prefix_, ids_.size()) only grows until text is emitted.
// Thread safety: not thread-safe; one per request. The Tokenizer must outlive it.
class StreamingDecoder {
 public:
  explicit StreamingDecoder(const Tokenizer& tokenizer, bool skip_special_tokens = false);
  // Appends `id`; returns the text that became complete ("" if none yet). Ids outside
  // the vocabulary are dropped, as HF's decode does.
  std::string push(int32_t id);
  // Returns whatever text is still held back (possibly ending in U+FFFD) and resets the window.
  std::string flush();

 private:
  const Tokenizer& tokenizer_;
  bool skip_special_tokens_;
  std::vector<int32_t> ids_;
  size_t prefix_ = 0;  // start of the decode window
  size_t read_ = 0;    // ids before this are already emitted
};

}  // namespace vosti
