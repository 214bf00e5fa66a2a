// The tensor-core attention's arithmetic (attention.h, family 1), shared by its kernels
// (attention_mma_stream.cu, attention_wgmma_sm90.cu, attention_decode.cu, attention_merge.cu) and
// the analyzer's planted kernels: the kernel parameters, the swizzled tile layout, a warp's state
// and its per-tile steps (tile_step: scores, mask, online softmax, P.V), the end of a split and the
// fold of split states. The streaming skeleton that feeds them tiles is attention_mma_stream.cuh.
//
// The family: mma.sync.m16n8k16 bf16 (sm_80 and
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
#pragma once

#include <cuda_bf16.h>

#include <cfloat>
#include <cstdint>

#include "kernels/cuda/attention/attention.h"
#include "kernels/cuda/ptx/mma_ptx.cuh"

namespace vosti::attention_mma {

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
  static constexpr int kThreads = attention_mma::kThreads;
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

}  // namespace vosti::attention_mma
