// Normalizer: the text rewrite HF tokenizers applies before pre-tokenization
// (tokenizer.json "normalizer"): Unicode forms, Prepend, Replace, Lowercase, Sequence.
//
// Invariants: input and output are valid UTF-8; an empty normalizer is the identity.
// Thread safety: immutable after construction.
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "tokenizer/utf8.h"

namespace vosti {

class Normalizer {
 public:
  struct Step {
    enum class Kind { kUnicode, kPrepend, kReplace, kLowercase } kind = Kind::kUnicode;
    UnicodeForm form = UnicodeForm::kNFC;
    std::string a;  // Prepend: the prefix; Replace: the pattern
    std::string b;  // Replace: the replacement
  };

  // From a tokenizer.json "normalizer" value (null -> identity); UNIMPLEMENTED names an unsupported type.
  static Result<Normalizer> from_json(const nlohmann::json& j);
  static Normalizer sentencepiece_legacy();  // Prepend("▁") then Replace(" ", "▁")

  bool empty() const { return steps_.empty(); }
  // REQUIRES: text is valid UTF-8.
  std::string normalize(std::string_view text) const;

 private:
  Status add(const nlohmann::json& j);
  std::vector<Step> steps_;
};

}  // namespace vosti
