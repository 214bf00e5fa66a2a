// Grammars for structured outputs, through xgrammar (scripts/fetch-xgrammar): GrammarCache turns a
// StructuredOutputs into a compiled Grammar over one tokenizer's vocabulary (compiled once per
// distinct value, kept in an LRU), and GrammarState is one request's position in it: the set of
// tokens allowed next, as a bitmask (sample/token_bitmask.h), advanced by each committed token.
//
// Determinism: a compiled grammar is a function of (the StructuredOutputs, the vocabulary, the stop
// ids); a GrammarState's mask is a function of the grammar and the tokens accepted since it was
// made, nothing else (xgrammar's masks are exact sets: no thread count, cache or timing reaches
// them). The engine accepts only committed tokens, so the mask at an output position is a pure
// function of the request's committed outputs (preemption and recomputation keep them).
//
// The vocabulary: every id of the model (vocab_size, which may exceed the tokenizer's ids); the
// tokenizer's pieces mapped to bytes by its PieceEncoding; special added tokens, BOS/EOS/UNK/PAD, the
// tokenizer's stop ids and padding ids are never allowed inside the grammar, and `stop_ids` are
// allowed where it may end. A plain (non-special) added token is its content to the grammar, as it
// is to decoding (Qwen's <tool_call>: a forced tool call may open with the model's own token).
//
// Built without xgrammar (its sources absent at configure time) GrammarCache::create fails with
// kUnimplemented naming scripts/fetch-xgrammar.
// Thread safety: GrammarCache::compile may be called from any thread (one mutex); a Grammar is
// immutable and shared; a GrammarState is used by one thread at a time.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "core/status.h"
#include "structured/structured_outputs.h"

namespace vosti {

class Tokenizer;

// A compiled grammar (opaque; xgrammar's CompiledGrammar).
class Grammar {
 public:
  struct Impl;
  explicit Grammar(std::unique_ptr<Impl> impl);
  ~Grammar();
  const Impl& impl() const { return *impl_; }
  int64_t vocab_size() const;

 private:
  std::unique_ptr<Impl> impl_;
};

class GrammarState {
 public:
  // At the grammar's start.
  explicit GrammarState(std::shared_ptr<const Grammar> grammar);
  ~GrammarState();
  GrammarState(const GrammarState&) = delete;
  GrammarState& operator=(const GrammarState&) = delete;

  // 32-bit words of a mask: ceil(vocab_size / 32).
  int32_t mask_words() const { return mask_words_; }
  // Writes the tokens allowed next (bit t % 32 of word t / 32). All zero once terminated.
  // REQUIRES: mask.size() == mask_words().
  void fill_next_mask(std::span<uint32_t> mask);
  // Advances by `token`; false (and no change) if the grammar does not allow it.
  bool accept(int32_t token);
  // Undoes the last `num_tokens` accepted tokens. REQUIRES: that many were accepted.
  void rollback(int32_t num_tokens);
  // A stop token was accepted: nothing may follow.
  bool terminated() const;
  // The grammar could end here (a stop token, or nothing more, completes it).
  bool completed() const;

 private:
  struct Impl;
  std::shared_ptr<const Grammar> grammar_;
  std::unique_ptr<Impl> impl_;
  int32_t mask_words_ = 0;
};

class GrammarCache {
 public:
  // Over `tokenizer`'s pieces and `vocab_size` ids (>= the tokenizer's), ending on `stop_ids`;
  // keeps at most `capacity` compiled grammars. kUnimplemented without xgrammar.
  static Result<std::shared_ptr<GrammarCache>> create(const Tokenizer& tokenizer, int64_t vocab_size,
                                                      std::vector<int32_t> stop_ids, size_t capacity = 64);
  ~GrammarCache();

  // The compiled grammar of `spec` (from the cache when an equal spec was compiled before).
  // INVALID_ARGUMENT naming the problem for a bad schema, regex or grammar, or an unsupported
  // JSON-schema keyword (xgrammar's message).
  Result<std::shared_ptr<const Grammar>> compile(const StructuredOutputs& spec);
  // Compilations done (cache misses) and grammars held: for tests and metrics.
  int64_t num_compiled() const;
  size_t size() const;

  struct Impl;

 private:
  explicit GrammarCache(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// A request's grammar at its start, with the mask of its first output position.
struct StartedGrammar {
  std::unique_ptr<GrammarState> state;
  std::vector<uint32_t> first_mask;  // [mask_words], some token allowed
};

// Compiles `spec` through `cache` and starts it. INVALID_ARGUMENT for a bad spec (the cache's
// errors) and for a grammar that allows no first token.
Result<StartedGrammar> start_grammar(GrammarCache& cache, const StructuredOutputs& spec);

}  // namespace vosti
