// Planted violations for vosti-analyze (verify/analyzer/mutants.py): each kernel is a small,
// plausible kernel with one batch-invariance bug of issue 20's list; the analyzer must reject each
// with the kernel and the axis it varies along. Never linked into the engine.
#include <cuda_runtime.h>

// Split-K chosen from m: the k loop is cut in two when the batch has many rows.
__global__ void planted_split_k_from_m(const float* x, const float* w, float* y, int m, int n, int k) {
  const int r = blockIdx.x, c = threadIdx.x;
  const int split = m > 64 ? k / 2 : k;
  float a = 0.f, b = 0.f;
  for (int i = 0; i < split; ++i) a = __fmaf_rn(x[r * k + i], w[c * k + i], a);
  for (int i = split; i < k; ++i) b = __fmaf_rn(x[r * k + i], w[c * k + i], b);
  y[r * n + c] = __fadd_rn(a, b);
}

// A k-tile size from the number of tokens: partial sums per tile, tiles added in order.
__global__ void planted_tile_from_tokens(const float* x, const float* w, float* y, int num_tokens, int n, int k) {
  const int r = blockIdx.x, c = threadIdx.x;
  const int tile = num_tokens < 32 ? 64 : 128;
  float acc = 0.f;
  for (int t0 = 0; t0 < k; t0 += tile) {
    float part = 0.f;
    for (int i = t0; i < t0 + tile && i < k; ++i) part = __fmaf_rn(x[r * k + i], w[c * k + i], part);
    acc = __fadd_rn(acc, part);
  }
  y[r * n + c] = acc;
}

// A grouped expert GEMM (issue 41) whose k-tile follows the expert's token count, read from the tile
// list: one CTA per permuted row (the tile list's entry), partial sums per k-tile added in order.
struct PlantedMoeTile {
  int expert, row0, row_end, expert_row0;
};
__global__ void planted_expert_tile_from_count(const float* x, const float* w, float* y, const PlantedMoeTile* tiles,
                                               int n, int k) {
  const PlantedMoeTile t = tiles[blockIdx.x];
  const int r = t.row0, c = threadIdx.x;
  const int tile = t.row_end - t.expert_row0 > 16 ? 128 : 64;
  const float* we = w + static_cast<long long>(t.expert) * n * k;
  float acc = 0.f;
  for (int t0 = 0; t0 < k; t0 += tile) {
    float part = 0.f;
    for (int i = t0; i < t0 + tile && i < k; ++i) part = __fmaf_rn(x[r * k + i], we[c * k + i], part);
    acc = __fadd_rn(acc, part);
  }
  y[r * n + c] = acc;
}

// An MoE combine in arrival order: each permuted expert row adds its weighted output into its
// token's row with a floating-point atomic, in whatever order the CTAs run.
__global__ void planted_combine_by_arrival(const float* y_perm, const int* src_token, const float* w_perm, float* out,
                                           int hidden) {
  const int p = blockIdx.x;
  const int t = src_token[p];
  for (int c = threadIdx.x; c < hidden; c += blockDim.x)
    atomicAdd(&out[t * hidden + c], __fmul_rn(y_perm[p * hidden + c], w_perm[p]));
}

// A KV split size from the longest query in the step: the partial softmax sums are cut there.
__global__ void planted_kv_split_from_longest(const float* scores, float* out, const int* positions,
                                              int longest_query) {
  const int r = blockIdx.x;
  const int p = positions[r];
  const int split = longest_query > 1024 ? 256 : 512;
  float total = 0.f;
  for (int s0 = 0; s0 <= p; s0 += split) {
    float part = 0.f;
    for (int j = s0; j < s0 + split && j <= p; ++j) part = __fadd_rn(part, scores[r * 4096 + j]);
    total = __fadd_rn(total, part);
  }
  out[r] = total;
}

// An atomicAdd accumulation: the order of the adds is the hardware's schedule.
__global__ void planted_atomic_add(const float* x, float* y, int k) {
  const int r = blockIdx.x;
  for (int i = threadIdx.x; i < k; i += blockDim.x) atomicAdd(&y[r], x[r * k + i]);
}

// A reduction tree that depends on the thread count: the block size is the launch's choice.
__global__ void planted_tree_by_threads(const float* x, float* y, int k) {
  __shared__ float s[1024];
  const int r = blockIdx.x;
  float acc = 0.f;
  for (int i = threadIdx.x; i < k; i += blockDim.x) acc = __fadd_rn(acc, x[r * k + i]);
  s[threadIdx.x] = acc;
  __syncthreads();
  for (int half = blockDim.x / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) s[threadIdx.x] = __fadd_rn(s[threadIdx.x], s[threadIdx.x + half]);
    __syncthreads();
  }
  if (threadIdx.x == 0) y[r] = s[0];
}

// Attention tiles aligned to the chunk start instead of logical positions: the online-softmax
// tile boundaries move with the chunk the query came in.
__global__ void planted_tiles_at_chunk_start(const float* scores, float* out, const int* positions,
                                             const int* chunk_start) {
  const int r = blockIdx.x;
  const int p = positions[r];
  const int c0 = chunk_start[r];
  float run_max = -INFINITY, run_sum = 0.f;
  for (int t0 = c0 % 32 - 32; t0 <= p; t0 += 32) {
    float tile_max = -INFINITY;
    for (int j = max(t0, 0); j < t0 + 32 && j <= p; ++j) tile_max = fmaxf(tile_max, scores[r * 4096 + j]);
    const float new_max = fmaxf(run_max, tile_max);
    float s = 0.f;
    for (int j = max(t0, 0); j < t0 + 32 && j <= p; ++j) s = __fadd_rn(s, __expf(scores[r * 4096 + j] - new_max));
    run_sum = __fadd_rn(__fmul_rn(run_sum, __expf(run_max - new_max)), s);
    run_max = new_max;
  }
  out[r] = run_sum;
}

// The same kernel done right, tiles at multiples of 32 of the logical position: must be proven.
__global__ void clean_tiles_at_logical_positions(const float* scores, float* out, const int* positions,
                                                 const int* chunk_start) {
  const int r = blockIdx.x;
  const int p = positions[r];
  float run_max = -INFINITY, run_sum = 0.f;
  for (int t0 = 0; t0 <= p; t0 += 32) {
    float tile_max = -INFINITY;
    for (int j = t0; j < t0 + 32 && j <= p; ++j) tile_max = fmaxf(tile_max, scores[r * 4096 + j]);
    const float new_max = fmaxf(run_max, tile_max);
    float s = 0.f;
    for (int j = t0; j < t0 + 32 && j <= p; ++j) s = __fadd_rn(s, __expf(scores[r * 4096 + j] - new_max));
    run_sum = __fadd_rn(__fmul_rn(run_sum, __expf(run_max - new_max)), s);
    run_max = new_max;
  }
  out[r] = run_sum;
}

// Rows zero-filled by a bound that is not the row count: rows in [m/2, m) are stored with zeros
// where their inputs should be (a row mask must compare a row coordinate with m itself).
__global__ void planted_rows_masked_by_half_m(const float* x, const float* w, float* y, int m, int n, int k) {
  const int r = blockIdx.x, c = threadIdx.x;
  float acc = 0.f;
  for (int i = 0; i < k; ++i) {
    const float xv = r < m / 2 ? x[r * k + i] : 0.f;
    acc = __fmaf_rn(xv, w[c * k + i], acc);
  }
  if (r < m) y[r * n + c] = acc;
}

// Partial sums staged in a shared slot the batch picks: the reader takes slot 0, which holds
// another partial when the batch is large.
__global__ void planted_shared_slot_from_rows(const float* x, float* y, int k, int num_rows) {
  __shared__ float part[2][256];
  const int r = blockIdx.x;
  float acc = 0.f;
  for (int i = threadIdx.x; i < k; i += 256) acc = __fadd_rn(acc, x[r * k + i]);
  part[num_rows > 64 ? 1 : 0][threadIdx.x] = acc;
  part[num_rows > 64 ? 0 : 1][threadIdx.x] = 0.f;
  __syncthreads();
  if (threadIdx.x == 0) {
    float s = 0.f;
    for (int t = 0; t < 256; ++t) s = __fadd_rn(s, part[0][t]);
    y[r] = s;
  }
}

// A shared value written only when the batch is small: the reader sees this row's sum or the
// previous tile's, depending on the batch.
__global__ void planted_shared_write_under_batch_branch(const float* x, float* y, int k, int num_rows) {
  __shared__ float total;
  const int r = blockIdx.x;
  for (int tile = 0; tile < 4; ++tile) {
    if (threadIdx.x == 0 && num_rows < 32) {
      float s = 0.f;
      for (int i = 0; i < k; ++i) s = __fadd_rn(s, x[(r * 4 + tile) * k + i]);
      total = s;
    }
    __syncthreads();
    if (threadIdx.x == 0) y[r * 4 + tile] = total;
    __syncthreads();
  }
}

// The same done right: rows at or past m read zeros and are not stored (a row mask): must be proven.
__global__ void clean_rows_masked_by_m(const float* x, const float* w, float* y, int m, int n, int k) {
  const int r = blockIdx.x, c = threadIdx.x;
  float acc = 0.f;
  for (int i = 0; i < k; ++i) {
    const float xv = r < m ? x[r * k + i] : 0.f;
    acc = __fmaf_rn(xv, w[c * k + i], acc);
  }
  if (r < m) y[r * n + c] = acc;
}

// A swizzled staging buffer beside the operand tile (CUTLASS's epilogue writes i ^ 8 as
// i + (bit ? -8 : 8), the bit being one of i's own): written under a batch branch 8 elements too
// far, into the operand tile, whose read then depends on the batch.
__global__ void __launch_bounds__(64) planted_swizzle_past_staging(const float* x, float* y, int num_rows) {
  __shared__ float smem[128];  // [0, 64): the staging buffer; [64, 128): the operand tile
  const int t = threadIdx.x, r = blockIdx.x;
  const int swizzled = ((t & 1) << 3) | ((t >> 1) & 7) | (t & 48);  // bit 3 is t's bit 0
  const int flip = (t & 1) ? -8 : 8;                                // swizzled + flip == swizzled ^ 8
  smem[64 + t] = x[r * 64 + t];
  if (num_rows < 32) smem[8 + swizzled + flip] = 0.f;
  __syncthreads();
  y[r * 64 + t] = __fadd_rn(smem[64 + t], 1.f);
}

// The same done right: the swizzled writes stay inside the staging buffer (the intervals of
// swizzled + flip reach past it; the exact per-thread values do not): must be proven.
__global__ void __launch_bounds__(64) clean_swizzle_in_staging(const float* x, float* y, int num_rows) {
  __shared__ float smem[128];  // [0, 64): the staging buffer; [64, 128): the operand tile
  const int t = threadIdx.x, r = blockIdx.x;
  const int swizzled = ((t & 1) << 3) | ((t >> 1) & 7) | (t & 48);
  const int flip = (t & 1) ? -8 : 8;
  smem[64 + t] = x[r * 64 + t];
  if (num_rows < 32) smem[swizzled + flip] = 0.f;
  __syncthreads();
  y[r * 64 + t] = __fadd_rn(smem[64 + t], 1.f);
}
