// Randomised BlockPool operation sequences over tiny pools, driven directly (no
// scheduler): tables grow (with or without a prefix lookup), register computed blocks,
// and release, with check_invariants() after every operation and a shadow of which
// token prefix each block holds. A failure prints the seed.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "cache/block_pool.h"

namespace vosti {
namespace {

BlockKey tiny_hash(const BlockKey& parent, std::span<const int32_t> tokens, uint64_t) {
  uint64_t h = parent.lo + 1;
  for (int32_t t : tokens) h = h * 5 + static_cast<uint64_t>(t);
  return BlockKey{h % 5, 0};
}

struct Seq {
  BlockTable table;
  std::vector<int32_t> tokens;  // [target length]
  int64_t num_computed = 0;
};

std::string run_seed(uint64_t seed) {
  std::mt19937_64 rng(seed);
  auto uniform = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
  BlockPoolConfig c;
  c.block_size = static_cast<int32_t>(uniform(1, 4));
  c.num_blocks = uniform(1, 12);
  c.enable_prefix_caching = uniform(0, 3) != 0;
  c.shuffle_seed = uniform(0, 1) ? seed : 0;
  c.hash_fn = uniform(0, 1) ? &hash_block : &tiny_hash;
  BlockPool pool = std::move(BlockPool::create(c)).value();
  std::vector<std::vector<int32_t>> shadow(static_cast<size_t>(c.num_blocks));  // [num_blocks] prefix held
  std::vector<Seq> seqs(4);
  auto check = [&](const char* op) -> std::string {
    std::vector<const BlockTable*> tables;
    for (const Seq& s : seqs) tables.push_back(&s.table);
    const Status st = pool.check_invariants(tables);
    return st.ok() ? "" : std::string("after ") + op + ": " + st.to_string();
  };
  const int64_t bs = c.block_size;
  for (int step = 0; step < 3000; ++step) {
    Seq& s = seqs[static_cast<size_t>(uniform(0, 3))];
    const int64_t op = uniform(0, 9);
    if (op == 0) {  // release (and forget)
      pool.release(s.table);
      s = Seq{};
      if (std::string e = check("release"); !e.empty()) return e + " at step " + std::to_string(step);
      continue;
    }
    if (s.tokens.empty()) {  // start: random tokens from a tiny alphabet, then look up the prefix cache
      s.tokens.resize(static_cast<size_t>(uniform(1, 3 * bs + 2)));
      for (int32_t& t : s.tokens) t = static_cast<int32_t>(uniform(0, 1));
      const PrefixMatch m = pool.match_prefix(std::span<const int32_t>(s.tokens).first(s.tokens.size() - 1));
      for (size_t i = 0; i < m.blocks.size(); ++i) {  // a hit must hold exactly this prefix
        const auto& held = shadow[static_cast<size_t>(m.blocks[i])];
        if (held.size() != (i + 1) * bs || !std::equal(held.begin(), held.end(), s.tokens.begin())) {
          return "false prefix hit at step " + std::to_string(step);
        }
      }
      const AllocationPlan plan = pool.plan_allocation(s.table, m, m.num_tokens + 1);
      if (!plan.ok) {
        s = Seq{};
        continue;
      }
      pool.apply(plan, s.table);
      s.num_computed = m.num_tokens;
      if (std::string e = check("apply with hits"); !e.empty()) return e + " at step " + std::to_string(step);
      continue;
    }
    // Grow by a chunk, "compute" it (shadow write, exclusive), then register full blocks.
    const int64_t end = std::min<int64_t>(static_cast<int64_t>(s.tokens.size()), s.num_computed + uniform(1, 2 * bs));
    const AllocationPlan plan = pool.plan_allocation(s.table, {}, end);
    if (!plan.ok) continue;
    pool.apply(plan, s.table);
    if (std::string e = check("apply"); !e.empty()) return e + " at step " + std::to_string(step);
    for (int64_t i = s.num_computed / bs; i * bs < end; ++i) {
      const BlockId b = s.table[static_cast<int32_t>(i)];
      if (pool.ref_count(b) != 1) return "write into a shared block at step " + std::to_string(step);
      shadow[static_cast<size_t>(b)].assign(s.tokens.begin(), s.tokens.begin() + std::min((i + 1) * bs, end));
    }
    s.num_computed = end;
    pool.register_full_blocks(s.table, s.tokens, s.num_computed);
    if (std::string e = check("register"); !e.empty()) return e + " at step " + std::to_string(step);
  }
  return "";
}

TEST(BlockPoolRandomTest, InvariantsAndShadowHoldUnderRandomOperations) {
  for (uint64_t seed = 1; seed <= 200; ++seed) {
    const std::string e = run_seed(seed);
    ASSERT_EQ(e, "") << "seed " << seed;
  }
}

}  // namespace
}  // namespace vosti
