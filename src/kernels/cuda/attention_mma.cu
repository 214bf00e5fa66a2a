// The tensor-core paged attention (attention.h, family 1): mma.sync.m16n8k16 bf16 (sm_80 and
// sm_90a), K/V tiles of 64 positions staged in shared memory by cp.async, grouped-query heads
// packed into the mma rows, KV splits folded in one CTA or saved for the merge kernel.
//
// CTA: kWarps = 4 warps; warp w owns kBlocks m16 row blocks, CTA rows [16 kBlocks w, 16 kBlocks
// (w + 1)) (row i of an item is position i / group, head i % group). Shared memory: Q [rows][hd]
// bf16, K and V [kStages][64][hd] bf16, rows of 16-byte chunks XOR-swizzled by (row & 7) so that
// ldmatrix is conflict-free; with kFold and one block a warp also the folded O [kWarps][hd / 2]
// [32 lanes] f32 (each thread its own fragment; with two blocks the fold lives in each thread's
// local memory: FoldO). The block-table entries of a tile are read one tile ahead of its copies;
// one-block one-split CTAs run three stages, the others two (so that two CTAs fit an SM).
// Every warp computes its rows with the same instructions (tile_step, end_split); which rows a
// warp holds, how many other rows share the CTA and which CTA runs a split never enter them.
// Folded items run one CTA each, longest first (the plan's order); per-split items stream on the
// CTAs that fit the device at once (launch_streaming).
// On sm_90a (H100, H200), folded items of 128-row CTAs at head_dim 64 and 128 run
// attention_wgmma_kernel: two warpgroups, the same stream and fold, the two chains of a tile on
// wgmma (each k16 step gives each element the bits of mma.sync's: wgmma_ptx.cuh).
// Decode items (one position: group <= 16 rows, one m16 block; where attention_decode_fits) run
// attention_decode_kernel, whose four warps split each tile's scores and head-dim columns
// between them and compute every value with tile_step's operations (see there); the merge
// kernel folds their splits, or, where the plan keeps a decode row whole, the decode kernel
// folds them itself with end_split's operations in the same order.
#include <cuda_bf16.h>

#include <algorithm>
#include <atomic>
#include <cfloat>
#include <string>

#include "kernels/cuda/attention.h"
#include "kernels/cuda/cuda_status.h"
#include "kernels/cuda/gemm_bf16.h"
#include "kernels/cuda/mma_ptx.cuh"
#include "kernels/cuda/wgmma_ptx.cuh"

namespace vosti {
namespace {

using mma_ptx::cp_async_16;
using mma_ptx::cp_async_commit;
using mma_ptx::cp_async_wait;
using mma_ptx::ldsm_x4;
using mma_ptx::ldsm_x4_trans;
using mma_ptx::mma_bf16;
using mma_ptx::smem_addr;

constexpr int kWarps = 4;
constexpr int kThreads = kWarps * 32;
constexpr int kTile = kAttnKvTile;  // 64 positions
constexpr int kTileNt = kTile / 8;  // n8 tiles of the scores
static_assert(kAttnRowsPerCta == kWarps * 16, "one m16 row block per warp and block");
static_assert(kTile == 64, "the score fragment holds 8 n8 tiles");

struct MmaParams {
  const float* q;  // [m, q_row_stride]
  int64_t q_row_stride;
  int num_heads;
  int group;
  const int32_t* block_tables;
  const int32_t* block_table_stride;
  const __nv_bfloat16* k;  // the layer's pool
  const __nv_bfloat16* v;
  int num_kv_heads;
  int block_size;
  int block_shift;  // log2(block_size) when block_size is a power of two <= 64 (it divides a tile), else -1
  int tiles_per_split;
  float c;  // scale * log2(e)
  void* out;
  int64_t out_row_stride;
  float* partial_o;   // [capacity, num_heads, hd]
  float* partial_ml;  // [capacity, num_heads, 2]
  const AttentionWork* work;
  const int32_t* num_work_dev;  // device count (nullptr: num_work_host)
  int32_t num_work_host;
  int window;  // sliding window (attention.h): 0, or a row at p reads from p - window + 1
};

__device__ __forceinline__ float ex2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

// Two floats rounded to bf16, lo in the low half (the lower column of an mma fragment pair).
__device__ __forceinline__ uint32_t pack_bf16(float lo, float hi) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&v);
}

// Byte offset of 16-byte chunk `chunk` of row `row` in a swizzled [rows][kHd] bf16 tile.
template <int kHd>
__host__ __device__ constexpr uint32_t swizzled(int row, int chunk) {
  constexpr int kChunks = kHd / 8;
  constexpr int kMask = (kChunks < 8 ? kChunks : 8) - 1;
  return static_cast<uint32_t>((row * kChunks + (chunk ^ (row & kMask))) * 16);
}

// The fragment loads address chunk 2 kk + c (c = 0, 1) of rows 16 b + r: since the swizzle
// flips only bits 0-2 of the chunk and a row is a power of two of bytes, that offset is
// swizzled(r, c) XOR kk * 32, plus 16 b rows. Each operand then needs one lane offset instead
// of one per k step. Checked here for every lane-sized row, chunk pair and step.
template <int kHd>
constexpr bool swizzle_steps_are_xors() {
  for (int r = 0; r < 16; ++r)
    for (int c = 0; c < 2; ++c)
      for (int kk = 0; kk < kHd / 16; ++kk)
        for (int b = 0; b < 4; ++b)
          if (swizzled<kHd>(16 * b + r, 2 * kk + c) != (swizzled<kHd>(r, c) ^ (kk * 32u)) + 16u * b * kHd * 2)
            return false;
  return true;
}
static_assert(swizzle_steps_are_xors<16>() && swizzle_steps_are_xors<32>() && swizzle_steps_are_xors<64>() &&
              swizzle_steps_are_xors<128>() && swizzle_steps_are_xors<256>());

// The compile-time shape of one instantiation: head_dim, m16 blocks per warp, the fold's
// copy of O, pipeline stages, the loader's row mapping.
template <int kHd, int kBlocks, bool kFold>
struct Shape {
  static constexpr int kRows = kAttnRowsPerCta * kBlocks;  // query rows per CTA
  // The fold's O copy: in shared memory with one block a warp; with two, in each thread's local
  // memory (in shared memory it would hold a CTA an SM).
  static constexpr bool kAccShared = kFold && kBlocks == 1;
  static constexpr int kStages = kFold || kBlocks > 1 ? 2 : 3;
  static constexpr int kTileBytes = kTile * kHd * 2;
  static constexpr int kQ = 0;                            // [kRows][kHd] bf16
  static constexpr int kK = kRows * kHd * 2;              // [kStages][64][kHd] bf16
  static constexpr int kV = kK + kStages * kTileBytes;    // [kStages][64][kHd] bf16
  static constexpr int kAcc = kV + kStages * kTileBytes;  // [kWarps][kBlocks][kHd / 2][32] f32
  static constexpr int kZero = kAcc + (kAccShared ? kWarps * kBlocks * (kHd / 2) * 32 * 4 : 0);  // 16 zero bytes
  static constexpr int kBytes = kZero + 16;
  static constexpr int kThreads = vosti::kThreads;
  static constexpr bool kAsyncProxy = false;   // tiles read by ldmatrix only
  static constexpr bool kPrimeInItem = false;  // stream_items' prologue before the first item
  static constexpr int kLag = 1;               // stream_items refills tile n - kLag's stage at tile n
  // The tile loader (load_tile): thread t copies chunk t % kChunks of kRowsPerThread rows, to
  // tile_offset's place.
  static constexpr int kChunks = kHd / 8;
  static __device__ __forceinline__ uint32_t tile_offset(int row, int chunk) { return swizzled<kHd>(row, chunk); }
  static constexpr int kRowsPerPass = kThreads / kChunks;
  static constexpr int kRowsPerThread = kTile / kRowsPerPass;
  // Two blocks a warp: the one-page loader (load_tile; the launch checks the block size).
  static constexpr bool kOnePage = kBlocks > 1;
  static_assert(kThreads % kChunks == 0 && kTile % kRowsPerPass == 0, "the loader covers whole rows");
};

// A warp's running state for its kBlocks x 16 rows: this thread's fragments (block b: rows
// lane/4 and lane/4 + 8 of the block).
template <int kHd, int kBlocks>
struct WarpState {
  float o[kBlocks][kHd / 8][4];  // O: d n8 tile, then (row lane/4: cols 2c, 2c+1; row lane/4+8: cols 2c, 2c+1)
  float m[kBlocks][2];           // M of the two rows
  float l[kBlocks][2];           // this lane's column-class partial sums l_k of the two rows
};

template <int kHd, int kBlocks>
__device__ __forceinline__ void reset(WarpState<kHd, kBlocks>& st) {
#pragma unroll
  for (int b = 0; b < kBlocks; ++b) {
#pragma unroll
    for (int i = 0; i < kHd / 8; ++i)
#pragma unroll
      for (int e = 0; e < 4; ++e) st.o[b][i][e] = 0.f;
    st.m[b][0] = st.m[b][1] = -INFINITY;
    st.l[b][0] = st.l[b][1] = 0.f;
  }
}

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

// The positions of an item's rows: row r (position x head of the group) is at position
// first + min(r, rows - 1) / group (rows past the item: the last row's).
struct RowSpan {
  int first, rows, group, window;
  // This lane's row i (0: lane / 4, 1: lane / 4 + 8) of the warp's block b.
  template <int kBlocks>
  __device__ __forceinline__ int position(int b, int i) const {
    const int row =
        (static_cast<int>(threadIdx.x >> 5) * kBlocks + b) * 16 + static_cast<int>((threadIdx.x & 31) >> 2) + 8 * i;
    return first + min(row, rows - 1) / group;
  }
  __device__ __forceinline__ int last() const { return first + (rows - 1) / group; }
};

// O *= alpha for this lane's two rows (row lane / 4: values 0, 1 of each n8 tile; lane / 4 + 8:
// values 2, 3). Where a row's maximum did not move (alpha = 1, o * 1 = o) its products are
// skipped: one branch per row, on that row's own alpha, skipped by the warp when no lane's row
// needs it.
template <int kN>
__device__ __forceinline__ void rescale(float (&o)[kN][4], const float (&alpha)[2]) {
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    if (alpha[i] != 1.f) {
      asm volatile("");  // a branch: not 2 kN predicated products
#pragma unroll
      for (int dt = 0; dt < kN; ++dt)
#pragma unroll
        for (int e = 0; e < 2; ++e) o[dt][2 * i + e] = __fmul_rn(o[dt][2 * i + e], alpha[i]);
    }
  }
}

// The per-row steps of a tile between the two chains, for one m16 block's scores s (this lane's
// rows lane / 4, lane / 4 + 8: s[nt][0..1], s[nt][2..3]), shared by every path that computes
// them in registers (tile_step, wg_finish): scores of positions j > p or j < f to -inf (p, f: the
// rows' positions and window starts); then each row's maximum, alpha, the exponentials and their
// class sums in increasing j (attention.h), and P packed to P.V's bf16 fragments pa.
__device__ __forceinline__ void mask_block(float (&s)[kTileNt][4], const int (&p)[2], const int (&f)[2], int tile) {
  const int lane = threadIdx.x & 31;
#pragma unroll
  for (int nt = 0; nt < kTileNt; ++nt)
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      const int j = tile * kTile + nt * 8 + 2 * (lane & 3) + e;
      if (j > p[0] || j < f[0]) s[nt][e] = -INFINITY;
      if (j > p[1] || j < f[1]) s[nt][2 + e] = -INFINITY;
    }
}

__device__ __forceinline__ void softmax_block(float (&s)[kTileNt][4], float (&m)[2], float (&l)[2], float (&alpha)[2],
                                              uint32_t (&pa)[kTile / 16][4], float c) {
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    float mx = -INFINITY;
#pragma unroll
    for (int nt = 0; nt < kTileNt; ++nt) mx = fmaxf(mx, fmaxf(s[nt][2 * i], s[nt][2 * i + 1]));
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
    const float m_new = fmaxf(m[i], mx);
    alpha[i] = ex2(__fmul_rn(__fsub_rn(m[i], m_new), c));
    const float m_scaled = __fmul_rn(m_new, c);
    float sum = 0.f;
#pragma unroll
    for (int nt = 0; nt < kTileNt; ++nt)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const float pj = ex2(__fmaf_rn(s[nt][2 * i + e], c, -m_scaled));
        s[nt][2 * i + e] = pj;
        sum = __fadd_rn(sum, pj);
      }
    l[i] = __fadd_rn(__fmul_rn(l[i], alpha[i]), sum);
    m[i] = m_new;
  }
#pragma unroll
  for (int kk = 0; kk < kTile / 16; ++kk) {
    pa[kk][0] = pack_bf16(s[2 * kk][0], s[2 * kk][1]);
    pa[kk][1] = pack_bf16(s[2 * kk][2], s[2 * kk][3]);
    pa[kk][2] = pack_bf16(s[2 * kk + 1][0], s[2 * kk + 1][1]);
    pa[kk][3] = pack_bf16(s[2 * kk + 1][2], s[2 * kk + 1][3]);
  }
}

// One KV tile for the warp's kBlocks x 16 rows (attention.h's per-tile steps; each block's
// rows get exactly the operations a lone block's rows get: the K and V fragments are only
// loaded once for all blocks). span: the item's rows; mask: the tile holds positions past some
// row's own (the item's last tile) or, under a sliding window, before some row's first (the
// item's first tile). Positions past the item's last hold whatever their page held: their
// scores become -inf and their V rows are read from zero_row (16 zero bytes: P.V then meets the
// same bf16 +0 a zero-filled copy gave); positions before a row's first are the sequence's
// (finite): their scores become -inf, so their weights are exact zeros.
template <int kHd, int kBlocks>
__device__ __forceinline__ void tile_step(WarpState<kHd, kBlocks>& st, uint32_t q_rows, uint32_t k_stage,
                                          uint32_t v_stage, uint32_t zero_row, int tile, bool mask, const RowSpan& span,
                                          float c) {
  const int lane = threadIdx.x & 31;
  // Each operand's lane offset at k step 0 (swizzle_steps_are_xors).
  const uint32_t q_lane = swizzled<kHd>(lane & 15, lane >> 4);
  const uint32_t k_lane = swizzled<kHd>((lane & 7) + ((lane >> 4) << 3), (lane >> 3) & 1);
  const uint32_t v_lane = swizzled<kHd>((lane & 7) + (((lane >> 3) & 1) << 3), lane >> 4);
  float s[kBlocks][kTileNt][4];
#pragma unroll
  for (int b = 0; b < kBlocks; ++b)
#pragma unroll
    for (int nt = 0; nt < kTileNt; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) s[b][nt][e] = 0.f;
        // Scores: the mma chain over d in steps of 16.
#pragma unroll
  for (int kk = 0; kk < kHd / 16; ++kk) {
    uint32_t a[kBlocks][4];
#pragma unroll
    for (int b = 0; b < kBlocks; ++b) ldsm_x4(a[b], q_rows + b * 16 * kHd * 2 + (q_lane ^ (kk * 32)));
#pragma unroll
    for (int np = 0; np < kTileNt / 2; ++np) {
      uint32_t f[4];
      ldsm_x4(f, k_stage + np * 16 * kHd * 2 + (k_lane ^ (kk * 32)));
#pragma unroll
      for (int b = 0; b < kBlocks; ++b) {
        mma_bf16(s[b][2 * np], a[b], f[0], f[1]);
        mma_bf16(s[b][2 * np + 1], a[b], f[2], f[3]);
      }
    }
  }
  if (mask) {
    int p[kBlocks][2], f[kBlocks][2];
#pragma unroll
    for (int b = 0; b < kBlocks; ++b)
#pragma unroll
      for (int i = 0; i < 2; ++i) {
        p[b][i] = span.position<kBlocks>(b, i);
        f[b][i] = attention_window_first(p[b][i], span.window);
      }
#pragma unroll
    for (int b = 0; b < kBlocks; ++b) mask_block(s[b], p[b], f[b], tile);
  }
  // Online softmax of each row; a block's P is packed to P.V's bf16 fragments as soon as its rows
  // are done (its f32 copy then dies).
  uint32_t pa[kBlocks][kTile / 16][4];
#pragma unroll
  for (int b = 0; b < kBlocks; ++b) {
    float alpha[2];
    softmax_block(s[b], st.m[b], st.l[b], alpha, pa[b], c);
    rescale(st.o[b], alpha);
  }
  // O += bf16(P) V: the mma chain over the tile's positions in steps of 16. This lane gives the
  // transposing loads the address of V row v_row of the step (position tile * 64 + 16 kk + v_row);
  // a row past the item's last position gives the 16 zero bytes instead, so that its values
  // enter the chain as the bf16 +0 a zero-filled copy held.
  const int v_row = (lane & 7) + (((lane >> 3) & 1) << 3);
#pragma unroll
  for (int kk = 0; kk < kTile / 16; ++kk) {
    const bool zero = mask && tile * kTile + kk * 16 + v_row > span.last();
#pragma unroll
    for (int dp = 0; dp < kHd / 16; ++dp) {
      uint32_t f[4];
      ldsm_x4_trans(f, zero ? zero_row : v_stage + kk * 16 * kHd * 2 + (v_lane ^ (dp * 32)));
#pragma unroll
      for (int b = 0; b < kBlocks; ++b) {
        mma_bf16(st.o[b][2 * dp], pa[b][kk], f[0], f[1]);
        mma_bf16(st.o[b][2 * dp + 1], pa[b][kk], f[2], f[3]);
      }
    }
  }
}

// The two rows' L: (l_0 + l_1) + (l_2 + l_3) over the lanes of the row's quad.
__device__ __forceinline__ float quad_sum(float v) {
  v = __fadd_rn(v, __shfl_xor_sync(0xffffffffu, v, 1));
  return __fadd_rn(v, __shfl_xor_sync(0xffffffffu, v, 2));
}

// The fold's coefficients for states with maxima ma (the fold so far) and mb (the next split).
struct FoldCoef {
  float m, a, b;
};
__device__ __forceinline__ FoldCoef fold_coef(float ma, float mb, float c) {
  const float m = fmaxf(ma, mb);
  return {m, ex2(__fmul_rn(__fsub_rn(ma, m), c)), ex2(__fmul_rn(__fsub_rn(mb, m), c))};
}
__device__ __forceinline__ float fold(float x, float y, const FoldCoef& f) {
  return __fadd_rn(__fmul_rn(x, f.a), __fmul_rn(y, f.b));
}

// x[j] = x[j] / l (one IEEE division each, __fdiv_rn's bits) for one row's values. ptxas expands
// each div.rn into a reciprocal, its refinement and a branch to a slow path, which the scheduler
// cannot overlap (64 of them a thread at an item's end). Here the common case has no branch: x
// widened to f64 (exact) times the f64 reciprocal of l (rounded once, the row's), rounded once to
// f32. That product is within 2^-52 of the exact quotient, and a quotient of f32 values is never
// on a midpoint between two normal f32 values nor within 2^-50 of one, so the rounding is the
// correctly rounded quotient's wherever the result is normal (or x is 0); where a result is
// subnormal (a quotient can be a subnormal midpoint), the row is divided again by div.rn.
template <int kN>
__device__ __forceinline__ void divide_row(float (&x)[kN], float l) {
  const double inv = __drcp_rn(static_cast<double>(l));
  float q[kN];
  bool subnormal = false;
#pragma unroll
  for (int j = 0; j < kN; ++j) {
    q[j] = __double2float_rn(__dmul_rn(static_cast<double>(x[j]), inv));
    subnormal |= x[j] != 0.f && fabsf(q[j]) < FLT_MIN;
  }
  if (subnormal) {
#pragma unroll
    for (int j = 0; j < kN; ++j) q[j] = __fdiv_rn(x[j], l);
  }
#pragma unroll
  for (int j = 0; j < kN; ++j) x[j] = q[j];
}

__device__ __forceinline__ void store_pair(float* out, float x, float y) {
  *reinterpret_cast<float2*>(out) = make_float2(x, y);
}
__device__ __forceinline__ void store_pair(__nv_bfloat16* out, float x, float y) {
  *reinterpret_cast<__nv_bfloat162*>(out) = __floats2bfloat162_rn(x, y);
}

// Stores O / L of the lane's row i (0: lane/4, 1: lane/4 + 8) of an m16 block's O fragments
// (o[dt][2 i], o[dt][2 i + 1]: columns 8 dt + 2 (lane % 4) and the next) from dst, that row's
// first column of this lane.
template <int kNt, typename OutT>
__device__ __forceinline__ void store_divided_row(OutT* dst, const float (&o)[kNt][4], int i, float l) {
  float x[2 * kNt];
#pragma unroll
  for (int dt = 0; dt < kNt; ++dt) x[2 * dt] = o[dt][2 * i], x[2 * dt + 1] = o[dt][2 * i + 1];
  divide_row(x, l);
#pragma unroll
  for (int dt = 0; dt < kNt; ++dt) store_pair(dst + dt * 8, x[2 * dt], x[2 * dt + 1]);
}

// Where this lane's row i (0: lane/4, 1: lane/4 + 8) of the warp's block b lands: the query
// row and head; `valid` is false for a row past the item (row and head are then meaningless).
// The mask compares the row's place in the CTA with the item's size only, never the query row.
struct RowPlace {
  bool valid;
  int64_t row;
  int head;
};
template <int kBlocks>
__device__ __forceinline__ RowPlace row_place(const MmaParams& p, const AttentionWork& w, int kv_head, int b, int i) {
  const int cta_row = ((threadIdx.x >> 5) * kBlocks + b) * 16 + ((threadIdx.x & 31) >> 2) + 8 * i;
  return {cta_row < w.num_positions * p.group, w.first_row + cta_row / p.group, kv_head * p.group + cta_row % p.group};
}

// Writes O / L of the lane's rows of block b.
template <int kHd, int kBlocks, typename OutT>
__device__ __forceinline__ void write_output(const MmaParams& p, const AttentionWork& w, int kv_head, int b,
                                             const float (&o)[kHd / 8][4], const float (&L)[2]) {
  const int col = 2 * (threadIdx.x & 3);
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const RowPlace at = row_place<kBlocks>(p, w, kv_head, b, i);
    if (!at.valid) continue;
    store_divided_row(static_cast<OutT*>(p.out) + at.row * p.out_row_stride + static_cast<int64_t>(at.head) * kHd + col,
                      o, i, L[i]);
  }
}

// Saves the split's state (O unnormalised, M, L) of the lane's rows of block b in slot w.partial.
template <int kHd, int kBlocks>
__device__ __forceinline__ void write_partial(const MmaParams& p, const AttentionWork& w, int kv_head, int b,
                                              const float (&o)[kHd / 8][4], const float (&m)[2], const float (&L)[2]) {
  const int col = 2 * (threadIdx.x & 3);
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const RowPlace at = row_place<kBlocks>(p, w, kv_head, b, i);
    if (!at.valid) continue;
    const int64_t slot_head = static_cast<int64_t>(w.partial) * p.num_heads + at.head;
    float* dst = p.partial_o + slot_head * kHd + col;
#pragma unroll
    for (int dt = 0; dt < kHd / 8; ++dt) store_pair(dst + dt * 8, o[dt][2 * i], o[dt][2 * i + 1]);
    if ((threadIdx.x & 3) == 0) store_pair(p.partial_ml + slot_head * 2, m[i], L[i]);
  }
}

// The fold so far of a CTA that folds its splits, this thread's rows: M and L, and O in
// WarpState::o's layout, four values at a time. kShared: M and L in registers, O in shared memory
// (this lane's [kBlocks][kHd / 2] values at a stride of 32 floats); otherwise all of it in the
// thread's local memory (kept there, not in registers, as its address escapes: it is read and
// written only at a split's end, and registers are what two blocks a warp lack).
template <int kHd, int kBlocks, bool kShared>
struct FoldO;

template <int kHd, int kBlocks>
struct FoldO<kHd, kBlocks, true> {
  float m[kBlocks][2];
  float l[kBlocks][2];
  float* at;  // the lane's first O value
  __device__ __forceinline__ float4 load(int b, int dt) const {
    const float* x = at + (b * (kHd / 2) + dt * 4) * 32;
    return make_float4(x[0], x[32], x[64], x[96]);
  }
  __device__ __forceinline__ void store(int b, int dt, float4 v) {
    float* x = at + (b * (kHd / 2) + dt * 4) * 32;
    x[0] = v.x;
    x[32] = v.y;
    x[64] = v.z;
    x[96] = v.w;
  }
};

template <int kHd, int kBlocks>
struct FoldO<kHd, kBlocks, false> {
  float m[kBlocks][2];
  float l[kBlocks][2];
  float4 v[kBlocks][kHd / 8];
  __device__ __forceinline__ void pin() { asm volatile("" : : "l"(this) : "memory"); }
  __device__ __forceinline__ float4 load(int b, int dt) const { return v[b][dt]; }
  __device__ __forceinline__ void store(int b, int dt, float4 x) { v[b][dt] = x; }
};

// The end of split s for the warp's rows: finish L, then output, save, or fold.
template <int kHd, int kBlocks, typename OutT, bool kFold, class Fold>
__device__ __forceinline__ void end_split(const MmaParams& p, const AttentionWork& w, int kv_head, int s,
                                          WarpState<kHd, kBlocks>& st, Fold& acc) {
#pragma unroll
  for (int b = 0; b < kBlocks; ++b) {
    const float L[2] = {quad_sum(st.l[b][0]), quad_sum(st.l[b][1])};
    if (w.split_end - w.split_begin == 1) {
      if (w.partial >= 0) {
        write_partial<kHd, kBlocks>(p, w, kv_head, b, st.o[b], st.m[b], L);
      } else {
        write_output<kHd, kBlocks, OutT>(p, w, kv_head, b, st.o[b], L);
      }
      continue;
    }
    if constexpr (kFold) {
      if (s == w.split_begin) {
#pragma unroll
        for (int i = 0; i < 2; ++i) {
          acc.m[b][i] = st.m[b][i];
          acc.l[b][i] = L[i];
        }
#pragma unroll
        for (int dt = 0; dt < kHd / 8; ++dt)
          acc.store(b, dt, make_float4(st.o[b][dt][0], st.o[b][dt][1], st.o[b][dt][2], st.o[b][dt][3]));
        continue;
      }
      FoldCoef f[2];
#pragma unroll
      for (int i = 0; i < 2; ++i) {
        f[i] = fold_coef(acc.m[b][i], st.m[b][i], p.c);
        acc.l[b][i] = fold(acc.l[b][i], L[i], f[i]);
        acc.m[b][i] = f[i].m;
      }
#pragma unroll
      for (int dt = 0; dt < kHd / 8; ++dt) {
        const float4 x = acc.load(b, dt);
        st.o[b][dt][0] = fold(x.x, st.o[b][dt][0], f[0]);
        st.o[b][dt][1] = fold(x.y, st.o[b][dt][1], f[0]);
        st.o[b][dt][2] = fold(x.z, st.o[b][dt][2], f[1]);
        st.o[b][dt][3] = fold(x.w, st.o[b][dt][3], f[1]);
      }
      if (s == w.split_end - 1) {
        write_output<kHd, kBlocks, OutT>(p, w, kv_head, b, st.o[b], acc.l[b]);
      } else {
#pragma unroll
        for (int dt = 0; dt < kHd / 8; ++dt)
          acc.store(b, dt, make_float4(st.o[b][dt][0], st.o[b][dt][1], st.o[b][dt][2], st.o[b][dt][3]));
      }
    }
  }
}

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

// Folded and one-split items: each warp computes its own rows of the item over each tile of the
// stream (stream_items). (The minimum of one CTA an SM lets ptxas use the registers it needs:
// without it, it held the one-split kernel to 168 and prefill ran 5-10% slower.)
template <int kHd, typename OutT, bool kFold, int kBlocks>
__global__ void __launch_bounds__(kThreads, 1) attention_mma_kernel(const MmaParams p) {
  using S = Shape<kHd, kBlocks, kFold>;
  extern __shared__ __align__(128) char smem[];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int kv_head = static_cast<int>(blockIdx.x);
  const uint32_t base = smem_addr(smem);
  const uint32_t q_rows = base + S::kQ + warp * kBlocks * 16 * kHd * 2;
  FoldO<kHd, kBlocks, S::kAccShared> fold_o;
  if constexpr (S::kAccShared) {
    fold_o.at = reinterpret_cast<float*>(smem + S::kAcc) + warp * kBlocks * (kHd / 2) * 32 + lane;
  } else if constexpr (kFold) {
    fold_o.pin();
  }
  if (threadIdx.x == 0) *reinterpret_cast<uint4*>(smem + S::kZero) = make_uint4(0, 0, 0, 0);  // read after a barrier
  WarpState<kHd, kBlocks> state;
  int rows = 0;
  // The split of the tile being computed and the tile after it: an item's first tile is in its
  // first split (attention_plan.h), and its tiles come in order, so no tile divides by the split.
  int split = 0, split_end = 0;
  const auto begin_item = [&](const AttentionWork& w) {
    rows = w.num_positions * p.group;
    split = w.split_begin;
    split_end = (w.split_begin + 1) * p.tiles_per_split;
    // Q before the item's next copies are issued (a load issued behind a tile's copies returns
    // after them). The previous item's reads of Q ended at the barrier before begin_item; the
    // first tile's barrier publishes this item's Q.
    load_q<kHd, S::kRows>(p, w, kv_head, smem + S::kQ);
    reset(state);
    if constexpr (kFold) {
      // The fold state is written at an item's first split before any read; clearing it here too
      // lets verify/analyzer see that no read can meet the previous item's values.
#pragma unroll
      for (int b = 0; b < kBlocks; ++b) {
        fold_o.m[b][0] = fold_o.m[b][1] = fold_o.l[b][0] = fold_o.l[b][1] = 0.f;
#pragma unroll
        for (int dt = 0; dt < kHd / 8; ++dt) fold_o.store(b, dt, make_float4(0.f, 0.f, 0.f, 0.f));
      }
    }
  };
  const auto tile = [&](const AttentionWork& w, const ItemTiles& tiles, int t, int stage) {
    if (warp * kBlocks * 16 < rows) {
      if (t + p.tiles_per_split == split_end) {  // a split's first tile
        asm volatile("");                        // a branch, not a select of every state register on every tile
        reset(state);
      }
      tile_step<kHd, kBlocks>(state, q_rows, base + S::kK + stage * S::kTileBytes, base + S::kV + stage * S::kTileBytes,
                              base + S::kZero, t, tiles.masked(t, p.window),
                              RowSpan{w.first_position, rows, p.group, p.window}, p.c);
      if (t + 1 == tiles.t_end || t + 1 == split_end) {
        end_split<kHd, kBlocks, OutT, kFold>(p, w, kv_head, split, state, fold_o);
      }
    }
    if (t + 1 == split_end) {
      ++split;
      split_end += p.tiles_per_split;
    }
  };
  stream_items<S>(p, base, begin_item, tile);
}

// ---- Folded items on sm_90a: two warpgroups, wgmma ----
// The 128-row folded and one-split items where the GPU has wgmma (H100, H200) and head_dim is 64
// or 128: 256 threads, warpgroup g computes CTA rows [64 g, 64 g + 64), warp w of the CTA rows
// [16 w, 16 w + 16) as in attention_mma_kernel with one block a warp. Per tile a warpgroup issues
// the score chain as kHd / 16 wgmma m64n64k16 steps (A: its 64 rows of Q, B: the K tile, both
// from shared memory) and P.V as 4 wgmma m64n{kHd}k16 steps (A: P's bf16
// fragments; B: the V tile, N-major), in tile_step's order; between them tile_step's own
// mask_block and softmax_block. A wgmma k16 step computes each element as the mma.sync step does
// from the same operands (wgmma_ptx.cuh), so each row gets the bits attention_mma_kernel and the
// decode kernel give it. Q (each warpgroup's 64 rows) and the K and V stages are in wgmma's
// 128-byte swizzled layout (wg_swizzled); V rows past the item's last position are zeroed in
// the stage before P.V reads them (the computation's own item decides; P is +0 there), so the
// masked terms are the bf16 +0 x +0 of the other kernels.

template <int kHd, bool kFold>
struct WgShape {
  static constexpr int kThreads = 256;
  static constexpr int kRows = 2 * kAttnRowsPerCta;
  static constexpr bool kAsyncProxy = true;
  static constexpr bool kPrimeInItem = true;
  static constexpr int kStages = 4;
  static constexpr int kLag = 2;  // the trailing warpgroup reads tile n - 1 during tile n
  static constexpr int kTileBytes = kTile * kHd * 2;
  static constexpr int kQ = 0;                            // [2 warpgroups][64][kHd] bf16, wgmma's layout
  static constexpr int kK = kRows * kHd * 2;              // [kStages][64][kHd] bf16, wgmma's layout
  static constexpr int kV = kK + kStages * kTileBytes;    // [kStages][64][kHd] bf16, wgmma's layout
  static constexpr int kAcc = kV + kStages * kTileBytes;  // [8 warps][kHd / 2][32] f32: the fold's O
  static constexpr int kBytes = kAcc + (kFold ? 8 * (kHd / 2) * 32 * 4 : 0);
  static constexpr int kSmem = kBytes + 1024;  // the dynamic allocation: the tiles start 1,024-byte aligned
  static constexpr int kChunks = kHd / 8;
  static constexpr int kRowsPerPass = kThreads / kChunks;
  static constexpr int kRowsPerThread = kTile / kRowsPerPass;
  static constexpr bool kOnePage = true;  // the launch checks the block size
  static __device__ __forceinline__ uint32_t tile_offset(int row, int chunk) { return wg_swizzled<kHd>(row, chunk); }
  static_assert(kHd == 64 || kHd == 128, "one or two 128-byte column blocks");
  static_assert(kK % 1024 == 0 && kTileBytes % 1024 == 0, "each tile starts 1,024-byte aligned");
  static_assert(kThreads % kChunks == 0 && kTile % kRowsPerPass == 0, "the loader covers whole rows");
  static_assert(kAsyncProxy && kPrimeInItem && kOnePage && kQ == 0 && kRowsPerThread >= 1 && kLag == 2,
                "stream_items' and load_tile's shape");
};

#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define VOSTI_ATTENTION_WGMMA 1

// tile_step for one m16 block a warp, with the chains on wgmma (see above), in two halves so that
// a warpgroup can hold a tile's scores across a barrier: wg_scores issues the score chain (the
// warp's s[nt][e] is wgmma's accumulator d[4 nt + e]); wg_finish waits for it (and for any P.V
// still running), masks, exponentiates, sums and packs as tile_step does, rescales O (d[4 dt + e]
// = o[dt][e]) and issues P.V, which the caller waits for (wgmma_ptx::wait) before O is read or
// V's stage is refilled.
template <int kHd>
__device__ __forceinline__ void wg_scores(float (&s)[kTileNt][4], uint32_t q_group, uint32_t k_stage) {
  namespace wg = wgmma_ptx;
#pragma unroll
  for (int nt = 0; nt < kTileNt; ++nt)
#pragma unroll
    for (int e = 0; e < 4; ++e) s[nt][e] = 0.f;
  float(&sd)[kTileNt * 4] = reinterpret_cast<float(&)[kTileNt * 4]>(s);
  // The chain over d in steps of 16 (A: the warpgroup's Q tile, B: the K tile, both K-major: step
  // kk is 32 bytes into its column block).
  wg::fence();
#pragma unroll
  for (int kk = 0; kk < kHd / 16; ++kk) {
    const uint32_t at = (kk >> 2) * (kTile * 128) + (kk & 3) * 32;
    wg::wgmma_m64n64k16_ss(sd, wg::desc_sw128(q_group + at, 16, 1024), wg::desc_sw128(k_stage + at, 16, 1024));
  }
  wg::commit();
}

template <int kHd>
__device__ __forceinline__ void wg_finish(WarpState<kHd, 1>& st, float (&s)[kTileNt][4], uint32_t v_stage, int tile,
                                          bool mask, const RowSpan& span, float c) {
  namespace wg = wgmma_ptx;
  float(&sd)[kTileNt * 4] = reinterpret_cast<float(&)[kTileNt * 4]>(s);
  float(&od)[kHd / 2] = reinterpret_cast<float(&)[kHd / 2]>(st.o[0]);
  wg::wait<0>();
  wg::fence_operands(sd);
  wg::fence_operands(od);
  if (mask) {
    int p[2], f[2];
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      p[i] = span.position<1>(0, i);
      f[i] = attention_window_first(p[i], span.window);
    }
    mask_block(s, p, f, tile);
  }
  uint32_t pa[kTile / 16][4];
  float alpha[2];
  softmax_block(s, st.m[0], st.l[0], alpha, pa, c);
  rescale(st.o[0], alpha);
  // O += bf16(P) V: the chain over the tile's positions in steps of 16 (N-major B: the column
  // blocks kTile * 128 bytes apart, 8-row groups 1,024 bytes apart; step kk is 16 rows on).
  wg::fence();
#pragma unroll
  for (int kk = 0; kk < kTile / 16; ++kk) {
    const uint64_t desc = wg::desc_sw128(v_stage + kk * 16 * 128, kTile * 128, 1024);
    if constexpr (kHd == 128) {
      wg::wgmma_m64n128k16_rs<1>(od, pa[kk], desc);
    } else {
      wg::wgmma_m64n64k16_rs<1>(od, pa[kk], desc);
    }
  }
  wg::commit();
}

// Waits for this warpgroup's running chains and fences O.
template <int kHd>
__device__ __forceinline__ void wg_settle(WarpState<kHd, 1>& st) {
  wgmma_ptx::wait<0>();
  wgmma_ptx::fence_operands(reinterpret_cast<float(&)[kHd / 2]>(st.o[0]));
}
#endif  // __CUDA_ARCH_FEAT_SM90_ALL

// The kernel: attention_mma_kernel's stream and fold with WgShape's stages. Warpgroup 0 computes
// tile t within stream step t; warpgroup 1 trails by half a tile: in step t it finishes tile t - 1
// (softmax, P.V) and then issues tile t's scores, so that the tensor cores run one warpgroup's
// chains while the other computes its softmax (the steps' barriers would otherwise keep the two in
// phase). Which step runs which half changes no operation of a row. Warpgroups whose rows are all
// past the item skip the item (the rows of a warpgroup with some rows in it compute what they
// hold; their outputs are dropped).
template <int kHd, typename OutT, bool kFold>
__global__ void __launch_bounds__(256, 1) attention_wgmma_kernel(const MmaParams p) {
#ifdef VOSTI_ATTENTION_WGMMA
  using S = WgShape<kHd, kFold>;
  extern __shared__ __align__(128) char smem_raw[];
  char* smem = smem_raw + ((1024 - (smem_addr(smem_raw) & 1023)) & 1023);
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  // The warpgroup, through a shuffle so that ptxas sees a warp-uniform value (branches on
  // threadIdx.x would make it serialize the wgmma chains).
  const int group = __shfl_sync(0xffffffffu, static_cast<int>(threadIdx.x >> 7), 0);
  const int kv_head = static_cast<int>(blockIdx.x);
  const uint32_t base = smem_addr(smem);
  const uint32_t q_group = base + S::kQ + group * kAttnRowsPerCta * kHd * 2;  // the warpgroup's Q tile
  FoldO<kHd, 1, true> fold_o;
  fold_o.at = reinterpret_cast<float*>(smem + S::kAcc) + warp * (kHd / 2) * 32 + lane;
  WarpState<kHd, 1> state;
  float s[kTileNt][4];  // the scores of the tile in flight
  int rows = 0, split = 0, split_end = 0;
  // The trailing warpgroup's tile t - 1: its V stage, whether masked, whether it ended split prev_split.
  uint32_t prev_v = 0;
  bool prev_mask = false, prev_split_end = false;
  int prev_split = 0;
  const auto begin_item = [&](const AttentionWork& w, auto&& prime) {
    rows = w.num_positions * p.group;
    split = w.split_begin;
    split_end = (w.split_begin + 1) * p.tiles_per_split;
    QLoads<kHd, S::kRows, S::kThreads> q;
    q.issue(p, w, kv_head);
    prime();  // the stream's first copies wait for their block-table entries while Q loads
    q.store(p, w, smem + S::kQ);
    reset(state);
    // The trailing warpgroup's carried tile: set before any read (its first read is at the item's
    // second tile); cleared here too so that verify/analyzer sees no read meet the previous item's.
#pragma unroll
    for (int nt = 0; nt < kTileNt; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) s[nt][e] = 0.f;
    prev_v = base + S::kV;
    prev_mask = prev_split_end = false;
    prev_split = w.split_begin;
    if constexpr (kFold) {
      fold_o.m[0][0] = fold_o.m[0][1] = fold_o.l[0][0] = fold_o.l[0][1] = 0.f;
#pragma unroll
      for (int dt = 0; dt < kHd / 8; ++dt) fold_o.store(0, dt, make_float4(0.f, 0.f, 0.f, 0.f));
    }
  };
  const auto tile = [&](const AttentionWork& w, const ItemTiles& tiles, int t, int stage) {
    const uint32_t k_stage = base + S::kK + stage * S::kTileBytes, v_stage = base + S::kV + stage * S::kTileBytes;
    const bool mask = tiles.masked(t, p.window);
    const RowSpan span{w.first_position, rows, p.group, p.window};
    if (mask) {  // the item's last (or, under a window, first) tile: V rows past its last position read as +0
      const int last = span.last();
      char* v = smem + S::kV + stage * S::kTileBytes;
      for (int i = threadIdx.x; i < kTile * S::kChunks; i += S::kThreads) {
        const int row = i / S::kChunks, chunk = i % S::kChunks;
        if (t * kTile + row > last)
          *reinterpret_cast<uint4*>(v + wg_swizzled<kHd>(row, chunk)) = make_uint4(0, 0, 0, 0);
      }
      wgmma_ptx::fence_proxy_async();
      __syncthreads();
    }
    const bool split_first = t + p.tiles_per_split == split_end,
               split_last = t + 1 == tiles.t_end || t + 1 == split_end;
    if (group * kAttnRowsPerCta < rows) {
      if (group == 1 && t > tiles.t_begin) {  // the trailing warpgroup finishes tile t - 1
        wg_finish<kHd>(state, s, prev_v, t - 1, prev_mask, span, p.c);
        if (prev_split_end) {
          wg_settle(state);
          end_split<kHd, 1, OutT, kFold>(p, w, kv_head, prev_split, state, fold_o);
        }
      }
      if (split_first) {
        asm volatile("");  // a branch, not a select of every state register on every tile
        wg_settle(state);  // the trailing warpgroup's tile t - 1 P.V (the previous split's) is done
        reset(state);
      }
      wg_scores<kHd>(s, q_group, k_stage);
      if (group == 0 || t + 1 == tiles.t_end) {
        wg_finish<kHd>(state, s, v_stage, t, mask, span, p.c);
        wg_settle(state);
        if (split_last) end_split<kHd, 1, OutT, kFold>(p, w, kv_head, split, state, fold_o);
      } else {
        // Tile t - 1's P.V and tile t's scores are done before the step ends (no chain runs across
        // a step: tile t - 1's stage may be refilled, and no register is in flight across the loop).
        wg_settle(state);
        wgmma_ptx::fence_operands(reinterpret_cast<float(&)[kTileNt * 4]>(s));
      }
    }
    prev_v = v_stage;
    prev_mask = mask;
    prev_split_end = split_last;
    prev_split = split;
    if (t + 1 == split_end) {
      ++split;
      split_end += p.tiles_per_split;
    }
  };
  stream_items<S>(p, base, begin_item, tile);
#endif
}

template <int kHd, typename OutT, bool kFold>
Status launch_wgmma(const MmaParams& p, int items, int heads, cudaStream_t stream) {
  using S = WgShape<kHd, kFold>;
  return launch_streaming<attention_wgmma_kernel<kHd, OutT, kFold>, S::kSmem, S::kThreads>(p, items, heads, false,
                                                                                           stream);
}

// ---- Decode items: the four warps share one m16 block ----
// A per-split item is one position of one sequence: group rows (at most 16), one m16 block.
// The streaming kernel above gives it to warp 0 while warps 1-3 wait at the barriers (a tile
// is then one warp's chain of ~900 instructions). Here the four warps split the work of each
// tile between them and exchange through shared memory, each value computed by the same
// operations as in tile_step: warp w computes the scores of positions [16 w, 16 w + 16) of the
// tile (the same mma chain over d per score), the row maxima of the four slices meet in shared
// memory (max is exact in any order; a +0 / -0 difference in M would cancel in every ex2 it
// enters), each warp exponentiates its own scores and writes them (f32 for the sums, bf16 mma
// fragments for P.V); every warp then sums each column class in
// increasing j from the f32 copy (tile_step's order), and computes O for head-dim columns
// [kHd / 4 w, kHd / 4 (w + 1)) with the same mma chain over the tile's positions. So an output
// row holds the bits tile_step gives it (the device tests compare the two paths).
template <int kHd>
struct DecodeShape {
  static constexpr int kStages = 3;
  static constexpr int kTileBytes = kTile * kHd * 2;
  static constexpr int kPfStride = kTile + 8;             // f32 P rows, padded against bank conflicts
  static constexpr int kQ = 0;                            // [16][kHd] bf16
  static constexpr int kK = 16 * kHd * 2;                 // [kStages][64][kHd] bf16
  static constexpr int kV = kK + kStages * kTileBytes;    // [kStages][64][kHd] bf16
  static constexpr int kMax = kV + kStages * kTileBytes;  // [kWarps][16] f32 slice maxima
  static constexpr int kPa = kMax + kWarps * 16 * 4;      // [kWarps][32 lanes] bf16 P fragments
  static constexpr int kPf = kPa + kWarps * 32 * 16;      // [16][kPfStride] f32 P
  static constexpr int kBytes = kPf + 16 * kPfStride * 4;
  static constexpr int kThreads = vosti::kThreads;
  static constexpr bool kAsyncProxy = false;
  static constexpr bool kPrimeInItem = false;
  static constexpr int kLag = 1;
  static constexpr int kChunks = kHd / 8;
  static __device__ __forceinline__ uint32_t tile_offset(int row, int chunk) { return swizzled<kHd>(row, chunk); }
  static constexpr int kRowsPerPass = kThreads / kChunks;
  static constexpr int kRowsPerThread = kTile / kRowsPerPass;
  static constexpr bool kOnePage = true;         // the launch checks the block size (decode_fits)
  static constexpr int kDp = kHd / 16 / kWarps;  // V fragment loads (16 head-dim columns) per warp
  static_assert(kHd >= 64 && kDp >= 1, "each warp computes at least 16 head-dim columns");
  static_assert(kThreads % kChunks == 0 && kTile % kRowsPerPass == 0, "the loader covers whole rows");
};

// A warp's running state: its rows' M and l_k as in WarpState, O of its head-dim columns only.
template <int kHd>
struct DecodeState {
  float o[2 * DecodeShape<kHd>::kDp][4];
  float m[2];
  float l[2];
};

// The position of this lane's row i (0: lane / 4, 1: lane / 4 + 8) of the block (RowSpan
// without the warp: every warp holds the block's 16 rows).
__device__ __forceinline__ int decode_position(const RowSpan& span, int i) {
  const int row = static_cast<int>((threadIdx.x & 31) >> 2) + 8 * i;
  return span.first + min(row, span.rows - 1) / span.group;
}

template <int kHd>
__device__ __forceinline__ void decode_tile_step(DecodeState<kHd>& st, uint32_t q_rows, uint32_t k_stage,
                                                 uint32_t v_stage, int tile, bool mask, const RowSpan& span, float c,
                                                 char* smem) {
  using S = DecodeShape<kHd>;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, quad = lane & 3, r = lane >> 2;
  float* slice_max = reinterpret_cast<float*>(smem + S::kMax);
  uint4* pa = reinterpret_cast<uint4*>(smem + S::kPa);
  float* pf = reinterpret_cast<float*>(smem + S::kPf);
  const uint32_t q_lane = swizzled<kHd>(lane & 15, lane >> 4);
  const uint32_t k_lane = swizzled<kHd>((lane & 7) + ((lane >> 4) << 3), (lane >> 3) & 1);
  const uint32_t v_lane = swizzled<kHd>((lane & 7) + (((lane >> 3) & 1) << 3), lane >> 4);
  // Scores of n8 tiles 2 warp, 2 warp + 1 (tile_step's s[2 np], s[2 np + 1] with np = warp).
  float s[2][4];
#pragma unroll
  for (int h = 0; h < 2; ++h)
#pragma unroll
    for (int e = 0; e < 4; ++e) s[h][e] = 0.f;
#pragma unroll
  for (int kk = 0; kk < kHd / 16; ++kk) {
    uint32_t a[4], f[4];
    ldsm_x4(a, q_rows + (q_lane ^ (kk * 32)));
    ldsm_x4(f, k_stage + warp * 16 * kHd * 2 + (k_lane ^ (kk * 32)));
    mma_bf16(s[0], a, f[0], f[1]);
    mma_bf16(s[1], a, f[2], f[3]);
  }
  if (mask) {
    const int p[2] = {decode_position(span, 0), decode_position(span, 1)};
    const int f[2] = {attention_window_first(p[0], span.window), attention_window_first(p[1], span.window)};
#pragma unroll
    for (int h = 0; h < 2; ++h)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const int j = tile * kTile + (2 * warp + h) * 8 + 2 * quad + e;
        if (j > p[0] || j < f[0]) s[h][e] = -INFINITY;
        if (j > p[1] || j < f[1]) s[h][2 + e] = -INFINITY;
      }
  }
  // Each row's maximum: the slice's, then the four slices' from shared memory.
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    float mx = fmaxf(fmaxf(s[0][2 * i], s[0][2 * i + 1]), fmaxf(s[1][2 * i], s[1][2 * i + 1]));
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
    if (quad == 0) slice_max[warp * 16 + r + 8 * i] = mx;
  }
  __syncthreads();
  float alpha[2];
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const int row = r + 8 * i;
    const float mx = fmaxf(fmaxf(slice_max[row], slice_max[16 + row]), fmaxf(slice_max[32 + row], slice_max[48 + row]));
    const float m_new = fmaxf(st.m[i], mx);
    alpha[i] = ex2(__fmul_rn(__fsub_rn(st.m[i], m_new), c));
    const float m_scaled = __fmul_rn(m_new, c);
#pragma unroll
    for (int h = 0; h < 2; ++h) {
#pragma unroll
      for (int e = 0; e < 2; ++e) s[h][2 * i + e] = ex2(__fmaf_rn(s[h][2 * i + e], c, -m_scaled));
      *reinterpret_cast<float2*>(pf + row * S::kPfStride + (2 * warp + h) * 8 + 2 * quad) =
          make_float2(s[h][2 * i], s[h][2 * i + 1]);
    }
    st.m[i] = m_new;
  }
  // The bf16 fragment of P.V's k step `warp` (tile_step's a[] at kk = warp).
  pa[warp * 32 + lane] = make_uint4(pack_bf16(s[0][0], s[0][1]), pack_bf16(s[0][2], s[0][3]),
                                    pack_bf16(s[1][0], s[1][1]), pack_bf16(s[1][2], s[1][3]));
  __syncthreads();
  // l_k of this lane's class over the whole tile, in increasing j.
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const float* row = pf + (r + 8 * i) * S::kPfStride + 2 * quad;
    float sum = 0.f;
#pragma unroll
    for (int nt = 0; nt < kTileNt; ++nt) {
      const float2 pj = *reinterpret_cast<const float2*>(row + nt * 8);
      sum = __fadd_rn(__fadd_rn(sum, pj.x), pj.y);
    }
    st.l[i] = __fadd_rn(__fmul_rn(st.l[i], alpha[i]), sum);
  }
  rescale(st.o, alpha);
  // O of this warp's columns += bf16(P) V, the chain over the tile's positions.
#pragma unroll
  for (int kk = 0; kk < kTile / 16; ++kk) {
    uint32_t keep[2] = {0xffffffffu, 0xffffffffu};
    if (mask) {
      const int j = tile * kTile + kk * 16 + 2 * quad, last = span.last();
#pragma unroll
      for (int h = 0; h < 2; ++h)
        keep[h] = (j + 8 * h <= last ? 0x0000ffffu : 0u) | (j + 8 * h + 1 <= last ? 0xffff0000u : 0u);
    }
    const uint4 pk = pa[kk * 32 + lane];
    const uint32_t a[4] = {pk.x, pk.y, pk.z, pk.w};
#pragma unroll
    for (int dl = 0; dl < S::kDp; ++dl) {
      uint32_t f[4];
      ldsm_x4_trans(f, v_stage + kk * 16 * kHd * 2 + (v_lane ^ ((warp * S::kDp + dl) * 32)));
      if (mask) {
        f[0] &= keep[0];
        f[1] &= keep[1];
        f[2] &= keep[0];
        f[3] &= keep[1];
      }
      mma_bf16(st.o[2 * dl], a, f[0], f[1]);
      mma_bf16(st.o[2 * dl + 1], a, f[2], f[3]);
    }
  }
}

// Writes the block's rows of this warp's columns: O / L, or the split's state for the merge
// kernel (M and L by warp 0) where w.partial >= 0.
template <int kHd, typename OutT>
__device__ __forceinline__ void decode_store(const MmaParams& p, const AttentionWork& w, int kv_head,
                                             const DecodeState<kHd>& st, const float (&L)[2]) {
  constexpr int kDp = DecodeShape<kHd>::kDp;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int col = warp * kDp * 16 + 2 * (lane & 3);
  const int rows = w.num_positions * p.group;
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const int row = (lane >> 2) + 8 * i;
    if (row >= rows) continue;
    const int64_t q_row = w.first_row + row / p.group;
    const int head = kv_head * p.group + row % p.group;
    if (w.partial >= 0) {
      const int64_t slot_head = static_cast<int64_t>(w.partial) * p.num_heads + head;
      float* dst = p.partial_o + slot_head * kHd + col;
#pragma unroll
      for (int dt = 0; dt < 2 * kDp; ++dt) store_pair(dst + dt * 8, st.o[dt][2 * i], st.o[dt][2 * i + 1]);
      if (warp == 0 && (lane & 3) == 0) store_pair(p.partial_ml + slot_head * 2, st.m[i], L[i]);
    } else {
      store_divided_row(static_cast<OutT*>(p.out) + q_row * p.out_row_stride + static_cast<int64_t>(head) * kHd + col,
                        st.o, i, L[i]);
    }
  }
}

// The fold so far of a decode item's splits, this thread's values (O in DecodeState::o's
// layout), in registers: read and written at a split's end.
template <int kHd>
struct DecodeFold {
  float m[2];
  float l[2];
  float4 o[2 * DecodeShape<kHd>::kDp];
  __device__ __forceinline__ void clear() {
    m[0] = m[1] = l[0] = l[1] = 0.f;
#pragma unroll
    for (int dt = 0; dt < 2 * DecodeShape<kHd>::kDp; ++dt) o[dt] = make_float4(0.f, 0.f, 0.f, 0.f);
  }
};

// The end of split s of a decode item, this warp's columns of the block's rows: L over the row's
// quad, then decode_store where the item is one split; where it holds several, the fold of
// end_split in split order (the first split's state copied, each later one folded with fold_coef
// and fold: the merge kernel's operations too), and O / L after the last.
template <int kHd, typename OutT>
__device__ __forceinline__ void decode_end_split(const MmaParams& p, const AttentionWork& w, int kv_head, int s,
                                                 DecodeState<kHd>& st, DecodeFold<kHd>& acc) {
  constexpr int kNt = 2 * DecodeShape<kHd>::kDp;
  const float L[2] = {quad_sum(st.l[0]), quad_sum(st.l[1])};
  // After a store the fold is not read again before the next item clears it; it is cleared there
  // too, past decode_store's branch on the plan's partial slot, so that the compiler carries no
  // copy of it through that branch (verify/analyzer would see the plan choose the copied values).
  if (w.split_end - w.split_begin == 1) {
    decode_store<kHd, OutT>(p, w, kv_head, st, L);
    acc.clear();
    return;
  }
  if (s == w.split_begin) {
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      acc.m[i] = st.m[i];
      acc.l[i] = L[i];
    }
#pragma unroll
    for (int dt = 0; dt < kNt; ++dt) acc.o[dt] = make_float4(st.o[dt][0], st.o[dt][1], st.o[dt][2], st.o[dt][3]);
    return;
  }
  FoldCoef f[2];
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    f[i] = fold_coef(acc.m[i], st.m[i], p.c);
    acc.l[i] = fold(acc.l[i], L[i], f[i]);
    acc.m[i] = f[i].m;
  }
#pragma unroll
  for (int dt = 0; dt < kNt; ++dt) {
    const float4 x = acc.o[dt];
    st.o[dt][0] = fold(x.x, st.o[dt][0], f[0]);
    st.o[dt][1] = fold(x.y, st.o[dt][1], f[0]);
    st.o[dt][2] = fold(x.z, st.o[dt][2], f[1]);
    st.o[dt][3] = fold(x.w, st.o[dt][3], f[1]);
  }
  if (s == w.split_end - 1) {
    decode_store<kHd, OutT>(p, w, kv_head, st, acc.l);
    acc.clear();
  } else {
#pragma unroll
    for (int dt = 0; dt < kNt; ++dt) acc.o[dt] = make_float4(st.o[dt][0], st.o[dt][1], st.o[dt][2], st.o[dt][3]);
  }
}

template <int kHd>
__device__ __forceinline__ void decode_reset(DecodeState<kHd>& st) {
#pragma unroll
  for (int dt = 0; dt < 2 * DecodeShape<kHd>::kDp; ++dt)
#pragma unroll
    for (int e = 0; e < 4; ++e) st.o[dt][e] = 0.f;
  st.m[0] = st.m[1] = -INFINITY;
  st.l[0] = st.l[1] = 0.f;
}

// The per-split items where attention_decode_fits (a KV head's rows in one m16 block, head_dim
// >= 64, a loader thread's rows in one page): the stream of attention_mma_kernel (stream_items),
// each tile computed by the four warps together (decode_tile_step); an item's splits, where it
// holds several, folded at each split's end (decode_end_split).
template <int kHd, typename OutT>
__global__ void __launch_bounds__(kThreads, 1) attention_decode_kernel(const MmaParams p) {
  using S = DecodeShape<kHd>;
  extern __shared__ __align__(128) char smem[];
  const int kv_head = static_cast<int>(blockIdx.x);
  const uint32_t base = smem_addr(smem);
  DecodeState<kHd> state;  // the split being computed
  DecodeFold<kHd> fold;    // the fold of the item's earlier splits
  // The split of the tile being computed and the end of its tiles (tracked as attention_mma_kernel
  // does: an item's first tile is in its first split, its tiles come in order).
  int split = 0, split_end = 0;
  const auto begin_item = [&](const AttentionWork& w) {
    load_q<kHd, 16>(p, w, kv_head, smem + S::kQ);
    split = w.split_begin;
    split_end = (w.split_begin + 1) * p.tiles_per_split;
    decode_reset(state);
    // The fold is written at an item's first split's end before any read; cleared here too so
    // that verify/analyzer sees no read meet the previous item's values.
    fold.clear();
  };
  const auto tile = [&](const AttentionWork& w, const ItemTiles& tiles, int t, int stage) {
    if (t + p.tiles_per_split == split_end) {  // a split's first tile
      asm volatile("");                        // a branch, not a select of every state register on every tile
      decode_reset(state);
    }
    decode_tile_step<kHd>(state, base + S::kQ, base + S::kK + stage * S::kTileBytes,
                          base + S::kV + stage * S::kTileBytes, t, tiles.masked(t, p.window),
                          RowSpan{w.first_position, w.num_positions * p.group, p.group, p.window}, p.c, smem);
    if (t + 1 == tiles.t_end || t + 1 == split_end) decode_end_split<kHd, OutT>(p, w, kv_head, split, state, fold);
    if (t + 1 == split_end) {
      ++split;
      split_end += p.tiles_per_split;
    }
  };
  stream_items<S>(p, base, begin_item, tile);
}

// Folds the saved split states of decode rows: CTA (x, y) folds head y of merge x. The states
// are staged in shared memory kMergeStageFloats of O at a time, every thread's loads issued
// together (loaded 8 splits ahead by the folding threads themselves, one 32k row's 64 splits took
// 29 us), the next stage's loads in flight while this one is folded; then thread e folds its
// head-dim pair 2e, 2e + 1 over the staged splits in split order: the operations of attention.h's
// fold, in its order. Split 0, which starts the fold, is taken before the loop, so that the loop
// body has no branch and its shared-memory loads and exponentials run ahead of the chain.
constexpr int kMergeThreads = 128;
constexpr int kMergeStageFloats = 4096;  // 16 KB: 32 splits of head_dim 128 (12 CTAs an SM by shared memory)
constexpr int kMergeO = kMergeStageFloats / 4 / kMergeThreads;  // float4 loads of O per thread and stage
constexpr int kMergeMl = (kMergeStageFloats / kAttnHeadDims[0] + kMergeThreads - 1) / kMergeThreads;  // (M, L) loads

template <typename OutT>
__global__ void __launch_bounds__(kMergeThreads)
    attention_merge_kernel(const AttentionMerge* __restrict__ merges, const int32_t* __restrict__ num_merges,
                           const float* __restrict__ partial_o, const float* __restrict__ partial_ml, int num_heads,
                           int hd, float c, OutT* __restrict__ out, int64_t out_row_stride) {
  __shared__ __align__(16) float stage_o[kMergeStageFloats];         // [splits][hd]
  __shared__ float2 stage_ml[kMergeStageFloats / kAttnHeadDims[0]];  // [splits] (M, L)
  if (static_cast<int>(blockIdx.x) >= *num_merges) return;
  const AttentionMerge mg = merges[blockIdx.x];
  const int head = static_cast<int>(blockIdx.y), tid = static_cast<int>(threadIdx.x), d = 2 * tid;
  const int64_t slot_head = static_cast<int64_t>(mg.first_partial) * num_heads + head;
  const int64_t ml_step = static_cast<int64_t>(num_heads) * 2, o_step = static_cast<int64_t>(num_heads) * hd;
  const int per_stage = kMergeStageFloats / hd, quads = hd / 4;
  // This thread's loads of the stage at s0: O quads tid + u kMergeThreads, (M, L) of splits tid + u kMergeThreads.
  float4 v[kMergeO];
  float2 mlv[kMergeMl];
  const auto load_stage = [&](int s0) {
    const int n = min(per_stage, mg.num_splits - s0);
#pragma unroll
    for (int u = 0; u < kMergeO; ++u) {
      const int i = tid + u * kMergeThreads, s = i / quads, q = i % quads;
      if (i < n * quads)
        v[u] = *reinterpret_cast<const float4*>(partial_o + slot_head * hd + (s0 + s) * o_step + 4 * q);
    }
#pragma unroll
    for (int u = 0; u < kMergeMl; ++u) {
      const int s = tid + u * kMergeThreads;
      if (s < n) mlv[u] = *reinterpret_cast<const float2*>(partial_ml + slot_head * 2 + (s0 + s) * ml_step);
    }
  };
  load_stage(0);
  float m = 0.f, l = 0.f, o0 = 0.f, o1 = 0.f;
  for (int s0 = 0; s0 < mg.num_splits; s0 += per_stage) {
    const int n = min(per_stage, mg.num_splits - s0);
    __syncthreads();  // the previous stage's folds are done with the buffers
#pragma unroll
    for (int u = 0; u < kMergeO; ++u) {
      const int i = tid + u * kMergeThreads;
      if (i < n * quads) *reinterpret_cast<float4*>(stage_o + i / quads * hd + 4 * (i % quads)) = v[u];
    }
#pragma unroll
    for (int u = 0; u < kMergeMl; ++u) {
      const int s = tid + u * kMergeThreads;
      if (s < n) stage_ml[s] = mlv[u];
    }
    __syncthreads();
    if (s0 + per_stage < mg.num_splits) load_stage(s0 + per_stage);
    if (d >= hd) continue;
    int s = 0;
    if (s0 == 0) {  // split 0 starts the fold
      const float2 o = *reinterpret_cast<const float2*>(stage_o + d);
      m = stage_ml[0].x;
      l = stage_ml[0].y;
      o0 = o.x;
      o1 = o.y;
      s = 1;
    }
#pragma unroll 4
    for (; s < n; ++s) {
      const float2 ml = stage_ml[s];
      const float2 o = *reinterpret_cast<const float2*>(stage_o + s * hd + d);
      const FoldCoef f = fold_coef(m, ml.x, c);
      l = fold(l, ml.y, f);
      o0 = fold(o0, o.x, f);
      o1 = fold(o1, o.y, f);
      m = f.m;
    }
  }
  if (d < hd) {
    float x[2] = {o0, o1};
    divide_row(x, l);
    store_pair(out + mg.row * out_row_stride + static_cast<int64_t>(head) * hd + d, x[0], x[1]);
  }
}

// Launches a streaming kernel (attention_mma_kernel, attention_decode_kernel) with kSmem bytes
// of shared memory over `items` work items of `heads` KV heads: grid (heads, CTAs), the heads of
// an item next to each other in the launch order. resident_only: at most as many CTAs as fit the
// device at once (the first device's count: a deployment's GPUs are one kind), each streaming
// its items' tiles (the per-split launch, whose graph form reads its count on the device);
// otherwise one CTA an item (up to the grid's limit), so that the hardware hands the next item
// to whichever SM is free: the folded items, whose lengths differ (the plan puts the longest
// first). The shared-memory limit is the context's; the first (eager) launch raises it, before
// any graph capture.
template <auto kKernel, int kSmem, int kNumThreads = kThreads>
Status launch_streaming(const MmaParams& p, int items, int heads, bool resident_only, cudaStream_t stream) {
  static std::atomic<int> resident{0};
  int ctas = resident.load(std::memory_order_acquire);
  if (ctas == 0) {
    if (kSmem > 48 * 1024)
      VOSTI_CUDA_RETURN_IF_ERROR(cudaFuncSetAttribute(kKernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem));
    int device = 0, sms = 0, per_sm = 0;
    VOSTI_CUDA_RETURN_IF_ERROR(cudaGetDevice(&device));
    VOSTI_CUDA_RETURN_IF_ERROR(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
    VOSTI_CUDA_RETURN_IF_ERROR(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kKernel, kNumThreads, kSmem));
    ctas = std::max(1, sms * per_sm);
    resident.store(ctas, std::memory_order_release);
  }
  const int cap = resident_only ? std::max(1, ctas / heads) : 65535;  // 65535: grid.y's limit
  items = std::min(items, cap);
  kKernel<<<dim3(static_cast<unsigned>(heads), static_cast<unsigned>(items)), kNumThreads, kSmem, stream>>>(p);
  return cuda_launch_status("attention (tensor cores)");
}

template <int kHd, typename OutT, bool kFold, int kBlocks>
Status launch_mma(const MmaParams& p, int items, int heads, bool resident_only, cudaStream_t stream) {
  return launch_streaming<attention_mma_kernel<kHd, OutT, kFold, kBlocks>, Shape<kHd, kBlocks, kFold>::kBytes>(
      p, items, heads, resident_only, stream);
}

// The instantiations: head_dim x (one split, folding) x m16 blocks per warp. A head_dim of 256
// folds with one block per warp only (two would not fit the registers).
template <typename OutT, bool kFold, int kBlocks>
Status launch_for_head_dim(int hd, const MmaParams& p, int items, int heads, bool resident_only, cudaStream_t stream) {
  switch (hd) {
    case 16:
      return launch_mma<16, OutT, kFold, kBlocks>(p, items, heads, resident_only, stream);
    case 32:
      return launch_mma<32, OutT, kFold, kBlocks>(p, items, heads, resident_only, stream);
    case 64:
      return launch_mma<64, OutT, kFold, kBlocks>(p, items, heads, resident_only, stream);
    case 128:
      return launch_mma<128, OutT, kFold, kBlocks>(p, items, heads, resident_only, stream);
    case 256:
      if constexpr (kBlocks == 1) return launch_mma<256, OutT, kFold, 1>(p, items, heads, resident_only, stream);
      return unimplemented("attention: head_dim 256 folds with 64 rows per CTA only");
    default:
      return unimplemented("attention: head_dim " + std::to_string(hd) + " has no tensor-core instantiation");
  }
}

// The per-split items: attention_decode_kernel where attention_decode_fits (functions of the
// deployment), else the streaming kernel's one-split form.
template <int kHd>
bool decode_fits(const MmaParams& p) {
  static_assert(DecodeShape<kHd>::kRowsPerThread == kHd / 16, "attention_decode_fits' block size");
  return attention_decode_fits(kHd, p.group, p.block_size);
}

template <typename OutT>
Status launch_per_split(int hd, const MmaParams& p, int items, int heads, bool folds, cudaStream_t stream) {
  if (folds && !attention_decode_fits(hd, p.group, p.block_size))
    return invalid_argument(
        "attention (tensor cores): the plan folds decode rows in the per-split kernel, which "
        "needs attention_decode_fits (head_dim " +
        std::to_string(hd) + ", group " + std::to_string(p.group) + ", block size " + std::to_string(p.block_size) +
        ")");
  switch (hd) {
    case 64:
      if (decode_fits<64>(p))
        return launch_streaming<attention_decode_kernel<64, OutT>, DecodeShape<64>::kBytes>(p, items, heads, true,
                                                                                            stream);
      break;
    case 128:
      if (decode_fits<128>(p))
        return launch_streaming<attention_decode_kernel<128, OutT>, DecodeShape<128>::kBytes>(p, items, heads, true,
                                                                                              stream);
      break;
    case 256:
      if (decode_fits<256>(p))
        return launch_streaming<attention_decode_kernel<256, OutT>, DecodeShape<256>::kBytes>(p, items, heads, true,
                                                                                              stream);
      break;
    default:
      break;
  }
  return launch_for_head_dim<OutT, false, 1>(hd, p, items, heads, true, stream);
}

// Whether the current device runs wgmma (sm_90: H100, H200); asked once (a deployment's GPUs
// are one kind).
bool wgmma_available() {
  static const bool has = [] {
    const Result<bool> r = device_has_wgmma();
    return r.ok() && r.value();
  }();
  return has;
}

// The folded items [first, first + count) with or without the fold, at the plan's rows per CTA:
// with 128 rows, the wgmma kernel where the device has wgmma and head_dim is 64 or 128, else two
// m16 blocks a warp.
template <typename OutT, bool kFold>
Status launch_folded(const AttentionWorkView& w, int hd, MmaParams p, int first, int count, int heads,
                     cudaStream_t stream) {
  if (count <= 0) return Status();
  p.work = w.folded + first;
  p.num_work_dev = nullptr;
  p.num_work_host = count;
  if (w.folded_rows == 2 * kAttnRowsPerCta) {
    static_assert(Shape<128, 2, true>::kRowsPerThread == 128 / 16, "attention_two_blocks_fit's loader rows");
    if (!attention_two_blocks_fit(hd, p.block_size))
      return unimplemented("attention (tensor cores): " + std::to_string(2 * kAttnRowsPerCta) +
                           "-row CTAs need a power-of-two block size of " + std::to_string(std::max(1, hd / 16)) +
                           " to 64 positions, not " + std::to_string(p.block_size));
    if (wgmma_available()) {  // the same bits as the two-block kernel (wgmma_ptx.cuh), sooner
      if (hd == 64) return launch_wgmma<64, OutT, kFold>(p, count, heads, stream);
      if (hd == 128) return launch_wgmma<128, OutT, kFold>(p, count, heads, stream);
    }
    return launch_for_head_dim<OutT, kFold, 2>(hd, p, count, heads, false, stream);
  }
  return launch_for_head_dim<OutT, kFold, 1>(hd, p, count, heads, false, stream);
}

template <typename OutT>
Status launch_all(const AttentionArgs& a, const CudaKvLayer& kv, cudaStream_t stream) {
  const AttentionWorkView& w = a.work;
  MmaParams p{};
  p.q = a.q;
  p.q_row_stride = a.q_row_stride;
  p.num_heads = a.num_heads;
  p.group = a.num_heads / kv.num_kv_heads;
  p.block_tables = a.block_tables;
  p.block_table_stride = a.block_table_stride;
  p.k = static_cast<const __nv_bfloat16*>(kv.k);
  p.v = static_cast<const __nv_bfloat16*>(kv.v);
  p.num_kv_heads = kv.num_kv_heads;
  p.block_size = kv.block_size;
  p.block_shift = -1;
  for (int shift = 0; shift <= 6; ++shift)
    if (kv.block_size == 1 << shift) p.block_shift = shift;
  p.tiles_per_split = w.split / kTile;
  p.window = a.window;
  p.c = a.scale * 1.44269504088896340736f;  // one f32 rounding
  p.out = a.out;
  p.out_row_stride = a.out_row_stride;
  p.partial_o = w.partials;
  p.partial_ml = w.partials == nullptr
                     ? nullptr
                     : w.partials + static_cast<int64_t>(w.partial_capacity) * a.num_heads * kv.head_dim;
  const int hd = kv.head_dim;
  VOSTI_RETURN_IF_ERROR((launch_folded<OutT, false>(w, hd, p, 0, w.num_folded_one_split, kv.num_kv_heads, stream)));
  VOSTI_RETURN_IF_ERROR((launch_folded<OutT, true>(w, hd, p, w.num_folded_one_split,
                                                   w.num_folded - w.num_folded_one_split, kv.num_kv_heads, stream)));
  if (w.per_split_grid > 0) {
    p.work = w.per_split;
    p.num_work_dev = w.num_per_split;
    p.num_work_host = 0;
    VOSTI_RETURN_IF_ERROR(launch_per_split<OutT>(hd, p, w.per_split_grid, kv.num_kv_heads, w.per_split_folds, stream));
  }
  if (w.merge_grid > 0) {
    const dim3 grid(static_cast<unsigned>(w.merge_grid), static_cast<unsigned>(a.num_heads));
    attention_merge_kernel<OutT><<<grid, kMergeThreads, 0, stream>>>(w.merges, w.num_merges, p.partial_o, p.partial_ml,
                                                                     a.num_heads, hd, p.c, static_cast<OutT*>(a.out),
                                                                     a.out_row_stride);
    VOSTI_RETURN_IF_ERROR(cuda_launch_status("attention merge"));
  }
  return Status();
}

}  // namespace

Status attention_tensor_cores(const AttentionArgs& a, CudaKvLayer kv, cudaStream_t stream) {
  if (kv.dtype != DType::kBF16) return invalid_argument("attention (tensor cores): the KV pool must be bf16");
  AttentionShape shape{a.num_heads, kv.num_kv_heads, kv.head_dim, a.work.split, a.work.folded_rows, a.window};
  if (kv.head_dim == 256 && shape.folded_rows != kAttnRowsPerCta)
    return unimplemented("attention (tensor cores): head_dim 256 folds with " + std::to_string(kAttnRowsPerCta) +
                         " rows per CTA only");
  VOSTI_RETURN_IF_ERROR(check_attention_shape(shape));
  const AttentionWorkView& w = a.work;
  if (w.window != a.window)
    return invalid_argument("attention (tensor cores): the plan was made for sliding window " +
                            std::to_string(w.window) + ", the call asks for " + std::to_string(a.window));
  if (w.num_folded < 0 || w.num_folded_one_split < 0 || w.num_folded_one_split > w.num_folded || w.per_split_grid < 0 ||
      w.merge_grid < 0)
    return invalid_argument("attention (tensor cores): negative grid in the plan");
  if ((w.num_folded > 0 && w.folded == nullptr) ||
      (w.per_split_grid > 0 && (w.per_split == nullptr || w.num_per_split == nullptr)) ||
      (w.merge_grid > 0 && (w.merges == nullptr || w.num_merges == nullptr)))
    return invalid_argument("attention (tensor cores): the plan's device arrays are missing");
  if ((w.per_split_grid > 0 || w.merge_grid > 0) && (w.partials == nullptr || w.partial_capacity <= 0))
    return invalid_argument("attention (tensor cores): split states need a partial workspace");
  if (static_cast<int64_t>(kv.num_kv_heads) * kv.block_size * kv.head_dim > INT32_MAX)
    return invalid_argument("attention (tensor cores): a KV block of " + std::to_string(kv.block_size) +
                            " positions x " + std::to_string(kv.num_kv_heads) + " heads x " +
                            std::to_string(kv.head_dim) + " must hold fewer than 2^31 elements");
  const int64_t width = static_cast<int64_t>(a.num_heads) * kv.head_dim;
  if (a.q_row_stride < width || a.out_row_stride < width) {
    return invalid_argument("attention: q and out row strides must be >= num_heads * head_dim (" +
                            std::to_string(width) + ")");
  }
  if (a.out_dtype != DType::kF32 && a.out_dtype != DType::kBF16)
    return invalid_argument("attention: output dtype must be f32 or bf16");
  if (a.out_row_stride % 2 != 0 || a.q_row_stride % 4 != 0)
    return invalid_argument("attention (tensor cores): q rows must be 16-byte aligned and out rows even");
  return a.out_dtype == DType::kF32 ? launch_all<float>(a, kv, stream) : launch_all<__nv_bfloat16>(a, kv, stream);
}

}  // namespace vosti
