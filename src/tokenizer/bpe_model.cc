#include "tokenizer/bpe_model.h"

#include <algorithm>
#include <cstdio>

#include "tokenizer/utf8.h"

namespace vosti {
namespace {

constexpr size_t kMaxCacheEntries = 1 << 17;

struct Symbol {
  int32_t id;
  int32_t prev;
  int32_t next;
  bool alive;
};

struct QueueItem {
  int32_t rank;
  int32_t pos;
  int32_t new_id;
  // std::push_heap builds a max-heap; "greater" puts the lowest (rank, pos) on top.
  bool operator<(const QueueItem& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
};

}  // namespace

Result<std::unique_ptr<BpeModel>> BpeModel::create(std::vector<std::string> tokens,
                                                   const std::vector<std::pair<std::string, std::string>>& merges,
                                                   Options options) {
  std::unique_ptr<BpeModel> m(new BpeModel());
  m->tokens_ = std::move(tokens);
  m->options_ = options;
  m->index_.reserve(m->tokens_.size());
  for (size_t i = 0; i < m->tokens_.size(); ++i) m->index_.emplace(m->tokens_[i], static_cast<int32_t>(i));
  m->merges_.reserve(merges.size());
  for (size_t r = 0; r < merges.size(); ++r) {
    const auto& [a, b] = merges[r];
    const auto ia = m->token_to_id(a);
    const auto ib = m->token_to_id(b);
    const auto ic = m->token_to_id(a + b);
    if (!ia || !ib || !ic) {
      return invalid_argument("BPE merge #" + std::to_string(r) + " ('" + a + "' '" + b +
                              "') names a token that is not in the vocabulary");
    }
    m->merges_[pair_key(*ia, *ib)] = Merge{static_cast<int32_t>(r), *ic};
  }
  m->all_bytes_present_ = true;
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof(name), "<0x%02X>", b);
    const auto id = m->token_to_id(name);
    m->byte_ids_[static_cast<size_t>(b)] = id ? *id : -1;
    if (!id) m->all_bytes_present_ = false;
  }
  if (options.unk_id && (*options.unk_id < 0 || *options.unk_id >= m->vocab_size())) {
    return invalid_argument("BPE unknown-token id " + std::to_string(*options.unk_id) + " is outside the vocabulary");
  }
  return m;
}

std::optional<int32_t> BpeModel::token_to_id(std::string_view token) const {
  const auto it = index_.find(token);
  if (it == index_.end()) return std::nullopt;
  return it->second;
}

void BpeModel::initial_symbols(std::string_view word, std::vector<int32_t>& ids) const {
  bool last_was_unk = false;
  size_t pos = 0;
  while (pos < word.size()) {
    const size_t start = pos;
    next_code_point(word, pos);
    const std::string_view ch = word.substr(start, pos - start);
    if (const auto id = token_to_id(ch)) {
      ids.push_back(*id);
      last_was_unk = false;
      continue;
    }
    if (options_.byte_fallback) {
      bool all = true;
      for (char c : ch) all = all && byte_ids_[static_cast<uint8_t>(c)] >= 0;
      if (all) {
        for (char c : ch) ids.push_back(byte_ids_[static_cast<uint8_t>(c)]);
        last_was_unk = false;
        continue;
      }
    }
    if (options_.unk_id) {
      if (!(options_.fuse_unk && last_was_unk)) ids.push_back(*options_.unk_id);
      last_was_unk = true;
    }
  }
}

void BpeModel::merge(std::vector<int32_t>& ids) const {
  const auto n = static_cast<int32_t>(ids.size());
  if (n < 2) return;
  std::vector<Symbol> sym(static_cast<size_t>(n));  // [num_symbols]
  for (int32_t i = 0; i < n; ++i)
    sym[static_cast<size_t>(i)] = {ids[static_cast<size_t>(i)], i - 1, i + 1 < n ? i + 1 : -1, true};
  std::vector<QueueItem> heap;
  heap.reserve(static_cast<size_t>(n));
  auto push_pair = [&](int32_t left) {
    const int32_t right = sym[static_cast<size_t>(left)].next;
    if (right < 0) return;
    const auto it = merges_.find(pair_key(sym[static_cast<size_t>(left)].id, sym[static_cast<size_t>(right)].id));
    if (it == merges_.end()) return;
    heap.push_back({it->second.rank, left, it->second.new_id});
    std::push_heap(heap.begin(), heap.end());
  };
  for (int32_t i = 0; i + 1 < n; ++i) push_pair(i);
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end());
    const QueueItem top = heap.back();
    heap.pop_back();
    Symbol& left = sym[static_cast<size_t>(top.pos)];
    if (!left.alive || left.next < 0) continue;
    Symbol& right = sym[static_cast<size_t>(left.next)];
    const auto it = merges_.find(pair_key(left.id, right.id));
    if (it == merges_.end() || it->second.new_id != top.new_id) continue;  // stale entry
    left.id = top.new_id;
    right.alive = false;
    left.next = right.next;
    if (right.next >= 0) sym[static_cast<size_t>(right.next)].prev = top.pos;
    if (left.prev >= 0) push_pair(left.prev);
    push_pair(top.pos);
  }
  ids.clear();
  for (int32_t i = 0; i >= 0; i = sym[static_cast<size_t>(i)].next) ids.push_back(sym[static_cast<size_t>(i)].id);
}

void BpeModel::tokenize(std::string_view word, std::vector<int32_t>& out) const {
  if (word.empty()) return;
  if (options_.ignore_merges) {
    if (const auto id = token_to_id(word)) {
      out.push_back(*id);
      return;
    }
  }
  const bool cacheable = word.size() <= kMaxCachedWordBytes;
  if (cacheable) {
    std::shared_lock lock(cache_mutex_);
    const auto it = cache_.find(word);
    if (it != cache_.end()) {
      out.insert(out.end(), it->second.begin(), it->second.end());
      return;
    }
  }
  std::vector<int32_t> ids;
  ids.reserve(word.size());
  initial_symbols(word, ids);
  merge(ids);
  out.insert(out.end(), ids.begin(), ids.end());
  if (cacheable) {
    std::unique_lock lock(cache_mutex_);
    if (cache_.size() < kMaxCacheEntries) cache_.emplace(std::string(word), std::move(ids));
  }
}

}  // namespace vosti
