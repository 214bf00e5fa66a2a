// BpeModel: byte-pair encoding of one pre-tokenized word, as HF tokenizers' BPE model:
// characters looked up in the vocabulary (with SentencePiece byte fallback <0xXX> or an
// unknown token when absent), then the lowest-ranked adjacent pair merged first
// (leftmost on ties) until no ranked pair remains; ignore_merges returns a whole word
// that is itself a token directly (Llama 3).
//
// Invariants: every merge's left, right and merged token are in the vocabulary; ids are
// in [0, vocab_size()). Merging uses a binary heap over a linked list of symbols:
// O(n log n) per word. Words up to kMaxCachedWordBytes are cached.
// Thread safety: tokenize() is safe to call concurrently (the cache is mutex-guarded).
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/status.h"

namespace vosti {

struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
using TokenIndex = std::unordered_map<std::string, int32_t, StringHash, std::equal_to<>>;

class BpeModel {
 public:
  struct Options {
    bool byte_fallback = false;     // unknown characters become <0xXX> byte tokens
    std::optional<int32_t> unk_id;  // otherwise the unknown token (or dropped when absent, as HF)
    bool fuse_unk = false;          // consecutive unknowns become one
    bool ignore_merges = false;     // a word that is a token is emitted whole
  };
  static constexpr size_t kMaxCachedWordBytes = 128;

  // tokens[id] is the token text (in the model's alphabet); merges in rank order
  // (rank = index; a repeated pair takes its last rank, as HF). INVALID_ARGUMENT when a
  // merge names a token that is not in the vocabulary.
  static Result<std::unique_ptr<BpeModel>> create(std::vector<std::string> tokens,
                                                  const std::vector<std::pair<std::string, std::string>>& merges,
                                                  Options options);

  // Appends the ids of `word` to out.
  void tokenize(std::string_view word, std::vector<int32_t>& out) const;
  std::optional<int32_t> token_to_id(std::string_view token) const;
  // REQUIRES: 0 <= id < vocab_size().
  const std::string& id_to_token(int32_t id) const { return tokens_[static_cast<size_t>(id)]; }
  int64_t vocab_size() const { return static_cast<int64_t>(tokens_.size()); }

 private:
  struct Merge {
    int32_t rank;
    int32_t new_id;
  };
  static uint64_t pair_key(int32_t a, int32_t b) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
  }
  void initial_symbols(std::string_view word, std::vector<int32_t>& ids) const;
  void merge(std::vector<int32_t>& ids) const;

  std::vector<std::string> tokens_;  // [vocab_size]
  TokenIndex index_;
  std::unordered_map<uint64_t, Merge> merges_;
  std::array<int32_t, 256> byte_ids_{};  // <0xXX> token ids, -1 when absent
  bool all_bytes_present_ = false;
  Options options_;

  mutable std::shared_mutex cache_mutex_;
  mutable std::unordered_map<std::string, std::vector<int32_t>, StringHash, std::equal_to<>> cache_;
};

}  // namespace vosti
