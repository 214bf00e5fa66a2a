// PreTokenizer: splits normalized text into words before BPE, as HF tokenizers'
// pre_tokenizers do: Split (regex, five delimiter behaviours), ByteLevel (GPT-2 regex
// and byte -> character mapping), Digits, Metaspace, Sequence. Also the named presets
// llama.cpp writes as tokenizer.ggml.pre (gpt2, smollm, llama-bpe/llama3, qwen2, ...).
// The GPT-2, Llama 3, Qwen2 and digit patterns run on native matchers (split_patterns.h)
// that find exactly Oniguruma's matches; any other pattern runs on Oniguruma.
//
// Invariants: pieces are never empty; concatenating the pieces of a section gives the
// section's text after the steps' rewrites (prefix space, metaspace, byte mapping).
// Thread safety: immutable after construction; pre_tokenize is reentrant.
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "tokenizer/regex.h"

namespace vosti {

// One word handed to the model. at_start: it begins at offset 0 of the whole input
// (Metaspace's prepend_scheme "first" prepends only there).
struct PreToken {
  std::string text;
  bool at_start = false;
};

enum class SplitBehavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };

class PreTokenizer {
 public:
  struct Step {
    enum class Kind { kSplit, kByteLevel, kMetaspace } kind = Kind::kSplit;
    std::shared_ptr<const Regex> regex;  // kSplit; kByteLevel when use_regex
    // A native matcher equivalent to `regex` for the two hot patterns (gpt2_splitter.h).
    enum class Native { kNone, kGpt2, kNumberChar, kLlama3, kQwen2 } native = Native::kNone;
    SplitBehavior behavior = SplitBehavior::kIsolated;
    bool add_prefix_space = false;  // kByteLevel
    std::string replacement;        // kMetaspace
    enum class Prepend { kAlways, kFirst, kNever } prepend = Prepend::kAlways;
    bool split = false;  // kMetaspace
  };

  // From a tokenizer.json "pre_tokenizer" value (null -> no splitting).
  static Result<PreTokenizer> from_json(const nlohmann::json& j);
  // The byte-level pre-tokenizer llama.cpp calls `pre_name` (tokenizer.ggml.pre);
  // UNIMPLEMENTED naming it when unknown.
  static Result<PreTokenizer> for_gguf_pre(const std::string& pre_name);
  // SentencePiece's metaspace as transformers builds it for Llama: replacement "▁", no
  // split, prepend_scheme "first" when add_prefix_space else "never".
  static PreTokenizer metaspace(bool add_prefix_space);

  bool byte_level() const;
  // Splits one section of text (between added tokens). REQUIRES: text is valid UTF-8.
  std::vector<PreToken> pre_tokenize(std::string_view text, bool at_start) const;

 private:
  Status add(const nlohmann::json& j);
  Status add_split(const std::string& pattern, SplitBehavior behavior);
  Status add_byte_level(bool add_prefix_space, bool use_regex);
  std::vector<Step> steps_;
};

}  // namespace vosti
