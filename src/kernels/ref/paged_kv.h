// Address arithmetic of the paged KV cache (PagedKvView), shared by every CPU-side backend.
//
// Layout: k and v are [num_blocks, block_size, num_kv_heads, head_dim]; logical
// position j of a sequence lives in physical block block_table[j / block_size] at
// offset j % block_size. A slot is block * block_size + offset.
// Thread safety: pure functions.
#pragma once

#include <cstdint>

#include "core/check.h"
#include "kernels/kernel_backend.h"

namespace vosti {

// Float offset of (slot, kv_head) in kv.k / kv.v. REQUIRES: 0 <= slot < num_blocks * block_size.
inline int64_t kv_slot_offset(const PagedKvView& kv, int64_t slot, int kv_head) {
  return (slot * kv.num_kv_heads + kv_head) * static_cast<int64_t>(kv.head_dim);
}

// Slot of logical position j through a block table; checks the block id is in the pool.
inline int64_t kv_slot_of_position(const PagedKvView& kv, const int32_t* block_table, int64_t j) {
  VOSTI_CHECK(block_table != nullptr, "attention query without a block table");
  const int32_t block = block_table[j / kv.block_size];
  VOSTI_CHECK(block >= 0 && block < kv.num_blocks, "block table entry outside the KV pool");
  return static_cast<int64_t>(block) * kv.block_size + j % kv.block_size;
}

}  // namespace vosti
