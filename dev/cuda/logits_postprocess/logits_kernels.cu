// Logits post-processing; the reduction order is documented in logits_kernels.h.
#include <climits>
#include <string>

#include "kernels/cuda/cuda_status.h"
#include "dev/cuda/logits_postprocess/logits_kernels.h"

namespace vosti {
namespace {

constexpr int kLogitsWarps = kLogitsThreads / 32;
constexpr int kGroupsPerThread = static_cast<int>(kLogitsChunk / 4 / kLogitsThreads);
static_assert(kLogitsChunk % (4 * kLogitsThreads) == 0, "a chunk is whole groups of four for every thread");

// One chunk's partial: its max, argmax and sum relative to its max (step 2 of the header).
struct ChunkStats {
  float max;
  int32_t argmax;
  float z;
  float pad;
};

// Programmatic dependent launch (sm_90): a kernel launched with it may start while the previous
// kernel on the stream finishes; wait_for_previous_kernel() then blocks until that kernel has
// completed and its writes are visible, so only the launch latency overlaps, never the data.
// allow_next_kernel() lets the next such kernel be scheduled early. No-ops before sm_90.
__device__ __forceinline__ void wait_for_previous_kernel() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}
__device__ __forceinline__ void allow_next_kernel() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// NaN -> -inf, every other value unchanged (fmaxf returns the other operand for a NaN).
__device__ __forceinline__ float sanitize(float x) { return fmaxf(x, -INFINITY); }

// a ranks before b in the total order (value desc, id asc). REQUIRES: no NaN.
__device__ __forceinline__ bool ranks_before(float va, int32_t ia, float vb, int32_t ib) {
  return va > vb || (va == vb && ia < ib);
}

// e(x, m) of the header: exactly 1 where x == m (+0 == -0, and infinities), else __expf(x - m)
// (ex2.approx of (x - m) * log2(e): a few ulp, ample for a normaliser). REQUIRES: x <= m, no NaN.
__device__ __forceinline__ float exp_from_max(float x, float m) { return x == m ? 1.0f : __expf(__fsub_rn(x, m)); }

// The elements thread t owns in one chunk (the groups of the header), loaded up front: all of a
// thread's loads are in flight before the first is used. Indices fit int32 (V < 2^31).
struct OwnedElements {
  float4 v[kGroupsPerThread];
};

// The row index of element 0 of the thread's j-th group in `chunk`.
__device__ __forceinline__ int32_t group_start(int32_t chunk, int j) {
  return chunk * static_cast<int32_t>(kLogitsChunk) + (static_cast<int32_t>(threadIdx.x) + j * kLogitsThreads) * 4;
}

// kVec4 (V % 4 == 0 and 16-byte aligned rows) changes how elements are loaded, never which;
// kFull (the chunk lies below V) only drops the bounds checks.
template <bool kVec4, bool kFull>
__device__ __forceinline__ OwnedElements load_owned(const float* row, int32_t vocab, int32_t chunk) {
  OwnedElements e;
#pragma unroll
  for (int j = 0; j < kGroupsPerThread; ++j) {
    const int32_t i = group_start(chunk, j);
    if constexpr (kVec4) {
      e.v[j] = kFull || i < vocab ? *reinterpret_cast<const float4*>(row + i) : make_float4(0.f, 0.f, 0.f, 0.f);
    } else {
      e.v[j].x = kFull || i < vocab ? row[i] : 0.f;
      e.v[j].y = kFull || i + 1 < vocab ? row[i + 1] : 0.f;
      e.v[j].z = kFull || i + 2 < vocab ? row[i + 2] : 0.f;
      e.v[j].w = kFull || i + 3 < vocab ? row[i + 3] : 0.f;
    }
  }
  return e;
}

// The chunk in shared memory: element i of the row (chunk * kLogitsChunk <= i < the chunk's end)
// at buf[i - chunk * kLogitsChunk]. With kVec4 on sm_90, one bulk asynchronous copy (TMA) issued by
// thread 0 and completed on an mbarrier, so a multiprocessor keeps one whole chunk in flight per
// resident block whatever the registers hold; otherwise the block's threads copy it element by
// element. Either way the same values land at the same places: the arithmetic below never sees
// which way they came.
template <bool kVec4>
__device__ __forceinline__ void stage_chunk(const float* row, int32_t vocab, int32_t chunk, float* buf, uint64_t* bar) {
  const int32_t start = chunk * static_cast<int32_t>(kLogitsChunk);
  const int32_t count = min(static_cast<int32_t>(kLogitsChunk), vocab - start);
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  if constexpr (kVec4) {  // count * 4 is a multiple of 16 and row + start 16-byte aligned (V % 4 == 0)
    const auto bar_addr = static_cast<uint32_t>(__cvta_generic_to_shared(bar));
    if (threadIdx.x == 0) {
      asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(bar_addr) : "memory");
      asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
      asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar_addr), "r"(count * 4) : "memory");
      asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
                       static_cast<uint32_t>(__cvta_generic_to_shared(buf))),
                   "l"(row + start), "r"(count * 4), "r"(bar_addr)
                   : "memory");
    }
    __syncthreads();  // the barrier is initialised before anyone waits on it
    uint32_t done = 0;
    do {
      asm volatile("{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], 0; selp.u32 %0, 1, 0, p; }"
                   : "=r"(done)
                   : "r"(bar_addr)
                   : "memory");
    } while (done == 0);
    return;
  }
#endif
  (void)bar;
  for (int32_t i = static_cast<int32_t>(threadIdx.x); i < count; i += kLogitsThreads) buf[i] = row[start + i];
  __syncthreads();
}

// Four staged elements, read from shared memory each time asked (a volatile load: the compiler
// neither keeps a chunk's 32 values per thread live across the walks below nor spills them).
__device__ __forceinline__ float4 load_staged(const float* p) {
  float4 v;
  asm volatile("ld.shared.v4.f32 {%0, %1, %2, %3}, [%4];"
               : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w)
               : "r"(static_cast<uint32_t>(__cvta_generic_to_shared(p))));
  return v;
}

// Calls f(i, x_i) for the owned elements of the staged chunk below vocab in increasing i
// (kReverse: decreasing); the groups of the header, read from shared memory on each walk.
template <bool kFull, bool kReverse = false, typename F>
__device__ __forceinline__ void visit_staged(const float* buf, int32_t vocab, int32_t chunk, F f) {
#pragma unroll 2
  for (int jj = 0; jj < kGroupsPerThread; ++jj) {
    const int j = kReverse ? kGroupsPerThread - 1 - jj : jj;
    const int32_t i = group_start(chunk, j);
    const float4 v = load_staged(buf + (static_cast<int32_t>(threadIdx.x) + j * kLogitsThreads) * 4);
    const float x[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
    for (int kk = 0; kk < 4; ++kk) {
      const int k = kReverse ? 3 - kk : kk;
      if (kFull || i + k < vocab) f(i + k, x[k]);
    }
  }
}

// Step 1 for one thread: its max m_t (the value at its lowest index holding it), that index
// (INT_MAX if it owns nothing) and z_t.
struct ThreadPartial {
  float max;
  int32_t argmax;
  float z;
};

template <bool kFull>
__device__ __forceinline__ ThreadPartial thread_partial(const float* buf, int32_t vocab, int32_t chunk) {
  float m = -INFINITY;
  visit_staged<kFull>(buf, vocab, chunk, [&](int32_t, float x) { m = fmaxf(m, x); });  // NaN ignored: read as -inf
  int32_t id = INT_MAX;
  if (m == -INFINITY) {  // every owned element is -inf or NaN: the first owned one
    if (group_start(chunk, 0) < vocab) id = group_start(chunk, 0);
  } else {
    visit_staged<kFull, true>(buf, vocab, chunk, [&](int32_t i, float x) {
      if (x == m) id = i;  // the last hit of the reversed walk is the lowest index
    });
  }
  // The value stored at id, so that +0 / -0 is the one stored there whatever fmaxf chose.
  float at_id = m;
  if (m == 0.0f) {
    visit_staged<kFull>(buf, vocab, chunk, [&](int32_t i, float x) {
      if (i == id) at_id = x;
    });
  }
  float z = 0.0f;
  visit_staged<kFull>(buf, vocab, chunk, [&](int32_t, float x) { z = __fadd_rn(z, exp_from_max(sanitize(x), at_id)); });
  return {at_id, id, z};
}

// Steps 1-2: grid (C, m). A block holds little in registers (its chunk is in shared memory), so
// many blocks are resident per multiprocessor and their chunks' loads overlap the others' arithmetic.
template <bool kVec4>
__global__ void __launch_bounds__(kLogitsThreads, 8)
    logits_chunk_kernel(const float* logits, int32_t vocab, int num_chunks, ChunkStats* partials) {
  __shared__ alignas(128) float buf[kLogitsChunk];
  __shared__ uint64_t bar;
  __shared__ float warp_value[kLogitsWarps];
  __shared__ int32_t warp_id[kLogitsWarps];
  __shared__ float warp_sum[kLogitsWarps];
  const int64_t r = blockIdx.y;
  const int32_t c = static_cast<int32_t>(blockIdx.x);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  allow_next_kernel();
  stage_chunk<kVec4>(logits + r * vocab, vocab, c, buf, &bar);
  const ThreadPartial p =
      (c + 1) * kLogitsChunk <= vocab ? thread_partial<true>(buf, vocab, c) : thread_partial<false>(buf, vocab, c);
  float best = p.max;
  int32_t best_id = p.argmax;
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) {
    const float v = __shfl_xor_sync(0xffffffffu, best, offset);
    const int32_t id = __shfl_xor_sync(0xffffffffu, best_id, offset);
    if (ranks_before(v, id, best, best_id)) best = v, best_id = id;
  }
  if (lane == 0) warp_value[warp] = best, warp_id[warp] = best_id;
  __syncthreads();
  best = warp_value[0], best_id = warp_id[0];
#pragma unroll
  for (int w = 1; w < kLogitsWarps; ++w)
    if (ranks_before(warp_value[w], warp_id[w], best, best_id)) best = warp_value[w], best_id = warp_id[w];
  float z = __fmul_rn(p.z, exp_from_max(p.max, best));
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) z = __fadd_rn(z, __shfl_xor_sync(0xffffffffu, z, offset));
  if (lane == 0) warp_sum[warp] = z;
  __syncthreads();
  if (threadIdx.x != 0) return;
  z = warp_sum[0];
#pragma unroll
  for (int w = 1; w < kLogitsWarps; ++w) z = __fadd_rn(z, warp_sum[w]);
  partials[r * num_chunks + c] = ChunkStats{best, best_id, z, 0.f};
}

// Step 3: one warp per row, kCombineRows rows a block. The max and argmax over the chunks by a
// butterfly under the total order (exact in any order); Z by lane 0's order of the header: the
// chunk terms, computed by lane c % 32, added one by one in chunk order via shuffles (so every
// lane holds the same running sum).
constexpr int kCombineRows = 4;

__global__ void logits_combine_kernel(const ChunkStats* partials, int64_t m, int num_chunks, LogitsRowStats* stats) {
  const int64_t r = static_cast<int64_t>(blockIdx.x) * kCombineRows + (threadIdx.x >> 5);
  const int lane = threadIdx.x & 31;
  allow_next_kernel();
  wait_for_previous_kernel();  // the chunk partials
  if (r >= m) return;          // the whole warp: r is the same for its lanes
  const ChunkStats* p = partials + r * num_chunks;
  float best = -INFINITY;
  int32_t best_id = INT_MAX;  // ranks after every chunk's (max, argmax): argmax < V
  for (int c = lane; c < num_chunks; c += 32)
    if (ranks_before(p[c].max, p[c].argmax, best, best_id)) best = p[c].max, best_id = p[c].argmax;
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) {
    const float v = __shfl_xor_sync(0xffffffffu, best, offset);
    const int32_t id = __shfl_xor_sync(0xffffffffu, best_id, offset);
    if (ranks_before(v, id, best, best_id)) best = v, best_id = id;
  }
  float z = 0.0f;
  for (int base = 0; base < num_chunks; base += 32) {
    const int c = base + lane;
    const float term = c < num_chunks ? __fmul_rn(p[c].z, exp_from_max(p[c].max, best)) : 0.0f;
    const int count = min(32, num_chunks - base);
    for (int l = 0; l < count; ++l) z = __fadd_rn(z, __shfl_sync(0xffffffffu, term, l));
  }
  if (lane == 0) stats[r] = LogitsRowStats{log(static_cast<double>(z)), best, best_id};
}

// The logprobs row: grid (C, m). Each thread rewrites only elements it has read, so lp may alias logits.
template <bool kVec4, bool kFull>
__device__ __forceinline__ void write_logprobs(const float* row, int32_t vocab, int32_t c, float best, double log_sum,
                                               float* out) {
  const OwnedElements e = load_owned<kVec4, kFull>(row, vocab, c);
  auto lp = [&](float x) {
    x = sanitize(x);
    const float d = x == best ? 0.0f : __fsub_rn(x, best);
    return static_cast<float>(__dsub_rn(static_cast<double>(d), log_sum));
  };
#pragma unroll
  for (int j = 0; j < kGroupsPerThread; ++j) {
    const int32_t i = group_start(c, j);
    if constexpr (kVec4) {  // whole 16-byte stores: every warp store covers whole sectors
      if (kFull || i < vocab)
        *reinterpret_cast<float4*>(out + i) = make_float4(lp(e.v[j].x), lp(e.v[j].y), lp(e.v[j].z), lp(e.v[j].w));
    } else {
      if (kFull || i < vocab) out[i] = lp(e.v[j].x);
      if (kFull || i + 1 < vocab) out[i + 1] = lp(e.v[j].y);
      if (kFull || i + 2 < vocab) out[i + 2] = lp(e.v[j].z);
      if (kFull || i + 3 < vocab) out[i + 3] = lp(e.v[j].w);
    }
  }
}

template <bool kVec4>
__global__ void __launch_bounds__(kLogitsThreads, 8)
    logprobs_kernel(const float* logits, int32_t vocab, const LogitsRowStats* stats, float* logprobs) {
  const int64_t r = blockIdx.y;
  const int32_t c = static_cast<int32_t>(blockIdx.x);
  wait_for_previous_kernel();  // the row stats
  const float best = stats[r].max;
  const double log_sum = stats[r].log_sum;
  if ((c + 1) * kLogitsChunk <= vocab) {
    write_logprobs<kVec4, true>(logits + r * vocab, vocab, c, best, log_sum, logprobs + r * vocab);
  } else {
    write_logprobs<kVec4, false>(logits + r * vocab, vocab, c, best, log_sum, logprobs + r * vocab);
  }
}

// Launches kernel<<<grid, block, 0, stream>>>(args...) as a programmatic dependent launch where
// the device supports it (sm_90 and later), else as a plain launch.
template <typename... Params, typename... Args>
cudaError_t launch_after_previous(void (*kernel)(Params...), dim3 grid, dim3 block, cudaStream_t stream, Args... args) {
  int device = 0, major = 0;
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess) {
    return cudaGetLastError();
  }
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t config{};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = 0;
  config.stream = stream;
  config.attrs = attr;
  config.numAttrs = major >= 9 ? 1 : 0;
  return cudaLaunchKernelEx(&config, kernel, static_cast<Params>(args)...);
}

int chunks_of(int64_t vocab) { return static_cast<int>((vocab + kLogitsChunk - 1) / kLogitsChunk); }

}  // namespace

size_t logits_workspace_bytes(int64_t m, int64_t vocab) {
  if (m <= 0 || vocab <= 0) return 0;
  return static_cast<size_t>(m) * static_cast<size_t>(chunks_of(vocab)) * sizeof(ChunkStats);
}

Status logits_postprocess(const float* logits, int64_t m, int64_t vocab, LogitsRowStats* stats, float* logprobs,
                          void* workspace, size_t workspace_bytes, cudaStream_t stream) {
  if (m < 0 || m > 65535) {
    return invalid_argument("logits_postprocess: row count m=" + std::to_string(m) +
                            " out of range (at most 65535 rows a call)");
  }
  if (vocab < 1 || vocab > INT_MAX - kLogitsChunk) {  // element indices stay in int32
    return invalid_argument("logits_postprocess: vocabulary size " + std::to_string(vocab) + " out of range");
  }
  if (logits == nullptr || stats == nullptr) return invalid_argument("logits_postprocess: null device pointer");
  if (m == 0) return Status();
  if (workspace == nullptr || workspace_bytes < logits_workspace_bytes(m, vocab)) {
    return invalid_argument("logits_postprocess: workspace of " + std::to_string(workspace_bytes) + " bytes, " +
                            std::to_string(logits_workspace_bytes(m, vocab)) +
                            " needed (logits_workspace_bytes(m, vocab))");
  }
  const int num_chunks = chunks_of(vocab);
  auto* partials = static_cast<ChunkStats*>(workspace);
  const bool vec4 = vocab % 4 == 0 && reinterpret_cast<uintptr_t>(logits) % 16 == 0 &&
                    (logprobs == nullptr || reinterpret_cast<uintptr_t>(logprobs) % 16 == 0);
  const dim3 grid(static_cast<unsigned>(num_chunks), static_cast<unsigned>(m));
  if (vec4) {
    logits_chunk_kernel<true>
        <<<grid, kLogitsThreads, 0, stream>>>(logits, static_cast<int32_t>(vocab), num_chunks, partials);
  } else {
    logits_chunk_kernel<false>
        <<<grid, kLogitsThreads, 0, stream>>>(logits, static_cast<int32_t>(vocab), num_chunks, partials);
  }
  VOSTI_RETURN_IF_ERROR(cuda_launch_status("logits_postprocess (chunks)"));
  const cudaError_t combine =
      launch_after_previous(logits_combine_kernel, dim3(static_cast<unsigned>((m + kCombineRows - 1) / kCombineRows)),
                            dim3(kCombineRows * 32), stream, partials, m, num_chunks, stats);
  VOSTI_RETURN_IF_ERROR(cuda_status(combine, "logits_postprocess (combine)"));
  if (logprobs == nullptr) return Status();
  const cudaError_t lp =
      launch_after_previous(vec4 ? logprobs_kernel<true> : logprobs_kernel<false>, grid, dim3(kLogitsThreads), stream,
                            logits, static_cast<int32_t>(vocab), static_cast<const LogitsRowStats*>(stats), logprobs);
  return cuda_status(lp, "logits_postprocess (logprobs)");
}

}  // namespace vosti
