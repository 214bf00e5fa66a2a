// The device sampler; what it computes is documented in sampler_kernels.h, the host
// semantics it reproduces in sample/sampler.h and sample/logprobs.h. Every phase below names
// the host code it mirrors. All branches that reach a __syncthreads() depend only on the
// row's task and values shared by the whole CTA, so the CTA takes them together.
#include <string>

#include "kernels/cuda/cuda_status.h"
#include "kernels/cuda/sampler/sampler_kernels.h"
#include "sample/philox.h"
#include "sample/sampler_scalar.h"

namespace vosti {
namespace {

constexpr int kThreads = kSamplerThreads;
constexpr int kWarps = kThreads / 32;
constexpr int kCand = kMaxSamplerCandidates;
static_assert(kSumLanes <= kThreads, "the lane chains run one a thread");
static_assert(kCand <= 2 * kThreads, "the bitonic sort gives each thread at most two elements per step");

struct Smem {
  double lanes[kSumLanes];         // lane sums of the last chains run
  int32_t last_pos[kSumLanes];     // last id with a positive weight per lane (-1: none)
  unsigned long long sort[kCand];  // sort keys (bitonic)
  float cand_s[kCand];             // candidates, best first: values, weights, ids
  float cand_w[kCand];
  int32_t cand_id[kCand];
  uint32_t hist[256];
  uint32_t warp_u[kWarps];
  int32_t warp_i[kWarps];
  uint32_t prefix, mask, remaining;
  int32_t num_kept;
  int32_t token;
  int32_t fallback;
};

// ---- block-wide reductions and scans (results in every thread) ----

// max (kMax) or min of v over the CTA's threads; integers, so any order gives the same value.
template <bool kMax>
__device__ int32_t block_reduce_i32(int32_t v, Smem& sm) {
  const auto op = [](int32_t a, int32_t b) { return kMax ? max(a, b) : min(a, b); };
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = op(v, __shfl_xor_sync(0xffffffffu, v, o));
  if ((threadIdx.x & 31) == 0) sm.warp_i[threadIdx.x >> 5] = v;
  __syncthreads();
  int32_t r = sm.warp_i[0];
  for (int w = 1; w < kWarps; ++w) r = op(r, sm.warp_i[w]);
  __syncthreads();
  return r;
}
__device__ int32_t block_max_i32(int32_t v, Smem& sm) { return block_reduce_i32<true>(v, sm); }
__device__ int32_t block_min_i32(int32_t v, Smem& sm) { return block_reduce_i32<false>(v, sm); }

// Exclusive prefix sum of v over threads in thread order; *total gets the sum (integers: exact).
__device__ uint32_t block_exclusive_scan(uint32_t v, uint32_t* total, Smem& sm) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  uint32_t x = v;
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
    const uint32_t y = __shfl_up_sync(0xffffffffu, x, o);
    if (lane >= o) x += y;
  }
  if (lane == 31) sm.warp_u[warp] = x;
  __syncthreads();
  uint32_t before = 0, all = 0;
  for (int w = 0; w < kWarps; ++w) {
    if (w < warp) before += sm.warp_u[w];
    all += sm.warp_u[w];
  }
  __syncthreads();
  *total = all;
  return before + x - v;
}

// Sorts sm.sort[0..n) descending (n a power of two <= kCand); bitonic network.
__device__ void bitonic_sort_desc(int n, Smem& sm) {
  for (int k = 2; k <= n; k <<= 1) {
    for (int j = k >> 1; j > 0; j >>= 1) {
      for (int t = threadIdx.x; t < n; t += kThreads) {
        const int u = t ^ j;
        if (u > t) {
          const unsigned long long a = sm.sort[t], b = sm.sort[u];
          const bool desc = (t & k) == 0;
          if (desc ? a < b : a > b) {
            sm.sort[t] = b;
            sm.sort[u] = a;
          }
        }
      }
      __syncthreads();
    }
  }
}

__device__ int next_pow2(int n) {
  int p = 1;
  while (p < n) p <<= 1;
  return p;
}

// ---- the lane chains (sampler_math.h add_lane_sums: lane j = ids i % kSumLanes == j, ascending) ----

// sm.lanes = lane sums of weight(i), i < vocab; sm.last_pos[j] = the last id of lane j with
// weight > 0. Thread j < kSumLanes runs lane j's chain, vocab / kSumLanes dependent adds, reading
// the weights straight from the row (a step of the kSumLanes chains reads kSumLanes adjacent ids).
// The leading barrier orders the writes after every thread's earlier reads of sm.lanes.
template <class Weight>
__device__ void lane_chains(const Weight& weight, int vocab, Smem& sm) {
  __syncthreads();
  if (threadIdx.x < kSumLanes) {
    const int j = threadIdx.x;
    double acc = 0.0;
    int32_t last = -1;
#pragma unroll 8
    for (int i = j; i < vocab; i += kSumLanes) {
      const float w = weight(i);
      acc = dadd(acc, static_cast<double>(w));
      if (w > 0.0f) last = i;
    }
    sm.lanes[j] = acc;
    sm.last_pos[j] = last;
  }
  __syncthreads();
}

// sampler.cc draw() on the dense path, by one thread after lane_chains(weight): the lane, then
// its walk from its first id until the running sum passes the target (vocab / kSumLanes ids at
// most); the lane's last positive id if rounding kept it from passing. Returns -1 where the host
// would fail its check (no positive weight in the lane).
template <class Weight>
__device__ int32_t dense_draw(const Weight& weight, int vocab, double u, const Smem& sm) {
  const LanePick p = pick_lane(sm.lanes, u);
  const int j = p.lane;
  double acc = 0.0;
  for (int i = j; i < vocab; i += kSumLanes) {
    acc = dadd(acc, static_cast<double>(weight(i)));
    if (acc > p.lane_target) return i;
  }
  return sm.last_pos[j];
}

// ---- selection: the L best under (value desc, id asc) ----

// sm.cand_id / sm.cand_s [0..L) = the L best ids of value(i), i < vocab, best first (L <= kCand,
// L <= vocab). Radix select of the L-th key (select_key, 8 bits a pass), then the ids above it
// and the lowest ids equal to it, collected in id order, then sorted.
template <class Value>
__device__ void select_best(const Value& value, int vocab, int L, Smem& sm) {
  if (threadIdx.x == 0) {
    sm.prefix = 0;
    sm.mask = 0;
    sm.remaining = static_cast<uint32_t>(L);
  }
  __syncthreads();
  for (int shift = 24; shift >= 0; shift -= 8) {
    for (int b = threadIdx.x; b < 256; b += kThreads) sm.hist[b] = 0;
    __syncthreads();
    const uint32_t prefix = sm.prefix, mask = sm.mask;
    for (int i = threadIdx.x; i < vocab; i += kThreads) {
      const uint32_t k = select_key(value(i));
      if ((k & mask) == prefix) atomicAdd(&sm.hist[(k >> shift) & 255u], 1u);  // integer counts
    }
    __syncthreads();
    if (threadIdx.x == 0) {
      uint32_t cum = 0;
      int d = 255;
      for (; d > 0; --d) {
        if (cum + sm.hist[d] >= sm.remaining) break;
        cum += sm.hist[d];
      }
      sm.remaining -= cum;
      sm.prefix |= static_cast<uint32_t>(d) << shift;
      sm.mask |= 255u << shift;
    }
    __syncthreads();
  }
  const uint32_t threshold = sm.prefix;
  const uint32_t need_eq = sm.remaining;  // >= 1
  const int seg = (vocab + kThreads - 1) / kThreads;
  const int lo = min(vocab, static_cast<int>(threadIdx.x) * seg), hi = min(vocab, lo + seg);
  uint32_t n_gt = 0, n_eq = 0;
  for (int i = lo; i < hi; ++i) {
    const uint32_t k = select_key(value(i));
    n_gt += k > threshold ? 1u : 0u;
    n_eq += k == threshold ? 1u : 0u;
  }
  uint32_t total_gt = 0, total_eq = 0;
  uint32_t at_gt = block_exclusive_scan(n_gt, &total_gt, sm);
  uint32_t at_eq = block_exclusive_scan(n_eq, &total_eq, sm);
  for (int i = lo; i < hi; ++i) {
    const float v = value(i);
    const uint32_t k = select_key(v);
    if (k > threshold) {
      sm.cand_id[at_gt] = i;
      sm.cand_s[at_gt] = v;
      ++at_gt;
    } else if (k == threshold) {
      if (at_eq < need_eq) {
        sm.cand_id[total_gt + at_eq] = i;
        sm.cand_s[total_gt + at_eq] = v;
      }
      ++at_eq;
    }
  }
  __syncthreads();
  const int n = next_pow2(L);
  for (int t = threadIdx.x; t < n; t += kThreads) {
    sm.sort[t] = t < L ? (static_cast<unsigned long long>(select_key(sm.cand_s[t])) << 32) |
                             (0xffffffffu - static_cast<uint32_t>(sm.cand_id[t]))
                       : 0ull;  // below every real key (select_key(-inf) > 0)
  }
  __syncthreads();
  bitonic_sort_desc(n, sm);
  for (int t = threadIdx.x; t < L; t += kThreads) {
    const auto id = static_cast<int32_t>(0xffffffffu - static_cast<uint32_t>(sm.sort[t]));
    sm.cand_id[t] = id;
    sm.cand_s[t] = value(id);
  }
  __syncthreads();
}

// Sorts the candidates [0, n) with cand_w >= min_p by ascending id into sm.sort (payload: the
// candidate index in the low 32 bits) and sets sm.num_kept (sampler.cc: kept, erase_if, sort).
__device__ void kept_by_id(int n, float min_p, Smem& sm) {
  const int p = next_pow2(max(n, 1));
  for (int t = threadIdx.x; t < p; t += kThreads) {
    const bool keep = t < n && sm.cand_w[t] >= min_p;
    sm.sort[t] = keep ? (static_cast<unsigned long long>(0xffffffffu - static_cast<uint32_t>(sm.cand_id[t])) << 32) |
                            static_cast<uint32_t>(t)
                      : 0ull;
  }
  __syncthreads();
  bitonic_sort_desc(p, sm);
  uint32_t kept = 0;
  for (int t = threadIdx.x; t < n; t += kThreads) kept += sm.sort[t] != 0ull ? 1u : 0u;
  uint32_t total = 0;
  (void)block_exclusive_scan(kept, &total, sm);
  if (threadIdx.x == 0) sm.num_kept = static_cast<int32_t>(total);
  __syncthreads();
}

// sampler.cc draw() over the kept candidates (ascending id in sm.sort), one thread.
__device__ int32_t sparse_draw(double u, const Smem& sm) {
  double lanes[kSumLanes] = {};
  for (int t = 0; t < sm.num_kept; ++t) {
    const auto idx = static_cast<int>(static_cast<uint32_t>(sm.sort[t]));
    const int32_t id = sm.cand_id[idx];
    lanes[id % kSumLanes] = dadd(lanes[id % kSumLanes], static_cast<double>(sm.cand_w[idx]));
  }
  const LanePick p = pick_lane(lanes, u);
  double acc = 0.0;
  int32_t last = -1;
  for (int t = 0; t < sm.num_kept; ++t) {
    const auto idx = static_cast<int>(static_cast<uint32_t>(sm.sort[t]));
    const int32_t id = sm.cand_id[idx];
    if (id % kSumLanes != p.lane) continue;
    const float w = sm.cand_w[idx];
    acc = dadd(acc, static_cast<double>(w));
    if (w > 0.0f) last = id;
    if (acc > p.lane_target) return id;
  }
  return last;
}

// ---- the kernel ----

__global__ void __launch_bounds__(kThreads)
    sampler_kernel(const float* __restrict__ logits, int64_t row_stride, int vocab, const SamplerRowTask* tasks,
                   const SamplerAdjust* adjusts, float* scratch, SamplerRowResult* results) {
  __shared__ Smem sm;
  const int64_t row = blockIdx.x;
  const SamplerRowTask task = tasks[row];
  if (task.kind == kSamplerRowNone) return;
  const float* l = logits + row * row_stride;
  SamplerRowResult* out = results + row;
  const auto raw = [l](int i) { return sanitize_logit(l[i]); };

  // logprobs.cc log_softmax_stats: max by order key, lane sums of exp_from_max(l', max).
  int32_t best = INT32_MIN;
  for (int i = threadIdx.x; i < vocab; i += kThreads) best = max(best, order_key(raw(i)));
  const float raw_max = from_order_key(block_max_i32(best, sm));
  int32_t first = INT32_MAX;
  for (int i = threadIdx.x; i < vocab; i += kThreads)
    if (same_float(raw(i), raw_max)) first = min(first, i);
  const int32_t raw_argmax = block_min_i32(first, sm);
  const auto raw_weight = [&](int i) { return exp_from_max(raw(i), raw_max); };
  lane_chains(raw_weight, vocab, sm);
  if (threadIdx.x < kSumLanes) out->lanes[threadIdx.x] = sm.lanes[threadIdx.x];
  if (threadIdx.x == 0) {
    out->max = raw_max;
    out->status = kSamplerOk;
    out->num_top = 0;
    sm.fallback = 0;
  }

  // logprobs.cc top_logprobs: the n best under (l' desc, id asc).
  const int num_top = min(task.num_top, min(vocab, kMaxSamplerTop));
  if (num_top > 0) {
    select_best(raw, vocab, num_top, sm);
    for (int t = threadIdx.x; t < num_top; t += kThreads) {
      out->top_ids[t] = sm.cand_id[t];
      out->top_logits[t] = sm.cand_s[t];
    }
    if (threadIdx.x == 0) out->num_top = num_top;
  }

  if (task.kind == kSamplerRowScore) {
    if (threadIdx.x == 0) {
      out->token = task.target_token;
      out->token_logit = raw(task.target_token);
    }
    return;
  }

  // sampler.cc process_logits: bias and penalties on a copy, then the temperature.
  const bool greedy = task.temperature < kGreedyTemperature;
  const bool divide = !greedy && task.temperature != 1.0f;
  const bool adjusted = task.adjust_count > 0;
  float* s_row = scratch + row * static_cast<int64_t>(vocab);
  if (adjusted) {
    for (int i = threadIdx.x; i < vocab; i += kThreads) s_row[i] = raw(i);
    __syncthreads();
    for (int e = threadIdx.x; e < task.adjust_count; e += kThreads) {
      const SamplerAdjust a = adjusts[task.adjust_begin + e];
      float x = s_row[a.token];
      if (a.flags & kAdjustBias) x = fadd(x, a.bias);
      if (a.flags & kAdjustRepeated) x = x > 0.0f ? fdiv(x, task.repetition_penalty) : fmul(x, task.repetition_penalty);
      if (a.flags & kAdjustCounted) {
        x = fsub(x, fmul(task.frequency_penalty, static_cast<float>(a.count)));
        x = fsub(x, task.presence_penalty);
      }
      s_row[a.token] = x;
    }
    __syncthreads();
    if (divide) {
      for (int i = threadIdx.x; i < vocab; i += kThreads) s_row[i] = fdiv(s_row[i], task.temperature);
      __syncthreads();
    }
  }
  const float temperature = task.temperature;
  const auto s = [=](int i) {
    if (adjusted) return s_row[i];
    const float x = sanitize_logit(l[i]);
    return divide ? fdiv(x, temperature) : x;
  };

  // Step 4, greedy: the lowest id holding the maximum of s.
  if (greedy) {
    int32_t token = raw_argmax;
    if (adjusted) {
      int32_t b = INT32_MIN;
      for (int i = threadIdx.x; i < vocab; i += kThreads) b = max(b, order_key(s(i)));
      const float m = from_order_key(block_max_i32(b, sm));
      int32_t f = INT32_MAX;
      for (int i = threadIdx.x; i < vocab; i += kThreads)
        if (same_float(s(i), m)) f = min(f, i);
      token = block_min_i32(f, sm);
    }
    if (threadIdx.x == 0) {
      out->token = token;
      out->token_logit = raw(token);
    }
    return;
  }

  int32_t b = INT32_MIN;
  for (int i = threadIdx.x; i < vocab; i += kThreads) b = max(b, order_key(s(i)));
  const float m = from_order_key(block_max_i32(b, sm));
  const bool top_k_on = task.top_k > 0 && task.top_k < vocab;
  const bool top_p_on = task.top_p < 1.0f;
  const float min_p = task.min_p;
  const double u = sampling_uniform(task.seed, task.output_position);
  // The dense weights equal the raw ones where nothing changed s: reuse those chains.
  const bool same_as_raw = !adjusted && !divide;
  const auto w_of = [=](int i) { return exp_from_max(s(i), m); };

  if (!top_k_on && !top_p_on) {
    // Steps 7-8 on the dense path: min_p zeroes weights, the lane chains, the draw.
    const auto weight = [=](int i) {
      const float w = w_of(i);
      return min_p > 0.0f ? (w >= min_p ? w : 0.0f) : w;
    };
    if (!(same_as_raw && min_p <= 0.0f)) lane_chains(weight, vocab, sm);
    if (threadIdx.x == 0) sm.token = dense_draw(weight, vocab, u, sm);
    __syncthreads();
  } else {
    int L = 0;
    if (top_k_on) {
      L = task.top_k;
    } else {
      L = min(vocab, kCand);
      // sampler.cc select_candidates, top-p alone: Z over the whole vocabulary.
      if (!same_as_raw) lane_chains(w_of, vocab, sm);
    }
    if (L > kCand) {
      if (threadIdx.x == 0) sm.fallback = 1;
      __syncthreads();
    } else {
      select_best(s, vocab, L, sm);
      for (int t = threadIdx.x; t < L; t += kThreads) sm.cand_w[t] = exp_from_max(sm.cand_s[t], m);
      __syncthreads();
      int n = L;
      if (top_p_on) {
        double z = 0.0;
        if (top_k_on) {
          kept_by_id(L, -1.0f, sm);  // every top-k candidate, by id: Z over the top-k set
          if (threadIdx.x == 0) {
            double lanes[kSumLanes] = {};
            for (int t = 0; t < sm.num_kept; ++t) {
              const auto idx = static_cast<int>(static_cast<uint32_t>(sm.sort[t]));
              const int32_t id = sm.cand_id[idx];
              lanes[id % kSumLanes] = dadd(lanes[id % kSumLanes], static_cast<double>(sm.cand_w[idx]));
            }
            sm.lanes[0] = lanes_total(lanes);  // z, read below
          }
          __syncthreads();
          z = sm.lanes[0];
        } else {
          z = lanes_total(sm.lanes);
        }
        // sampler.cc nucleus_size over the sorted candidates.
        if (threadIdx.x == 0) {
          const double threshold = dmul(static_cast<double>(task.top_p), z);
          const int total = top_k_on ? L : vocab;
          double mass = 0.0;
          int r = 0;
          bool more = false;
          while (r < total) {
            if (r == L) {
              more = !(mass >= threshold);  // the nucleus reaches past the sorted candidates
              break;
            }
            if (mass >= threshold) break;
            mass = dadd(mass, static_cast<double>(sm.cand_w[r]));
            ++r;
          }
          sm.num_kept = r;
          sm.fallback = more ? 1 : 0;
        }
        __syncthreads();
        n = sm.num_kept;
      }
      if (!sm.fallback) {
        kept_by_id(n, min_p, sm);
        if (threadIdx.x == 0) sm.token = sparse_draw(u, sm);
        __syncthreads();
      }
    }
  }
  if (threadIdx.x == 0) {
    if (sm.fallback || sm.token < 0) {
      out->status = kSamplerHostFallback;
      out->token = -1;
    } else {
      out->token = sm.token;
      out->token_logit = raw(sm.token);
    }
  }
}

}  // namespace

Status sample_rows(const float* logits, int64_t row_stride, int64_t vocab, const SamplerRowTask* tasks,
                   const SamplerAdjust* adjusts, float* scratch, SamplerRowResult* results, int64_t num_rows,
                   cudaStream_t stream) {
  if (num_rows < 0 || num_rows > 0x7fffffff) return invalid_argument("sample_rows: bad row count");
  if (vocab < 1 || vocab > kMaxSamplerVocab)
    return invalid_argument("sample_rows: vocabulary " + std::to_string(vocab) + " outside [1, " +
                            std::to_string(kMaxSamplerVocab) + "]");
  if (row_stride < vocab) return invalid_argument("sample_rows: row_stride below the vocabulary");
  if (num_rows == 0) return Status();
  if (logits == nullptr || tasks == nullptr || scratch == nullptr || results == nullptr)
    return invalid_argument("sample_rows: null device pointer");
  sampler_kernel<<<static_cast<unsigned>(num_rows), kThreads, 0, stream>>>(logits, row_stride, static_cast<int>(vocab),
                                                                           tasks, adjusts, scratch, results);
  return cuda_launch_status("sampler_kernel");
}

}  // namespace vosti
