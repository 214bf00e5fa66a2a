// Test-only: a random tiny SchedulerConfig (block size, pool size, prefix cache on/off,
// deliberately colliding chain hashes, shuffled layout, sequence cap, token budget),
// shared by the randomised scheduler test and the lockstep refinement test so both
// explore the same configurations from the same seed.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <random>
#include <span>
#include <sstream>
#include <string>

#include "sched/scheduler.h"

namespace vosti::test_support {

// Deliberately weak, colliding hashes (test-only overrides of the chain function).
inline BlockKey weak_chain_hash(const BlockKey& parent, std::span<const int32_t> tokens, uint64_t) {
  uint64_t h = parent.lo * 31;
  for (int32_t t : tokens) h = h * 3 + static_cast<uint64_t>(t);
  return BlockKey{h % 7, 0};
}
inline BlockKey parent_blind_hash(const BlockKey&, std::span<const int32_t> tokens, uint64_t) {
  uint64_t h = 0;
  for (int32_t t : tokens) h += static_cast<uint64_t>(t);
  return BlockKey{h % 3, 0};
}

struct RandomSchedulerConfig {
  SchedulerConfig config;
  std::string description;  // printed with the seed when a run fails
};

// Draws a configuration from `rng` (always the same draws in the same order).
inline RandomSchedulerConfig random_scheduler_config(std::mt19937_64& rng) {
  auto uniform = [&rng](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
  auto pick = [&uniform](std::initializer_list<int32_t> v) {
    return *(v.begin() + uniform(0, static_cast<int64_t>(v.size()) - 1));
  };
  SchedulerConfig c;
  c.pool.block_size = pick({1, 2, 3, 4, 8, 16});
  c.max_model_len = static_cast<int32_t>(uniform(4, 64));
  const int32_t min_blocks = (c.max_model_len + c.pool.block_size - 1) / c.pool.block_size;
  c.pool.num_blocks = min_blocks + uniform(0, 2 * min_blocks);
  c.pool.enable_prefix_caching = uniform(0, 3) != 0;
  c.pool.shuffle_seed = uniform(0, 1) ? rng() | 1 : 0;
  c.pool.identity_seed = rng();
  const int64_t hash_mode = uniform(0, 2);
  c.pool.hash_fn = hash_mode == 0 ? &hash_block : hash_mode == 1 ? &weak_chain_hash : &parent_blind_hash;
  c.max_num_seqs = static_cast<int32_t>(uniform(1, 8));
  c.max_num_batched_tokens = static_cast<int32_t>(uniform(1, 48));
  std::ostringstream d;
  d << "block_size=" << c.pool.block_size << " num_blocks=" << c.pool.num_blocks << " max_model_len=" << c.max_model_len
    << " caching=" << c.pool.enable_prefix_caching << " hash_mode=" << hash_mode << " shuffle=" << c.pool.shuffle_seed
    << " max_num_seqs=" << c.max_num_seqs << " budget=" << c.max_num_batched_tokens;
  return {c, d.str()};
}

}  // namespace vosti::test_support
