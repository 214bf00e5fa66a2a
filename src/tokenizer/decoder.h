// Decoder: turns token strings back into text, as HF tokenizers' decoders do:
// ByteLevel (GPT-2 characters -> bytes, then lossy UTF-8), Replace, ByteFallback
// (<0xXX> runs -> bytes, one U+FFFD per byte when invalid), Fuse, Strip, Metaspace,
// Sequence. Without a decoder, tokens are joined with spaces (HF's behaviour).
//
// Invariants: decode() returns valid UTF-8. Thread safety: immutable after construction.
#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "core/status.h"

namespace vosti {

// How one token piece maps to bytes, as xgrammar's vocabulary types name it: kByteLevel (GPT-2's
// printable alphabet for bytes), kByteFallback ("\u2581" for a space, <0xXX> for a byte: SentencePiece)
// or kRaw (the piece is its own bytes).
enum class PieceEncoding : uint8_t { kRaw, kByteLevel, kByteFallback };

class Decoder {
 public:
  struct Step {
    enum class Kind { kByteLevel, kReplace, kByteFallback, kFuse, kStrip, kMetaspace } kind = Kind::kByteLevel;
    std::string a, b;         // Replace: pattern, content; Strip: content; Metaspace: replacement
    int start = 0, stop = 0;  // Strip
    bool prepend = true;      // Metaspace: strip the first token's leading space
  };

  static Result<Decoder> from_json(const nlohmann::json& j);
  static Decoder byte_level();
  // Replace(▁, " "), ByteFallback, Fuse, and Strip(" ", 1, 0) when strip_leading_space.
  static Decoder sentencepiece(bool strip_leading_space);

  std::string decode(std::vector<std::string> tokens) const;
  // The piece alphabet this decoder reads (a ByteLevel step, else a ByteFallback, Metaspace or
  // "\u2581" Replace step, else raw).
  PieceEncoding piece_encoding() const;

 private:
  Status add(const nlohmann::json& j);
  std::vector<Step> steps_;
  bool present_ = false;
};

}  // namespace vosti
