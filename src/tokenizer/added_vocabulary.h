// AddedVocabulary: tokens matched in the raw text before any model sees it (special
// tokens like <|im_start|>, and plain added tokens like <think>), with HF tokenizers'
// semantics: leftmost-longest matching, first over the raw text for tokens with
// normalized=false, then over each normalized remaining section for normalized=true;
// single_word, lstrip and rstrip flags as HF applies them.
//
// Invariants: token contents are non-empty and unique. Thread safety: immutable after
// construction.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tokenizer/bpe_model.h"
#include "tokenizer/normalizer.h"

namespace vosti {

struct AddedToken {
  std::string content;
  int32_t id = 0;
  bool special = false;
  bool single_word = false;
  bool lstrip = false;
  bool rstrip = false;
  bool normalized = false;
};

// One section of the input: either an added token or text for the pipeline.
struct InputSection {
  std::string text;  // normalized text (empty for a token)
  int32_t token_id = -1;
  bool at_start = false;  // the section begins at offset 0 of the input
};

class AddedVocabulary {
 public:
  AddedVocabulary() = default;
  explicit AddedVocabulary(std::vector<AddedToken> tokens);

  // Splits `text` into sections, normalizing text sections with `normalizer`.
  // REQUIRES: text is valid UTF-8.
  std::vector<InputSection> split(std::string_view text, const Normalizer& normalizer) const;
  const AddedToken* find_id(int32_t id) const;
  const AddedToken* find_content(std::string_view content) const;
  const std::vector<AddedToken>& tokens() const { return tokens_; }

 private:
  struct Match {
    size_t start, end;
    const AddedToken* token;
  };
  std::vector<Match> find_matches(std::string_view text, bool normalized_pass) const;
  void split_normalized(std::string_view text, bool at_start, const Normalizer& normalizer,
                        std::vector<InputSection>& out) const;

  std::vector<AddedToken> tokens_;
  std::unordered_map<int32_t, size_t> by_id_;
  std::unordered_map<std::string, size_t, StringHash, std::equal_to<>> by_content_;
  size_t max_length_ = 0;
  bool first_byte_[256] = {};
};

}  // namespace vosti
