// The executable engine model: see engine_model.h. Each function names the Coq
// definition or constructor it mirrors.
#include "verify/refinement/engine_model.h"

#include <algorithm>
#include <set>

namespace vosti::model {

PrefixTrie::PrefixTrie() { nodes_.push_back(Node{-1, 0}); }

int32_t PrefixTrie::child(int32_t id, Token t) {
  const uint64_t key = (static_cast<uint64_t>(static_cast<uint32_t>(id)) << 32) | static_cast<uint32_t>(t);
  auto [it, inserted] = children_.try_emplace(key, static_cast<int32_t>(nodes_.size()));
  if (inserted) nodes_.push_back(Node{id, length(id) + 1});
  return it->second;
}

int32_t PrefixTrie::of(const std::vector<Token>& tokens, size_t n) {
  int32_t id = 0;
  for (size_t i = 0; i < n; ++i) id = child(id, tokens[i]);
  return id;
}

std::vector<Token> Request::tokens() const {
  std::vector<Token> t = prompt;
  t.insert(t.end(), outputs.begin(), outputs.end());
  return t;
}

std::vector<Token> Request::seq() const {
  std::vector<Token> t = tokens();
  t.insert(t.end(), draft.begin(), draft.end());
  return t;
}

namespace {

std::string str(uint64_t v) { return std::to_string(v); }

// Prefix ids of T[0..1), T[0..2), ..., T[0..n): ids[q] is the id of T[0..q].
std::vector<int32_t> prefix_ids(PrefixTrie& trie, const std::vector<Token>& T) {
  std::vector<int32_t> ids(T.size());
  int32_t id = 0;
  for (size_t q = 0; q < T.size(); ++q) ids[q] = id = trie.child(id, T[q]);
  return ids;
}

std::vector<Token> firstn(const std::vector<Token>& T, size_t n) {
  return std::vector<Token>(T.begin(), T.begin() + static_cast<std::ptrdiff_t>(std::min(n, T.size())));
}

}  // namespace

EngineModel::EngineModel(int32_t block_size, int32_t num_blocks, HashFn hash, SampleFn sample, int32_t window)
    : block_size_(block_size),
      num_blocks_(num_blocks),
      window_(window),
      hash_(std::move(hash)),
      sample_(std::move(sample)) {
  s_.ref_count.assign(static_cast<size_t>(num_blocks), 0);
  s_.cached_prefix.assign(static_cast<size_t>(num_blocks), std::nullopt);
}

// Coq: read.
std::optional<Value> EngineModel::read(const std::vector<BlockId>& tbl, int32_t q) const {
  const size_t idx = static_cast<size_t>(q / block_size_);
  if (idx >= tbl.size()) return std::nullopt;
  auto it = s_.kv_mem.find({tbl[idx], q % block_size_});
  if (it == s_.kv_mem.end()) return std::nullopt;
  return it->second;
}

// Coq: read_kv.
std::vector<std::optional<Value>> EngineModel::read_kv(const std::vector<BlockId>& tbl, int32_t n) const {
  std::vector<std::optional<Value>> out;
  out.reserve(static_cast<size_t>(n));
  for (int32_t q = 0; q < n; ++q) out.push_back(read(tbl, q));
  return out;
}

namespace {
// The entries are the KV of one prefix chain: entry q is valid, of length q + 1, and
// extends entry q - 1 (the root for q = 0).
bool is_chain(const PrefixTrie& trie, const std::vector<std::optional<Value>>& kvs, size_t n) {
  for (size_t q = 0; q < n; ++q) {
    if (!kvs[q] || !kvs[q]->valid || trie.length(kvs[q]->prefix) != static_cast<int32_t>(q) + 1) return false;
    if (trie.parent(kvs[q]->prefix) != (q == 0 ? 0 : kvs[q - 1]->prefix)) return false;
  }
  return true;
}
}  // namespace

// The window view holds the full view's entries at positions first .. (the window; before it,
// what the window layers read is ignored: Coq's window hypotheses). Without window-local KV
// the window layers read everything (first = 0).
bool EngineModel::window_agrees(const std::vector<std::optional<Value>>& kvs,
                                const std::vector<std::optional<Value>>& wkvs, int32_t first) const {
  if (!window_local()) first = 0;
  if (wkvs.size() != kvs.size()) return false;
  for (size_t q = static_cast<size_t>(std::max(0, first)); q < kvs.size(); ++q) {
    if (!wkvs[q] || *wkvs[q] != *kvs[q]) return false;
  }
  return true;
}

// Coq: kv_fn, instantiated: the KV of (the prefix the entries belong to) ++ [t], valid only if
// the window layers read the same entries within the window of position p = |kvs|.
Value EngineModel::kv_fn(Token t, const std::vector<std::optional<Value>>& kvs,
                         const std::vector<std::optional<Value>>& wkvs) {
  if (!is_chain(trie_, kvs, kvs.size())) return Value{};
  if (!window_agrees(kvs, wkvs, static_cast<int32_t>(kvs.size()) + 1 - window_)) return Value{};
  return Value{true, trie_.child(kvs.empty() ? 0 : kvs.back()->prefix, t)};
}

// Coq: logits_fn, instantiated: the logits at t identify the whole prefix 0..p.
Value EngineModel::logits_fn(Token t, const std::vector<std::optional<Value>>& kvs,
                             const std::vector<std::optional<Value>>& wkvs) {
  if (kvs.empty() || !is_chain(trie_, kvs, kvs.size())) return Value{};
  if (!window_agrees(kvs, wkvs, static_cast<int32_t>(kvs.size()) - window_)) return Value{};
  const int32_t before = kvs.size() == 1 ? 0 : kvs[kvs.size() - 2]->prefix;
  if (trie_.child(before, t) != kvs.back()->prefix) return Value{};
  return Value{true, kvs.back()->prefix};
}

// Coq: step_arrive.
std::string EngineModel::step_arrive(RequestIdM x, std::vector<Token> p, uint64_t ss) {
  if (std::find(s_.request_ids.begin(), s_.request_ids.end(), x) != s_.request_ids.end()) {
    return "step_arrive: id " + str(x) + " already admitted";
  }
  if (p.empty()) return "step_arrive: empty prompt";
  Request r;
  r.prompt = std::move(p);
  r.sampler = ss;
  s_.requests.emplace(x, std::move(r));
  s_.request_ids.insert(s_.request_ids.begin(), x);
  return "";
}

// Coq: step_allocate.
std::string EngineModel::step_allocate(RequestIdM x, BlockId b) {
  auto it = s_.requests.find(x);
  if (it == s_.requests.end() || it->second.finished) return "step_allocate: request " + str(x) + " not live";
  if (b < 0 || b >= num_blocks_) return "step_allocate: block " + std::to_string(b) + " out of range";
  if (s_.ref_count[static_cast<size_t>(b)] != 0) {
    return "step_allocate: block " + std::to_string(b) + " has ref count " +
           std::to_string(s_.ref_count[static_cast<size_t>(b)]) + " (reused before it reached 0)";
  }
  it->second.block_table.push_back(b);
  s_.ref_count[static_cast<size_t>(b)] = 1;
  s_.cached_prefix[static_cast<size_t>(b)].reset();
  return "";
}

// Coq: step_hit.
std::string EngineModel::step_hit(RequestIdM x, BlockId b) {
  auto it = s_.requests.find(x);
  if (it == s_.requests.end() || it->second.finished) return "step_hit: request " + str(x) + " not live";
  Request& r = it->second;
  const int32_t L = static_cast<int32_t>(r.block_table.size());
  const std::vector<Token> T = r.tokens();
  if (r.num_computed != L * block_size_) return "step_hit: num_computed is not the table's end";
  if (r.window_table.size() > r.block_table.size()) return "step_hit: the window table is ahead of the block table";
  if ((L + 1) * block_size_ > static_cast<int32_t>(T.size())) return "step_hit: the hit block is not full";
  if (b < 0 || b >= num_blocks_) return "step_hit: block out of range";
  const std::vector<Token> pre = firstn(T, static_cast<size_t>((L + 1) * block_size_));
  auto k = s_.key_map.find(hash_(pre));
  if (k == s_.key_map.end() || k->second != b) return "step_hit: key_map does not map the prefix's key to the block";
  if (s_.cached_prefix[static_cast<size_t>(b)] != pre) {
    return "step_hit: block " + std::to_string(b) + "'s stored prefix differs from the request's (false hit)";
  }
  r.block_table.push_back(b);
  s_.ref_count[static_cast<size_t>(b)] += 1;
  r.num_computed = (L + 1) * block_size_;
  return "";
}

// Coq: step_register.
std::string EngineModel::step_register(RequestIdM x, int32_t j, BlockId b) {
  auto it = s_.requests.find(x);
  if (it == s_.requests.end()) return "step_register: unknown request " + str(x);
  const Request& r = it->second;
  if (j < 0 || j >= static_cast<int32_t>(r.block_table.size()) || r.block_table[static_cast<size_t>(j)] != b) {
    return "step_register: block " + std::to_string(b) + " is not block " + std::to_string(j) + " of the table";
  }
  if ((j + 1) * block_size_ > r.num_computed)
    return "step_register: block is not full and computed (partial block shared)";
  std::vector<Token> pre = firstn(r.tokens(), static_cast<size_t>((j + 1) * block_size_));
  s_.key_map[hash_(pre)] = b;
  s_.cached_prefix[static_cast<size_t>(b)] = std::move(pre);
  return "";
}

// Coq: step_draft.
std::string EngineModel::step_draft(RequestIdM x, std::vector<Token> d) {
  auto it = s_.requests.find(x);
  if (it == s_.requests.end() || it->second.finished) return "step_draft: request " + str(x) + " not live";
  it->second.draft = std::move(d);
  return "";
}

// Coq: step_truncate.
std::string EngineModel::step_truncate(RequestIdM x, int32_t n) {
  auto it = s_.requests.find(x);
  if (it == s_.requests.end() || it->second.finished) return "step_truncate: request " + str(x) + " not live";
  Request& r = it->second;
  if (n < 0 || r.num_computed > n * block_size_) {
    return "step_truncate: keeping " + std::to_string(n) + " blocks drops computed positions (" +
           std::to_string(r.num_computed) + " computed)";
  }
  while (static_cast<int32_t>(r.block_table.size()) > n) {
    s_.ref_count[static_cast<size_t>(r.block_table.back())] -= 1;
    r.block_table.pop_back();
  }
  return "";
}

// Coq: held (the entries counted in ref_count).
std::vector<BlockId> EngineModel::held(const Request& r) const {
  std::vector<BlockId> h = r.block_table;
  h.insert(h.end(), r.window_table.begin() + r.window_released, r.window_table.end());
  return h;
}

// Coq: step_window_allocate.
std::string EngineModel::step_window_allocate(RequestIdM x, BlockId b) {
  auto it = s_.requests.find(x);
  if (!window_local()) return "step_window_allocate: no window-local KV";
  if (it == s_.requests.end() || it->second.finished) return "step_window_allocate: request " + str(x) + " not live";
  Request& r = it->second;
  if (b < 0 || b >= num_blocks_) return "step_window_allocate: block out of range";
  if (s_.ref_count[static_cast<size_t>(b)] != 0) {
    return "step_window_allocate: block " + std::to_string(b) + " has ref count " +
           std::to_string(s_.ref_count[static_cast<size_t>(b)]) + " (reused before it reached 0)";
  }
  if (r.num_computed > static_cast<int32_t>(r.window_table.size()) * block_size_)
    return "step_window_allocate: a fresh block inside the computed positions";
  r.window_table.push_back(b);
  s_.ref_count[static_cast<size_t>(b)] = 1;
  s_.cached_prefix[static_cast<size_t>(b)].reset();
  return "";
}

// Coq: step_window_hit.
std::string EngineModel::step_window_hit(RequestIdM x, BlockId b) {
  auto it = s_.requests.find(x);
  if (!window_local()) return "step_window_hit: no window-local KV";
  if (it == s_.requests.end() || it->second.finished) return "step_window_hit: request " + str(x) + " not live";
  Request& r = it->second;
  const auto end = static_cast<int32_t>(r.window_table.size() + 1) * block_size_;
  if (end > r.num_computed) return "step_window_hit: the hit block is not within the computed positions";
  if (b < 0 || b >= num_blocks_) return "step_window_hit: block out of range";
  if (s_.cached_prefix[static_cast<size_t>(b)] != firstn(r.tokens(), static_cast<size_t>(end))) {
    return "step_window_hit: block " + std::to_string(b) + "'s stored prefix differs from the request's (false hit)";
  }
  r.window_table.push_back(b);
  s_.ref_count[static_cast<size_t>(b)] += 1;
  return "";
}

// Coq: step_window_hole.
std::string EngineModel::step_window_hole(RequestIdM x) {
  auto it = s_.requests.find(x);
  if (!window_local()) return "step_window_hole: no window-local KV";
  if (it == s_.requests.end() || it->second.finished) return "step_window_hole: request " + str(x) + " not live";
  Request& r = it->second;
  if (r.window_released != static_cast<int32_t>(r.window_table.size()))
    return "step_window_hole: a hole after a held entry";
  if (static_cast<int32_t>(r.window_table.size()) >= first_window_block(r.num_computed))
    return "step_window_hole: a hole at an entry the window still reads";
  r.window_table.push_back(0);
  r.window_released += 1;
  return "";
}

// Coq: step_window_register.
std::string EngineModel::step_window_register(RequestIdM x, int32_t j, BlockId b) {
  auto it = s_.requests.find(x);
  if (it == s_.requests.end()) return "step_window_register: unknown request " + str(x);
  const Request& r = it->second;
  if (j < r.window_released || j >= static_cast<int32_t>(r.window_table.size()) ||
      r.window_table[static_cast<size_t>(j)] != b) {
    return "step_window_register: block " + std::to_string(b) + " is not held entry " + std::to_string(j) +
           " of the window table";
  }
  if ((j + 1) * block_size_ > r.num_computed)
    return "step_window_register: block is not full and computed (partial block shared)";
  s_.cached_prefix[static_cast<size_t>(b)] = firstn(r.tokens(), static_cast<size_t>((j + 1) * block_size_));
  return "";
}

// Coq: step_window_release (its block b is the first held entry).
std::string EngineModel::step_window_release(RequestIdM x) {
  auto it = s_.requests.find(x);
  if (it == s_.requests.end() || it->second.finished) return "step_window_release: request " + str(x) + " not live";
  Request& r = it->second;
  if (r.window_released >= static_cast<int32_t>(r.window_table.size())) return "step_window_release: no held entry";
  if (r.window_released >= first_window_block(r.num_computed)) {
    return "step_window_release: entry " + std::to_string(r.window_released) +
           " is still read by a query at position " + std::to_string(r.num_computed) + " (inside the window)";
  }
  s_.ref_count[static_cast<size_t>(r.window_table[static_cast<size_t>(r.window_released)])] -= 1;
  r.window_released += 1;
  return "";
}

// Coq: step_window_truncate.
std::string EngineModel::step_window_truncate(RequestIdM x, int32_t n) {
  auto it = s_.requests.find(x);
  if (!window_local()) return "step_window_truncate: no window-local KV";
  if (it == s_.requests.end() || it->second.finished) return "step_window_truncate: request " + str(x) + " not live";
  Request& r = it->second;
  if (n < r.window_released) {
    return "step_window_truncate: keeping " + std::to_string(n) + " entries cuts into the " +
           std::to_string(r.window_released) + " released ones";
  }
  if (r.num_computed > n * block_size_) {
    return "step_window_truncate: keeping " + std::to_string(n) + " entries drops computed positions (" +
           std::to_string(r.num_computed) + " computed)";
  }
  while (static_cast<int32_t>(r.window_table.size()) > n) {
    s_.ref_count[static_cast<size_t>(r.window_table.back())] -= 1;
    r.window_table.pop_back();
  }
  return "";
}

// Coq: step_release.
std::string EngineModel::step_release(RequestIdM x, bool fin) {
  auto it = s_.requests.find(x);
  if (it == s_.requests.end() || it->second.finished) return "step_release: request " + str(x) + " not live";
  Request& r = it->second;
  for (BlockId b : held(r)) s_.ref_count[static_cast<size_t>(b)] -= 1;
  r.block_table.clear();
  r.window_table.clear();
  r.window_released = 0;
  r.num_computed = 0;
  r.finished = fin;
  return "";
}

// Coq: rows_ok (cnt computed incrementally).
std::string EngineModel::rows_ok(const std::vector<Row>& batch) const {
  std::map<RequestIdM, int32_t> seen;
  for (size_t k = 0; k < batch.size(); ++k) {
    const Row& row = batch[k];
    if (row.r_pad) continue;
    auto it = s_.requests.find(row.r_req);
    const std::string at = "rows_ok: row " + std::to_string(k) + " of request " + str(row.r_req) + ": ";
    if (it == s_.requests.end() || it->second.finished) return at + "request not live";
    const Request& r = it->second;
    const std::vector<Token> T = r.seq();
    if (row.r_pos != r.num_computed + seen[row.r_req]) return at + "not the next uncomputed position";
    if (row.r_pos >= static_cast<int32_t>(T.size())) return at + "position past the request's tokens and draft";
    if (row.r_pos >= static_cast<int32_t>(r.block_table.size()) * block_size_)
      return at + "position past the block table";
    if (row.r_tok != T[static_cast<size_t>(row.r_pos)]) return at + "wrong token";
    if (row.r_table != r.block_table) return at + "not the request's block table";
    if (row.r_wtable != window_view(r)) return at + "not the request's window view";
    if (window_local() && row.r_pos >= static_cast<int32_t>(r.window_table.size()) * block_size_)
      return at + "position past the window table";
    ++seen[row.r_req];
  }
  return "";
}

// Coq: bounds_ok. Requests without rows are skipped: for them the guard is
// ri_computed_tokens / ri_computed_table, which check_inv() verifies. Rows are consecutive
// from num_computed (rows_ok), so a chunk that goes past the known tokens from
// num_computed < |T| holds the row of the last known token (Coq's find_row <> None).
std::string EngineModel::bounds_ok(const std::map<RequestIdM, int32_t>& counts) const {
  for (const auto& [x, n] : counts) {
    const Request& r = s_.requests.at(x);
    const int32_t end = r.num_computed + n;
    const auto num_tokens = static_cast<int32_t>(r.prompt.size() + r.outputs.size());
    if (end > num_tokens + static_cast<int32_t>(r.draft.size()) ||
        end > static_cast<int32_t>(r.block_table.size()) * block_size_) {
      return "bounds_ok: request " + str(x) + " computes past its tokens and draft or its table";
    }
    if (end > num_tokens && r.num_computed >= num_tokens) {
      return "bounds_ok: request " + str(x) + " computes draft rows without its last known token";
    }
  }
  return "";
}

// Coq: step_forward (write_rows, then advance). advance is the identity for requests
// without rows (cnt = 0, find_row finds nothing), so only requests with rows are visited.
std::string EngineModel::step_forward(const std::vector<Row>& batch, std::vector<Emission>* emitted_out) {
  if (std::string e = rows_ok(batch); !e.empty()) return e;
  std::map<RequestIdM, int32_t> counts;  // cnt x batch, for x with rows
  for (const Row& row : batch) {
    if (!row.r_pad) ++counts[row.r_req];
  }
  if (std::string e = bounds_ok(counts); !e.empty()) return e;
  for (const Row& row : batch) {  // write_rows: kernel_kv through the contract
    if (row.r_pad) continue;
    const Value v = kv_fn(row.r_tok, read_kv(row.r_table, row.r_pos), read_kv(row.r_wtable, row.r_pos));
    const size_t idx = static_cast<size_t>(row.r_pos / block_size_);  // write_row: both tables
    s_.kv_mem[{row.r_table[idx], row.r_pos % block_size_}] = v;
    s_.kv_mem[{row.r_wtable[idx], row.r_pos % block_size_}] = v;
  }
  for (const auto& [x, n] : counts) {  // advance
    Request& r = s_.requests.at(x);
    const int32_t end = r.num_computed + n;
    const std::vector<Token> d = r.draft;
    bool emitted = false;
    for (size_t i = 0;; ++i) {  // verify: the row of the last known token, then each accepted draft's
      const std::vector<Token> T = r.tokens();
      const Row* last = nullptr;  // find_row x (|T| - 1)
      for (const Row& row : batch) {
        if (!row.r_pad && row.r_req == x && row.r_pos == static_cast<int32_t>(T.size()) - 1) {
          last = &row;
          break;
        }
      }
      if (last == nullptr) break;
      const Value lg =
          logits_fn(last->r_tok, read_kv(last->r_table, last->r_pos + 1), read_kv(last->r_wtable, last->r_pos + 1));
      const Token t = sample_(lg, r.sampler, static_cast<int32_t>(r.outputs.size()), T);
      r.outputs.push_back(t);  // emit
      r.output_logits.push_back(lg);
      r.draft.clear();
      emitted = true;
      if (emitted_out != nullptr) emitted_out->push_back(Emission{x, lg, t});
      if (i >= d.size() || d[i] != t) break;  // accepted iff equal
    }
    // Only verified positions count as computed: the rows of rejected drafts are rolled back.
    r.num_computed = emitted ? std::min(end, static_cast<int32_t>(r.prompt.size() + r.outputs.size()) - 1) : end;
  }
  return "";
}

// Coq: req_inv (ri_computed_tokens, ri_computed_table, ri_slots, ri_private, ri_outputs).
std::string EngineModel::check_request(RequestIdM x, Request& r) {
  const std::string at = "inv_requests: request " + str(x) + ": ";
  const std::vector<Token> T = r.tokens();
  const std::vector<int32_t> ids = prefix_ids(trie_, T);
  if (r.num_computed > static_cast<int32_t>(T.size())) return at + "ri_computed_tokens";
  if (r.num_computed > static_cast<int32_t>(r.block_table.size()) * block_size_) return at + "ri_computed_table";
  for (int32_t q = 0; q < r.num_computed; ++q) {
    const std::optional<Value> v = read(r.block_table, q);
    if (!v || *v != Value{true, ids[static_cast<size_t>(q)]}) {
      return at + "ri_slots: position " + std::to_string(q) + " does not read the KV of its own prefix";
    }
  }
  for (size_t j = 0; j < r.block_table.size(); ++j) {
    const BlockId b = r.block_table[j];
    if (r.num_computed < (static_cast<int32_t>(j) + 1) * block_size_ &&
        (s_.cached_prefix[static_cast<size_t>(b)].has_value() || s_.ref_count[static_cast<size_t>(b)] != 1)) {
      return at + "ri_private: block " + std::to_string(b) + " may still be written but is shared or cached";
    }
  }
  if (!window_local() && (!r.window_table.empty() || r.window_released != 0)) return at + "ri_wnone";
  if (r.window_released > first_window_block(r.num_computed)) return at + "ri_wrel: a released entry the window reads";
  if (r.window_released > static_cast<int32_t>(r.window_table.size())) return at + "ri_wrel_len";
  for (int32_t q = 0; q < r.num_computed; ++q) {
    const int32_t j = q / block_size_;
    if (j < r.window_released || j >= static_cast<int32_t>(r.window_table.size())) continue;
    const std::optional<Value> v = read(r.window_table, q);
    if (!v || *v != Value{true, ids[static_cast<size_t>(q)]}) {
      return at + "ri_wslots: window position " + std::to_string(q) + " does not read the KV of its own prefix";
    }
  }
  for (size_t j = static_cast<size_t>(r.window_released); j < r.window_table.size(); ++j) {
    const BlockId b = r.window_table[j];
    if (r.num_computed < (static_cast<int32_t>(j) + 1) * block_size_ &&
        (s_.cached_prefix[static_cast<size_t>(b)].has_value() || s_.ref_count[static_cast<size_t>(b)] != 1)) {
      return at + "ri_wprivate: window block " + std::to_string(b) + " may still be written but is shared or cached";
    }
  }
  if (r.output_logits.size() != r.outputs.size()) return at + "ri_outputs: logits and outputs differ in length";
  for (size_t i = 0; i < r.outputs.size(); ++i) {
    const Value expected{true, ids[r.prompt.size() + i - 1]};  // F_D(prompt ++ outputs[0..i))
    if (r.output_logits[i] != expected)
      return at + "ri_outputs: logits at output " + std::to_string(i) + " are not F_D";
    const std::vector<Token> history = firstn(T, r.prompt.size() + i);
    if (r.outputs[i] != sample_(expected, r.sampler, static_cast<int32_t>(i), history)) {
      return at + "ri_outputs: token at output " + std::to_string(i) + " is not Sample_D";
    }
  }
  return "";
}

// Coq: inv.
std::string EngineModel::check_inv() {
  const std::set<RequestIdM> ids(s_.request_ids.begin(), s_.request_ids.end());
  if (ids.size() != s_.request_ids.size()) return "inv_nodup";
  if (ids.size() != s_.requests.size()) return "inv_ids";
  for (RequestIdM x : ids) {
    if (!s_.requests.contains(x)) return "inv_ids";
  }
  std::vector<int32_t> held(static_cast<size_t>(num_blocks_), 0);  // tables holding each block
  for (const auto& [x, r] : s_.requests) {
    for (BlockId b : this->held(r)) ++held[static_cast<size_t>(b)];
  }
  for (BlockId b = 0; b < num_blocks_; ++b) {
    if (s_.ref_count[static_cast<size_t>(b)] != held[static_cast<size_t>(b)]) {
      return "inv_ref_count: block " + std::to_string(b) + " has ref count " +
             std::to_string(s_.ref_count[static_cast<size_t>(b)]) + " but " +
             std::to_string(held[static_cast<size_t>(b)]) + " holders";
    }
    const auto& pre = s_.cached_prefix[static_cast<size_t>(b)];
    if (!pre) continue;
    const int32_t len = static_cast<int32_t>(pre->size());
    if (len < block_size_ || len % block_size_ != 0) return "inv_cached: block " + std::to_string(b) + " is not full";
    const std::vector<int32_t> pids = prefix_ids(trie_, *pre);
    for (int32_t o = 0; o < block_size_; ++o) {
      auto it = s_.kv_mem.find({b, o});
      if (it == s_.kv_mem.end() || it->second != Value{true, pids[static_cast<size_t>(len - block_size_ + o)]}) {
        return "inv_cached: block " + std::to_string(b) + " slot " + std::to_string(o) + " is not the KV of its prefix";
      }
    }
  }
  for (auto& [x, r] : s_.requests) {
    if (r.finished && checked_final_.contains(x)) continue;  // no transition changes a finished request
    if (std::string e = check_request(x, r); !e.empty()) return e;
    if (r.finished) checked_final_.insert(x);
  }
  return "";
}

}  // namespace vosti::model
