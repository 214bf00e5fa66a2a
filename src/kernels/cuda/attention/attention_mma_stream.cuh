// The tensor-core attention's stream skeleton (attention.h, family 1): the tile loader (block-table
// entries a tile ahead, cp.async copies into swizzled stages), Q's loads, an item's tiles and
// stream_items, which runs a CTA's items as one pipelined stream of KV tiles. Shared by the
// streaming, wgmma and decode kernels (and the analyzer's planted kernels); the arithmetic they
// run on each tile is attention_mma_tile.cuh's.
#pragma once

#include "kernels/cuda/attention/attention_mma_tile.cuh"
#include "kernels/cuda/ptx/wgmma_ptx.cuh"

namespace vosti::attention_mma {

// The tile loader: thread t copies 16-byte chunk t % kChunks of kRowsPerThread rows of K and V.
// With S::kOnePage (the decode kernel, launched only where a page holds at least kRowsPerThread
// positions: a power-of-two block size >= that, up to 64, a deployment constant) the rows are
// consecutive, [r R, r R + R) for r = t / kChunks and R = kRowsPerThread, all in one page: one
// block-table entry and one address per tile. Otherwise (the streaming kernel, any block size)
// the rows are r + i * kRowsPerPass, each with its own entry. Each row lands in the same place of
// the stage either way.
//
// The block-table entries of this thread's rows of KV tile `tile` (0, unread, past last_pos), read
// one tile ahead of the copies that use them, so that the table's latency hides behind a tile.
// Where the block size divides the tile, a row's block and offset are shifts and masks.
template <class S>
__device__ __forceinline__ void load_blocks(const MmaParams& p, const int32_t* table, int tile, int last_pos,
                                            int32_t (&blk)[S::kRowsPerThread]) {
  const int r0 = static_cast<int>(threadIdx.x) / S::kChunks;
  if constexpr (S::kOnePage) {
    const int j = tile * kTile + r0 * S::kRowsPerThread;
    blk[0] = j <= last_pos ? table[j >> p.block_shift] : 0;
  } else {
#pragma unroll
    for (int i = 0; i < S::kRowsPerThread; ++i) {
      const int j = tile * kTile + r0 + i * S::kRowsPerPass;
      const int index = p.block_shift >= 0 ? j >> p.block_shift : j / p.block_size;
      blk[i] = j <= last_pos ? table[index] : 0;
    }
  }
}

// Copies KV tile `tile` of `kv_head` into one stage. Rows past last_pos copy whatever their page
// (or block 0's page) holds: tile_step masks their scores and their V (never the copy: the
// loader's place in a CTA's stream is the plan's, and only the computation knows its own item).
template <class S>
__device__ __forceinline__ void load_tile(const MmaParams& p, const int32_t (&blk)[S::kRowsPerThread], int kv_head,
                                          int tile, int last_pos, uint32_t k_stage, uint32_t v_stage) {
  constexpr int kHd = S::kChunks * 8;
  const int chunk = static_cast<int>(threadIdx.x) % S::kChunks;
  const int r0 = static_cast<int>(threadIdx.x) / S::kChunks;
  if constexpr (S::kOnePage) {
    const int row0 = r0 * S::kRowsPerThread;
    const int in_block = (tile * kTile + row0) & ((1 << p.block_shift) - 1);
    const int64_t page = static_cast<int64_t>(blk[0]) * p.num_kv_heads + kv_head;
    const int64_t off = (page * p.block_size + in_block) * kHd + chunk * 8;
#pragma unroll
    for (int i = 0; i < S::kRowsPerThread; ++i) {
      const uint32_t dst = S::tile_offset(row0 + i, chunk);
      cp_async_16(k_stage + dst, p.k + off + i * kHd, true);
      cp_async_16(v_stage + dst, p.v + off + i * kHd, true);
    }
  } else {
    // Element offset of a row: block * (a block's elements) + the 32-bit offset inside the block
    // ([head][position][hd]; the launch checks that a block's elements fit 31 bits).
    const int block_elems = p.num_kv_heads * p.block_size * kHd;
    const int head_elems = kv_head * p.block_size * kHd + chunk * 8;
#pragma unroll
    for (int i = 0; i < S::kRowsPerThread; ++i) {
      const int row = r0 + i * S::kRowsPerPass;
      const int j = tile * kTile + row;
      const int in_block = p.block_shift >= 0 ? j & ((1 << p.block_shift) - 1) : j % p.block_size;
      const int64_t off = static_cast<int64_t>(blk[i]) * block_elems + (head_elems + in_block * kHd);
      const uint32_t dst = S::tile_offset(row, chunk);
      cp_async_16(k_stage + dst, p.k + off, true);
      cp_async_16(v_stage + dst, p.v + off, true);
    }
  }
}

// wgmma's 128-byte swizzled K-major layout of a 64-row tile (the wgmma kernel's K and V stages,
// and each warpgroup's 64 rows of Q): [kHd / 64][64 rows][128 bytes], chunk c of row r at
// c ^ (r & 7) in its column block.
template <int kHd>
__host__ __device__ constexpr uint32_t wg_swizzled(int row, int chunk) {
  return static_cast<uint32_t>((chunk >> 3) * (kTile * 128) + row * 128 + (((chunk & 7) ^ (row & 7)) << 4));
}

// Where Q's row `row`, chunk `chunk` lands: ldmatrix's layout (swizzled), or with kWgmma each
// warpgroup's 64 rows as one wg_swizzled tile, read by wgmma as its shared-memory A operand.
template <int kHd, bool kWgmma>
__device__ __forceinline__ uint32_t q_offset(int row, int chunk) {
  if constexpr (kWgmma)
    return static_cast<uint32_t>((row / kTile) * (kTile * kHd * 2)) + wg_swizzled<kHd>(row % kTile, chunk);
  return swizzled<kHd>(row, chunk);
}

// Q rows of the item, rounded to bf16, into shared memory; rows past the item are zeros; one
// chunk at a time (the register-bound mma.sync kernels; the wgmma kernel uses QLoads).
template <int kHd, int kRows>
__device__ __forceinline__ void load_q(const MmaParams& p, const AttentionWork& w, int kv_head, char* q_smem) {
  constexpr int kChunks = kHd / 8;
  const int rows = w.num_positions * p.group;
  for (int i = threadIdx.x; i < kRows * kChunks; i += kThreads) {
    const int row = i / kChunks, chunk = i % kChunks;
    uint4 packed = make_uint4(0, 0, 0, 0);
    if (row < rows) {
      const int pos = row / p.group, head = kv_head * p.group + row % p.group;
      const float* src = p.q + (w.first_row + pos) * p.q_row_stride + static_cast<int64_t>(head) * kHd + chunk * 8;
      const float4 a = *reinterpret_cast<const float4*>(src);
      const float4 b = *reinterpret_cast<const float4*>(src + 4);
      packed = make_uint4(pack_bf16(a.x, a.y), pack_bf16(a.z, a.w), pack_bf16(b.x, b.y), pack_bf16(b.z, b.w));
    }
    *reinterpret_cast<uint4*>(q_smem + q_offset<kHd, false>(row, chunk)) = packed;
  }
}

// The wgmma kernel's Q load in two halves: issue() starts every global load of the thread's
// chunks (one chunk column of rows r0 + u kStep; each row's position and head advance with u, no
// division a chunk; a row past the item reads Q's first row), store() converts them once they
// land, rows past the item as zeros. Between the two the thread issues the stream's first copies
// (stream_items' prime), so that an item's start waits for one load latency, not two.
template <int kHd, int kRows, int kNumThreads>
struct QLoads {
  static constexpr int kChunks = kHd / 8;
  static constexpr int kStep = kNumThreads / kChunks;
  static constexpr int kIters = (kRows * kChunks + kNumThreads - 1) / kNumThreads;
  static_assert(kNumThreads % kChunks == 0 && kRows % kStep == 0, "a thread's chunks are one column of whole rows");
  float4 x[kIters][2];

  __device__ __forceinline__ void issue(const MmaParams& p, const AttentionWork& w, int kv_head) {
    const int chunk = static_cast<int>(threadIdx.x) % kChunks, r0 = static_cast<int>(threadIdx.x) / kChunks;
    const int rows = w.num_positions * p.group;
    int pos = r0 / p.group, head = r0 % p.group;
    const int step_pos = kStep / p.group, step_head = kStep % p.group;
#pragma unroll
    for (int u = 0; u < kIters; ++u) {
      const int row = r0 + u * kStep;
      const float* src = row < rows ? p.q + (w.first_row + pos) * p.q_row_stride +
                                          static_cast<int64_t>(kv_head * p.group + head) * kHd + chunk * 8
                                    : p.q;
      x[u][0] = *reinterpret_cast<const float4*>(src);
      x[u][1] = *reinterpret_cast<const float4*>(src + 4);
      pos += step_pos;
      head += step_head;
      if (head >= p.group) {
        head -= p.group;
        ++pos;
      }
    }
  }
  __device__ __forceinline__ void store(const MmaParams& p, const AttentionWork& w, char* q_smem) const {
    const int chunk = static_cast<int>(threadIdx.x) % kChunks, r0 = static_cast<int>(threadIdx.x) / kChunks;
    const int rows = w.num_positions * p.group;
#pragma unroll
    for (int u = 0; u < kIters; ++u) {
      const int row = r0 + u * kStep;
      const float4 a = row < rows ? x[u][0] : make_float4(0.f, 0.f, 0.f, 0.f);
      const float4 b = row < rows ? x[u][1] : make_float4(0.f, 0.f, 0.f, 0.f);
      *reinterpret_cast<uint4*>(q_smem + q_offset<kHd, true>(row, chunk)) =
          make_uint4(pack_bf16(a.x, a.y), pack_bf16(a.z, a.w), pack_bf16(b.x, b.y), pack_bf16(b.z, b.w));
    }
  }
};

// The KV tiles of one work item: tiles [t_begin, t_end) of its splits, from its rows' first
// tile (they share it: attention_plan.h) up to its last position.
struct ItemTiles {
  int t_begin, t_end, last_pos, first_tile;
  __device__ __forceinline__ ItemTiles(const AttentionWork& w, const MmaParams& p) {
    last_pos = w.first_position + w.num_positions - 1;
    first_tile = attention_window_first(w.first_position, p.window) / kTile;
    t_begin = max(w.split_begin * p.tiles_per_split, first_tile);
    t_end = min(w.split_end * p.tiles_per_split, last_pos / kTile + 1);
  }
  // Whether tile t holds positions some row of the item must not read.
  __device__ __forceinline__ bool masked(int t, int window) const {
    return t == last_pos / kTile || (window > 0 && t == first_tile);
  }
};

// The loader's place in a CTA's tile stream: the tiles of its items blockIdx.y, blockIdx.y +
// gridDim.y, ... in order. `blk` holds the block-table entries of tile t (read one tile ahead of
// its copies, across item boundaries too).
template <class S>
struct Loader {
  int item, t, t_end, last_pos;
  const int32_t* table;
  int32_t blk[S::kRowsPerThread];

  // Enters item `at` (or, past num_work, the stream's end) and reads its first tile's entries.
  __device__ __forceinline__ void enter(const MmaParams& p, int num_work, int at) {
    item = at;
    if (item >= num_work) return;
    const AttentionWork w = p.work[item];
    const ItemTiles tiles(w, p);
    t = tiles.t_begin;
    t_end = tiles.t_end;
    last_pos = tiles.last_pos;
    table = p.block_tables + static_cast<int64_t>(w.seq) * *p.block_table_stride;
    load_blocks<S>(p, table, t, last_pos, blk);
  }
  // Copies tile t into the stage, then moves to the stream's next tile.
  __device__ __forceinline__ void issue(const MmaParams& p, int num_work, int kv_head, uint32_t k_stage,
                                        uint32_t v_stage) {
    load_tile<S>(p, blk, kv_head, t, last_pos, k_stage, v_stage);
    if (++t < t_end) {
      load_blocks<S>(p, table, t, last_pos, blk);
    } else {
      enter(p, num_work, item + static_cast<int>(gridDim.y));
    }
  }
};

// The CTA's stream shared by both kernels: grid.x = KV head, grid.y CTAs stride over the items
// (item i on CTA i mod grid.y); the loader stays kStages - 1 tiles ahead of the computation
// across item boundaries, so the pipeline does not drain between items. begin_item(w) runs at an
// item's start (after a barrier: every warp is done with the previous item's Q), tile(w, tiles,
// t, stage) once tile t is in shared memory. One barrier a tile: at tile n every warp has
// finished tile n - 1, whose stage the loader then refills with tile n + kStages - 1. Which CTA
// computes an item, and which items share its stream, never enter the arithmetic.
// With S::kPrimeInItem, begin_item(w, prime) calls prime() once its loads of Q are in flight: the
// stream's first copies (the prologue, prime's first call) then wait for the block table while
// the item's Q is on its way, instead of before it (one load latency less at a CTA's start; later
// calls do nothing). Otherwise the prologue runs before the first item and begin_item(w).
template <class S, class BeginItem, class Tile>
__device__ __forceinline__ void stream_items(const MmaParams& p, uint32_t base, BeginItem&& begin_item, Tile&& tile) {
  static_assert(S::kStages >= 2, "tile n - 1's stage is refilled while tile n is computed");
  const int kv_head = static_cast<int>(blockIdx.x);
  const auto k_stage = [&](int st) { return base + S::kK + st * S::kTileBytes; };
  const auto v_stage = [&](int st) { return base + S::kV + st * S::kTileBytes; };
  const int num_work = p.num_work_dev != nullptr ? *p.num_work_dev : p.num_work_host;
  const int first = static_cast<int>(blockIdx.y);
  if (first >= num_work) return;

  Loader<S> loader;
  loader.enter(p, num_work, first);
  bool primed = false;
  const auto prime = [&] {
    if (primed) return;
    primed = true;
#pragma unroll
    for (int st = 0; st < S::kStages - S::kLag; ++st) {
      if (loader.item < num_work) loader.issue(p, num_work, kv_head, k_stage(st), v_stage(st));
      cp_async_commit();
    }
  };
  if constexpr (!S::kPrimeInItem) prime();
  unsigned n = 0;  // tile n of the stream is in stage n mod kStages
  for (int item = first; item < num_work; item += static_cast<int>(gridDim.y)) {
    const AttentionWork w = p.work[item];
    const ItemTiles tiles(w, p);
    __syncthreads();  // the previous item's reads of Q are done
    if constexpr (S::kPrimeInItem) {
      begin_item(w, prime);
    } else {
      begin_item(w);
    }
    for (int t = tiles.t_begin; t < tiles.t_end; ++t, ++n) {
      cp_async_wait<S::kStages - S::kLag - 1>();  // tile n has landed (only the tiles after it are in flight)
      if constexpr (S::kAsyncProxy) wgmma_ptx::fence_proxy_async();  // ... for wgmma's reads too
      // Tile n (and, at the item's first tile, its Q) is in shared memory; tile n - kLag is done.
      __syncthreads();
      if (loader.item < num_work) {
        const int ahead = static_cast<int>((n + S::kStages - S::kLag) % S::kStages);  // tile n - kLag's stage
        loader.issue(p, num_work, kv_head, k_stage(ahead), v_stage(ahead));
      }
      cp_async_commit();
      tile(w, tiles, t, static_cast<int>(n % S::kStages));
    }
  }
}

}  // namespace vosti::attention_mma
