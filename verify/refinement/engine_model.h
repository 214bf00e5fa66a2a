// EngineModel: an executable copy of the Coq model in verify/model/EngineModel.v, name
// for name, for the lockstep refinement test (tests/verify/refinement_test.cc). Each
// transition step_* checks exactly the guard of the Coq constructor of the same name
// and applies the same effect; check_inv() evaluates the Coq invariant `inv` field by
// field. A C++ engine behaviour that no step_* accepts, or a state that breaks check_inv,
// is a refinement failure: the proof would not cover it.
//
// The logical kernel functions are instantiated with the most discriminating choice: a
// KV entry (and a logits vector) IS the exact token prefix it belongs to, interned in a
// trie (PrefixTrie), and is valid only if the entries it was computed from were the KV
// of its own prefix. So a wrong read anywhere shows up as an invalid or different value.
//
// Window-local KV (window > 0) is Coq's window_local = true: one pool of num_blocks holds both
// tables' blocks (the caller maps the C++ window pool after the full one), and kv_fn / logits_fn
// are valid only if the window view holds the full chain's entries within the window.
//
// Invariants: none beyond the Coq ones; step_* leave the state unchanged when their guard
// fails. Thread safety: none (a test-local value).
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "cache/block_key.h"
#include "cache/block_table.h"

namespace vosti::model {

using Token = int32_t;
using RequestIdM = uint64_t;

// Interned token prefixes: id 0 is the empty prefix; child(id, t) is prefix(id) ++ [t].
class PrefixTrie {
 public:
  PrefixTrie();
  int32_t child(int32_t id, Token t);                      // interns on first use
  int32_t of(const std::vector<Token>& tokens, size_t n);  // id of tokens[0..n)
  int32_t parent(int32_t id) const { return nodes_[static_cast<size_t>(id)].parent; }
  int32_t length(int32_t id) const { return nodes_[static_cast<size_t>(id)].length; }

 private:
  struct Node {
    int32_t parent = -1;
    int32_t length = 0;
  };
  std::vector<Node> nodes_;                         // [num_prefixes]
  std::unordered_map<uint64_t, int32_t> children_;  // (parent << 32 | token) -> id
};

// A KV entry or a logits vector: the prefix it was computed for, or invalid.
struct Value {
  bool valid = false;
  int32_t prefix = 0;  // PrefixTrie id (positions 0..p for KV of position p)
  friend bool operator==(const Value&, const Value&) = default;
};

// Coq: Row.
struct Row {
  RequestIdM r_req = 0;
  bool r_pad = false;
  int32_t r_pos = 0;
  Token r_tok = 0;
  std::vector<BlockId> r_table;
  std::vector<BlockId> r_wtable;  // what the window layers read: window_view (the block table without window-local KV)
};

// Coq: Request.
struct Request {
  std::vector<Token> prompt;
  uint64_t sampler = 0;  // the sampler state (seed)
  std::vector<Token> outputs;
  std::vector<Value> output_logits;  // [outputs]
  int32_t num_computed = 0;
  std::vector<BlockId> block_table;
  bool finished = false;
  std::vector<Token> draft;           // speculative decoding: draft tokens after the known ones
  std::vector<BlockId> window_table;  // window-local KV: the window layers' table
  int32_t window_released = 0;        // its leading entries released (kNoBlock in C++)

  std::vector<Token> tokens() const;  // prompt ++ outputs
  std::vector<Token> seq() const;     // Coq seq_of: tokens() ++ draft
};

// Coq: State. kv_mem is the finite map (block, slot) -> KV entry; absent = never written.
struct State {
  std::map<RequestIdM, Request> requests;
  std::vector<RequestIdM> request_ids;
  std::map<std::pair<BlockId, int32_t>, Value> kv_mem;
  std::vector<int32_t> ref_count;                                // [num_blocks]
  std::vector<std::optional<std::vector<Token>>> cached_prefix;  // [num_blocks]
  std::unordered_map<BlockKey, BlockId, BlockKeyHasher> key_map;
};

// Sample_D(logits, sampler state, output index, token history).
using SampleFn = std::function<Token(const Value&, uint64_t, int32_t, const std::vector<Token>&)>;
// hash: the prefix-cache key of a full-block prefix.
using HashFn = std::function<BlockKey(const std::vector<Token>&)>;

// What step_forward emitted for one request (a verify chunk emits several, in order).
struct Emission {
  RequestIdM id = 0;
  Value logits;
  Token token = 0;
};

class EngineModel {
 public:
  // window > 0: window-local KV (Coq window_local = true) with window layers reading `window` positions.
  EngineModel(int32_t block_size, int32_t num_blocks, HashFn hash, SampleFn sample, int32_t window = 0);

  const State& state() const { return s_; }
  int32_t block_size() const { return block_size_; }
  bool window_local() const { return window_ > 0; }
  // Coq window_view: the table a row's window layers read.
  const std::vector<BlockId>& window_view(const Request& r) const {
    return window_local() ? r.window_table : r.block_table;
  }
  // Coq first_window_block.
  int32_t first_window_block(int32_t c) const { return std::max(0, c + 1 - window_) / block_size_; }

  // The transitions; "" when the guard held and the effect was applied, else which guard
  // failed (the state is then unchanged).
  std::string step_arrive(RequestIdM x, std::vector<Token> p, uint64_t ss);
  std::string step_allocate(RequestIdM x, BlockId b);
  std::string step_hit(RequestIdM x, BlockId b);
  std::string step_register(RequestIdM x, int32_t j, BlockId b);
  std::string step_draft(RequestIdM x, std::vector<Token> d);
  std::string step_truncate(RequestIdM x, int32_t n);
  std::string step_window_allocate(RequestIdM x, BlockId b);
  std::string step_window_hit(RequestIdM x, BlockId b);
  std::string step_window_hole(RequestIdM x);
  std::string step_window_register(RequestIdM x, int32_t j, BlockId b);
  std::string step_window_release(RequestIdM x);
  std::string step_window_truncate(RequestIdM x, int32_t n);
  std::string step_release(RequestIdM x, bool fin);
  std::string step_forward(const std::vector<Row>& batch, std::vector<Emission>* emitted);

  // The Coq invariant `inv`, field by field; "" or the first violated field.
  std::string check_inv();

  // F_D(ts) for the trie instantiation: the valid value of the whole prefix.
  Value F_D(const std::vector<Token>& ts) { return Value{true, trie_.of(ts, ts.size())}; }
  // kv_at(T, q): the KV entry of position q of T.
  Value kv_at(const std::vector<Token>& T, int32_t q) { return Value{true, trie_.of(T, static_cast<size_t>(q) + 1)}; }

 private:
  std::optional<Value> read(const std::vector<BlockId>& tbl, int32_t q) const;
  std::vector<std::optional<Value>> read_kv(const std::vector<BlockId>& tbl, int32_t n) const;
  Value kv_fn(Token t, const std::vector<std::optional<Value>>& kvs, const std::vector<std::optional<Value>>& wkvs);
  Value logits_fn(Token t, const std::vector<std::optional<Value>>& kvs, const std::vector<std::optional<Value>>& wkvs);
  bool window_agrees(const std::vector<std::optional<Value>>& kvs, const std::vector<std::optional<Value>>& wkvs,
                     int32_t first) const;
  std::vector<BlockId> held(const Request& r) const;
  std::string rows_ok(const std::vector<Row>& batch) const;
  std::string bounds_ok(const std::map<RequestIdM, int32_t>& counts) const;  // counts: cnt x batch
  std::string check_request(RequestIdM x, Request& r);

  int32_t block_size_;
  int32_t num_blocks_;
  int32_t window_;  // 0: no window-local KV
  HashFn hash_;
  SampleFn sample_;
  PrefixTrie trie_;
  State s_;
  std::set<RequestIdM> checked_final_;  // finished requests already checked (they never change)
};

}  // namespace vosti::model
