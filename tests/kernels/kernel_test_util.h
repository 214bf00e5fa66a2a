// Shared helpers of the kernel tests: random tensors, error norms and a paged KV
// cache that holds given logical KV in a shuffled physical block layout.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

#include "kernels/kernel_backend.h"

namespace vosti::testing {

// n floats uniform in [lo, hi), reproducible from seed.
inline std::vector<float> random_floats(size_t n, uint64_t seed, float lo = -1.0f, float hi = 1.0f) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

// ||a - b|| / ||b|| in double.
inline double rel_error(const float* a, const float* b, size_t n) {
  double num = 0.0, den = 0.0;
  for (size_t i = 0; i < n; ++i) {
    const double d = static_cast<double>(a[i]) - static_cast<double>(b[i]);
    num += d * d;
    den += static_cast<double>(b[i]) * static_cast<double>(b[i]);
  }
  return den == 0.0 ? std::sqrt(num) : std::sqrt(num / den);
}

inline bool bits_equal(const float* a, const float* b, size_t n) { return std::memcmp(a, b, n * sizeof(float)) == 0; }

// One layer's paged KV pool whose physical blocks hold one or more sequences.
// Unused slots are filled with garbage (1e4), so reading a wrong slot shows up.
struct PagedPool {
  std::vector<float> k;  // [num_blocks, block_size, num_kv_heads, head_dim]
  std::vector<float> v;  // same shape
  PagedKvView view;

  PagedPool(int64_t num_blocks, int block_size, int num_kv_heads, int head_dim) {
    const size_t total = static_cast<size_t>(num_blocks) * block_size * num_kv_heads * head_dim;
    k.assign(total, 1e4f);
    v.assign(total, -1e4f);
    view = PagedKvView{k.data(), v.data(), num_blocks, block_size, num_kv_heads, head_dim};
  }
  PagedPool(const PagedPool&) = delete;
  PagedPool& operator=(const PagedPool&) = delete;

  // Copies logical KV k_log/v_log [len, num_kv_heads, head_dim] into the given blocks
  // (block_table[len / block_size rounded up]) with plain memcpy (no backend involved).
  void place(const std::vector<float>& k_log, const std::vector<float>& v_log, int64_t len,
             const std::vector<int32_t>& block_table) {
    const int64_t row = static_cast<int64_t>(view.num_kv_heads) * view.head_dim;
    for (int64_t j = 0; j < len; ++j) {
      const int64_t slot =
          static_cast<int64_t>(block_table[static_cast<size_t>(j / view.block_size)]) * view.block_size +
          j % view.block_size;
      std::memcpy(k.data() + slot * row, k_log.data() + j * row, sizeof(float) * static_cast<size_t>(row));
      std::memcpy(v.data() + slot * row, v_log.data() + j * row, sizeof(float) * static_cast<size_t>(row));
    }
  }
};

// A random permutation of [0, num_blocks) split into consecutive block tables of the given block counts.
inline std::vector<std::vector<int32_t>> shuffled_block_tables(int64_t num_blocks, const std::vector<int64_t>& counts,
                                                               uint64_t seed) {
  std::vector<int32_t> ids(static_cast<size_t>(num_blocks));
  std::iota(ids.begin(), ids.end(), 0);
  std::mt19937_64 rng(seed);
  std::shuffle(ids.begin(), ids.end(), rng);
  std::vector<std::vector<int32_t>> tables;
  size_t next = 0;
  for (int64_t c : counts) {
    tables.emplace_back(ids.begin() + static_cast<std::ptrdiff_t>(next),
                        ids.begin() + static_cast<std::ptrdiff_t>(next + static_cast<size_t>(c)));
    next += static_cast<size_t>(c);
  }
  return tables;
}

inline int64_t blocks_for(int64_t len, int block_size) { return (len + block_size - 1) / block_size; }

}  // namespace vosti::testing
