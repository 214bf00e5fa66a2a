// moe_permute and moe_gather (moe_kernels.h, steps 2 and 3). The permutation is integer work in
// one CTA: the entries in chunks of kPermuteThreads, in entry order; within a chunk, each entry's
// rank among the earlier entries of its expert from the warp's match mask and the earlier warps'
// counts; a running count per expert across chunks. No atomics: every value is a sum of counts.
#include <string>

#include "kernels/cuda/cuda_status.h"
#include "kernels/cuda/moe/moe_kernels.h"

namespace vosti {
namespace {

constexpr int kPermuteThreads = 1024;
constexpr int kPermuteWarps = kPermuteThreads / 32;
constexpr int kGatherThreads = 128;

struct PermuteParams {
  const int32_t* experts;
  int num_entries, top_k, num_experts, block_m, max_tiles;
  int32_t* pos;
  int32_t* src_token;
  MoeTile* tiles;
  int32_t* num_tiles;
};

// pos[i] = entry i's rank among the entries of its expert (entries j < i with the same expert);
// run[e] = expert e's count.
__device__ void rank_entries(const PermuteParams& p, int (*warp_count)[kMaxMoeExperts], int* run) {
  const int tid = static_cast<int>(threadIdx.x), lane = tid & 31, warp = tid >> 5, E = p.num_experts;
  for (int e = tid; e < E; e += kPermuteThreads) run[e] = 0;
  for (int base = 0; base < p.num_entries; base += kPermuteThreads) {
    for (int j = tid; j < kPermuteWarps * E; j += kPermuteThreads) warp_count[j / E][j % E] = 0;
    __syncthreads();
    const int i = base + tid;
    const int e = i < p.num_entries ? p.experts[i] : -1;
    const unsigned same = __match_any_sync(0xffffffffu, e);
    const unsigned earlier = same & ((1u << lane) - 1u);
    if (e >= 0 && earlier == 0) warp_count[warp][e] = __popc(same);
    __syncthreads();
    if (e >= 0) {
      int rank = run[e] + __popc(earlier);
      for (int w = 0; w < warp; ++w) rank += warp_count[w][e];
      p.pos[i] = rank;
    }
    __syncthreads();
    for (int x = tid; x < E; x += kPermuteThreads)
      for (int w = 0; w < kPermuteWarps; ++w) run[x] += warp_count[w][x];
    __syncthreads();
  }
}

__global__ void __launch_bounds__(kPermuteThreads) moe_permute_kernel(PermuteParams p) {
  __shared__ int warp_count[kPermuteWarps][kMaxMoeExperts];
  __shared__ int run[kMaxMoeExperts];           // [E] count of each expert
  __shared__ int offset[kMaxMoeExperts + 1];    // [E + 1] first permuted row of each expert
  __shared__ int tile_off[kMaxMoeExperts + 1];  // [E + 1] first tile of each expert
  const int tid = static_cast<int>(threadIdx.x), E = p.num_experts;
  rank_entries(p, warp_count, run);
  if (tid == 0) {  // exclusive scans in expert order
    int rows = 0, tiles = 0;
    for (int e = 0; e < E; ++e) {
      offset[e] = rows;
      tile_off[e] = tiles;
      rows += run[e];
      tiles += (run[e] + p.block_m - 1) / p.block_m;
    }
    offset[E] = rows;
    tile_off[E] = tiles;
    *p.num_tiles = tiles < p.max_tiles ? tiles : p.max_tiles;
  }
  __syncthreads();
  for (int i = tid; i < p.num_entries; i += kPermuteThreads) {  // the entries this thread ranked
    const int at = offset[p.experts[i]] + p.pos[i];
    p.pos[i] = at;
    p.src_token[at] = i / p.top_k;
  }
  const int num_tiles = tile_off[E] < p.max_tiles ? tile_off[E] : p.max_tiles;
  for (int j = tid; j < num_tiles; j += kPermuteThreads) {
    int lo = 0, hi = E - 1;  // the last expert whose first tile is <= j (it has tile j)
    while (lo < hi) {
      const int mid = (lo + hi + 1) >> 1;
      if (tile_off[mid] <= j) {
        lo = mid;
      } else {
        hi = mid - 1;
      }
    }
    const int row0 = offset[lo] + (j - tile_off[lo]) * p.block_m;
    p.tiles[j] = MoeTile{lo, row0, offset[lo + 1], offset[lo]};
  }
}

// One CTA per permuted row: x_perm[row] = h[src_token[row]], 16 bytes a thread.
__global__ void __launch_bounds__(kGatherThreads)
    moe_gather_kernel(const uint4* h, const int32_t* src_token, int row_chunks, uint4* x_perm) {
  const int row = static_cast<int>(blockIdx.x);
  const uint4* src = h + static_cast<long long>(src_token[row]) * row_chunks;
  uint4* dst = x_perm + static_cast<long long>(row) * row_chunks;
  for (int c = static_cast<int>(threadIdx.x); c < row_chunks; c += kGatherThreads) dst[c] = src[c];
}

}  // namespace

Status moe_permute(const MoePermuteArgs& a, cudaStream_t stream) {
  if (a.experts == nullptr || a.pos == nullptr || a.src_token == nullptr || a.tiles == nullptr ||
      a.num_tiles == nullptr)
    return invalid_argument("moe_permute: experts, pos, src_token, tiles and num_tiles must be device pointers");
  if (a.num_experts < 1 || a.num_experts > kMaxMoeExperts || a.top_k < 1 || a.block_m < 1)
    return invalid_argument("moe_permute: " + std::to_string(a.num_experts) + " experts (at most " +
                            std::to_string(kMaxMoeExperts) + "), top_k " + std::to_string(a.top_k));
  if (a.num_entries < 1 || a.num_entries > 0x3fffffff || a.num_entries % a.top_k != 0)
    return invalid_argument("moe_permute: entry count out of range or not a multiple of top_k");
  if (a.max_tiles < moe_max_tiles(a.num_entries, a.num_experts, a.block_m) || a.max_tiles > 0x7fffffff)
    return invalid_argument("moe_permute: max_tiles below moe_max_tiles() of the entries");
  PermuteParams p{};
  p.experts = a.experts;
  p.num_entries = static_cast<int>(a.num_entries);
  p.top_k = a.top_k;
  p.num_experts = a.num_experts;
  p.block_m = a.block_m;
  p.max_tiles = static_cast<int>(a.max_tiles);
  p.pos = a.pos;
  p.src_token = a.src_token;
  p.tiles = a.tiles;
  p.num_tiles = a.num_tiles;
  moe_permute_kernel<<<1, kPermuteThreads, 0, stream>>>(p);
  return cuda_launch_status("moe_permute_kernel");
}

Status moe_gather(const uint16_t* h, const int32_t* src_token, int64_t num_entries, int64_t hidden, uint16_t* x_perm,
                  cudaStream_t stream) {
  if (h == nullptr || src_token == nullptr || x_perm == nullptr)
    return invalid_argument("moe_gather: h, src_token and x_perm must be device pointers");
  if (hidden < 8 || hidden % 8 != 0 || num_entries < 1 || num_entries > 0x7fffffff)
    return invalid_argument("moe_gather: hidden " + std::to_string(hidden) + " must be a multiple of 8");
  const auto chunks = static_cast<int>(hidden / 8);
  moe_gather_kernel<<<static_cast<unsigned>(num_entries), kGatherThreads, 0, stream>>>(
      reinterpret_cast<const uint4*>(h), src_token, chunks, reinterpret_cast<uint4*>(x_perm));
  return cuda_launch_status("moe_gather_kernel");
}

}  // namespace vosti
