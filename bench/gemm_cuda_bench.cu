// Benchmark of the CUDA backend on one GPU: the batch-invariant bf16 GEMM against cuBLAS
// (bf16, default heuristics, cublasGemmEx) at the Llama-3-8B projection shapes, cuBLAS's
// own row invariance (row 0 of m rows vs 1 row), and the row-wise kernels against the
// measured device-to-device copy bandwidth.
// Method (the device tool's METHOD.md): CUDA events around each launch, L2 flushed by a
// 256 MiB memset before every timed launch, warm-up first, median of many repetitions, the
// versions compared (ours, cuBLAS, ours again; a sweep's tiles and cuBLAS) interleaved round by
// round so that drift during a run reaches them alike; random inputs, never zeros. Prints a table
// per call, a ratio table per instruction family last; writes JSON with every number.
//   gemm_cuda_bench [--json out.json] [--quick] [--sweep] [--instruction mma.sync|wgmma|wgmma_tma]...
//                   [--no-rows] [--m 1,8,...] [--reps N] [--shape qkv|o|gate_up|down]...
//                   [--flush memset|read] [--placements P]
// --sweep times every launch plan of each (shape, m) (for wgmma_tma: every CUTLASS
// instantiation, for every m) and prints which wins, so plan thresholds come from measurements.
// --instruction limits the run to the named families (repeatable; default: every family the
// device runs; --instruction none: only the row-wise kernels); --no-rows leaves out the row-wise
// kernels; --m replaces the list of row counts (default 1, 8, 32, 64, 128, 129, 192, 256, 1024,
// 4096); --reps sets the timed launches per number (default 50, --quick 10; --reps 1 for a
// profiler run that should see each kernel a few times only);
// --shape limits the GEMMs to the named projection shapes (repeatable); --flush read evicts the L2
// by reading a buffer instead of the default memset (clean lines instead of dirty ones);
// --placements P gives each GEMM P copies of its operands and outputs (separate allocations, the
// same values) and round r of the timing uses copy r % P, for ours and cuBLAS alike: the medians
// then cover P placements of the buffers in memory (default 1).
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "kernels/cuda/cuda_device.h"
#include "kernels/cuda/gemm/gemm_bf16.h"
#include "kernels/cuda/rows/row_kernels.h"

namespace {

#define CK(x)                                                                                  \
  do {                                                                                         \
    cudaError_t e_ = (x);                                                                      \
    if (e_ != cudaSuccess) {                                                                   \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      std::exit(1);                                                                            \
    }                                                                                          \
  } while (0)
#define CKS(x)                                                                         \
  do {                                                                                 \
    vosti::Status s_ = (x);                                                            \
    if (!s_.ok()) {                                                                    \
      std::fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, s_.to_string().c_str()); \
      std::exit(1);                                                                    \
    }                                                                                  \
  } while (0)
#define CKB(x)                                                                                \
  do {                                                                                        \
    cublasStatus_t b_ = (x);                                                                  \
    if (b_ != CUBLAS_STATUS_SUCCESS) {                                                        \
      std::fprintf(stderr, "%s:%d: %s: cublas status %d\n", __FILE__, __LINE__, #x, int(b_)); \
      std::exit(1);                                                                           \
    }                                                                                         \
  } while (0)

struct Timing {
  double median_us, p10_us, p90_us;
  double host_us = 0;  // median host time of the call that enqueues the work
};

void* g_flush = nullptr;
constexpr size_t kFlushBytes = size_t{256} << 20;
bool g_read_flush = false;         // --flush read: evict L2 by reading the buffer, leaving clean lines
vosti::GemmDevice g_device;        // the GPU, read once in main
int g_placements = 1;              // --placements P: operand copies a GEMM's rounds rotate through
int g_round = 0;                   // the round time_interleaved is in (warm-ups: 0, 1, 2)
__device__ unsigned g_flush_sink;  // a global, not an allocation: allocations move the benchmark's buffers

// Reads the flush buffer once (16 bytes per thread and step); the sink write, never taken for
// the buffer's contents, keeps the loads alive.
__global__ void read_flush(const uint4* p, size_t n) {
  unsigned acc = 0;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    const uint4 v = p[i];
    acc ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  if (acc == 0x9e3779b9u) g_flush_sink = acc;
}

// Evicts the L2 before a timed launch: by default a 256 MiB memset (the L2 is left full of dirty
// lines of the flush buffer, which the timed kernel's misses write back), with --flush read by
// reading the (zeroed) buffer (clean lines).
void flush_l2(int i) {
  if (g_read_flush) {
    read_flush<<<4 * 132, 512>>>(static_cast<const uint4*>(g_flush), kFlushBytes / 16);  // any grid reads it all
  } else {
    CK(cudaMemsetAsync(g_flush, i & 0xff, kFlushBytes));
  }
}

// Median (and 10th / 90th percentile) times of each of `fns` over `reps` rounds; a round times
// every function once, in order, each launch after its own L2 flush, so drift in the card's
// clocks or temperature during a measurement reaches every function alike (interleaved rather
// than one function's repetitions after the other's). Each function is warmed up first.
std::vector<Timing> time_interleaved(const std::vector<std::function<void()>>& fns, int reps) {
  cudaEvent_t a, b;
  CK(cudaEventCreate(&a));
  CK(cudaEventCreate(&b));
  for (const auto& fn : fns) {
    for (int i = 0; i < 3; ++i) {
      g_round = i;
      fn();
    }
  }
  std::vector<std::vector<double>> t(fns.size()), host(fns.size());
  for (int i = 0; i < reps; ++i) {
    g_round = i;
    for (size_t f = 0; f < fns.size(); ++f) {
      flush_l2(i + int(f));
      CK(cudaEventRecord(a));
      const auto h0 = std::chrono::steady_clock::now();
      fns[f]();
      host[f].push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - h0).count());
      CK(cudaEventRecord(b));
      CK(cudaEventSynchronize(b));
      float ms = 0;
      CK(cudaEventElapsedTime(&ms, a, b));
      t[f].push_back(ms * 1000.0);
    }
  }
  CK(cudaGetLastError());
  CK(cudaEventDestroy(a));
  CK(cudaEventDestroy(b));
  std::vector<Timing> out;
  for (size_t f = 0; f < fns.size(); ++f) {
    std::vector<double>& v = t[f];
    std::sort(v.begin(), v.end());
    std::sort(host[f].begin(), host[f].end());
    out.push_back({v[v.size() / 2], v[v.size() / 10], v[v.size() * 9 / 10], host[f][host[f].size() / 2]});
  }
  return out;
}

// Median time of `fn` over `reps` launches, each after an L2 flush.
Timing time_it(const std::function<void()>& fn, int reps) { return time_interleaved({fn}, reps)[0]; }

__global__ void fill_bf16(__nv_bfloat16* p, size_t n, uint32_t seed, float scale) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    uint32_t h = uint32_t(i) * 2654435761u ^ seed;
    h ^= h >> 15;
    h *= 2246822519u;
    h ^= h >> 13;
    const float u = (h & 0xffffff) / float(0x1000000) - 0.5f;
    p[i] = __float2bfloat16(u * scale);
  }
}
__global__ void fill_f32(float* p, size_t n, uint32_t seed, float scale, float offset) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    uint32_t h = uint32_t(i) * 2654435761u ^ seed;
    h ^= h >> 15;
    h *= 2246822519u;
    h ^= h >> 13;
    p[i] = ((h & 0xffffff) / float(0x1000000) - 0.5f) * scale + offset;
  }
}

template <typename T>
T* dalloc(size_t n) {
  T* p = nullptr;
  CK(cudaMalloc(&p, n * sizeof(T)));
  return p;
}

std::string g_json;
void json_add(const std::string& obj) {
  if (!g_json.empty()) g_json += ",\n";
  g_json += "  " + obj;
}

struct Shape {
  const char* name;
  int n, k;
};

double bf16_rel_diff(const std::vector<uint16_t>& a, const std::vector<uint16_t>& b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double x = vosti::bf16_to_f32(a[i]), y = vosti::bf16_to_f32(b[i]);
    num += (x - y) * (x - y);
    den += y * y;
  }
  return std::sqrt(num / den);
}

const char* instruction_name(vosti::GemmInstruction i) {
  switch (i) {
    case vosti::GemmInstruction::kWgmmaTmaWarpSpecialized:
      return "wgmma_tma";
    default:
      return "mma.sync";
  }
}

// One line of the closing tables.
struct Summary {
  std::string instruction, shape;
  int m;
  double ours_us, cublas_us;
  std::string plan;
};
std::vector<Summary> g_summary;
std::vector<Summary> g_sweep_best;

// The plan's name: its tile, and the tail's tile and first column where the columns are split.
std::string tma_plan_name(const vosti::GemmLaunch& l) {
  std::string name = vosti::gemm_tma_tile_name(l.tma_tile);
  if (l.tma_split_n != 0)
    name += std::string(" + ") + vosti::gemm_tma_tile_name(l.tma_tail_tile) + " from " + std::to_string(l.tma_split_n);
  return name;
}

// Times every CUTLASS instantiation of the wgmma_tma family for one call, interleaved with
// cuBLAS (`cublas`), and, where gemm_plan_tma_split() would split 128 x 256's columns, that split
// with every 128-row tail tile: all give the same bits (tests/kernels_cuda), so the fastest is
// what plan_gemm_launch should pick; its ratio is to the cuBLAS time of the same rounds.
void sweep_tma_tiles(const Shape& s, const vosti::GemmSchedule& sched, vosti::GemmArgs a, int m, int num_sms,
                     double default_us, const std::function<void()>& cublas, int reps) {
  a.m = m;
  // Every instantiation (one k segment each), then the column splits below.
  std::vector<vosti::GemmLaunch> plans;
  for (vosti::GemmTmaTile tile : vosti::kAllGemmTmaTiles) plans.push_back(vosti::make_gemm_tma_launch(sched, m, tile));
  const vosti::GemmTmaTile head = vosti::GemmTmaTile::kM128N256Cooperative2x1;
  const vosti::GemmTmaSplit split = vosti::gemm_plan_tma_split(sched, m, head, num_sms);
  if (split.split_n != 0) {
    for (vosti::GemmTmaTile tail : vosti::kAllGemmTmaTiles) {
      if (vosti::gemm_tma_tile_shape(tail).m == 128) {
        plans.push_back(vosti::make_gemm_tma_split_launch(sched, m, head, split.split_n, tail));
      }
    }
  }
  std::vector<std::function<void()>> fns = {cublas};
  for (const vosti::GemmLaunch& l : plans) {
    fns.push_back([&sched, a, l] { CKS(vosti::gemm_bf16_with_launch(sched, a, l, {nullptr, 0}, nullptr, g_device)); });
  }
  const std::vector<Timing> t = time_interleaved(fns, reps);
  const double cublas_us = t[0].median_us;
  double best = 1e30;
  std::string best_name, list;
  for (size_t i = 0; i < plans.size(); ++i) {
    const std::string name = tma_plan_name(plans[i]);
    char item[160];
    std::snprintf(item, sizeof(item), "%s[\"%s\", %.2f]", list.empty() ? "" : ", ", name.c_str(), t[i + 1].median_us);
    list += item;
    if (t[i + 1].median_us < best) best = t[i + 1].median_us, best_name = name;
  }
  std::printf("    tiles (name, us): %s | cublas %.2f us | best %s %.2f us = %.2fx default, %.2fx cublas\n",
              list.c_str(), cublas_us, best_name.c_str(), best, best / default_us, best / cublas_us);
  g_sweep_best.push_back({"wgmma_tma", s.name, m, best, cublas_us, best_name});
  json_add("{\"kind\": \"gemm_tma_tiles\", \"shape\": \"" + std::string(s.name) + "\", \"M\": " + std::to_string(m) +
           ", \"cublas_us\": " + std::to_string(cublas_us) + ", \"tiles_us\": [" + list + "], \"best\": \"" +
           best_name + "\"}");
}

// Times every launch plan (m-tile height x group count dividing S) of one call: all give the
// same bits (tests/kernels_cuda), so the fastest is what plan_gemm_launch should pick.
void sweep_plans(const Shape& s, const vosti::GemmSchedule& sched, vosti::GemmArgs a, int m, vosti::GemmWorkspace ws,
                 int num_sms, double default_us, double cublas_us) {
  a.m = m;
  double best = 1e30;
  int best_bm = 0, best_groups = 0;
  std::string list;
  for (int bm : {16, 64, 128}) {
    for (int groups = 1; groups <= sched.num_segments; ++groups) {
      if (sched.num_segments % groups != 0) continue;
      const vosti::GemmLaunch l = vosti::make_gemm_launch(sched, m, bm, groups, num_sms);
      if (l.split_segments && size_t(l.num_m_tiles) * l.num_n_tiles * 4 > l.counter_bytes) continue;
      const Timing t = time_it([&] { CKS(vosti::gemm_bf16_with_launch(sched, a, l, ws, nullptr, g_device)); }, 10);
      char item[96];
      std::snprintf(item, sizeof(item), "%s[%d, %d, %.2f]", list.empty() ? "" : ", ", bm, groups, t.median_us);
      list += item;
      if (t.median_us < best) best = t.median_us, best_bm = bm, best_groups = groups;
    }
  }
  std::printf("    plans (bm, groups, us): %s | best bm %d groups %d %.2f us = %.2fx default, %.2fx cublas\n",
              list.c_str(), best_bm, best_groups, best, best / default_us, best / cublas_us);
  const char* iname = instruction_name(sched.instruction);
  std::string obj = "{\"kind\": \"gemm_plans\", \"instruction\": \"" + std::string(iname) + "\", \"shape\": \"" +
                    std::string(s.name) + "\", \"M\": " + std::to_string(m) + ", \"plans_bm_groups_inflight_us\": [" +
                    list + "]}";
  json_add(obj);
}

void bench_gemm(cublasHandle_t handle, const Shape& s, vosti::GemmInstruction instruction, const std::vector<int>& ms,
                int num_sms, int reps, bool sweep) {
  const char* iname = instruction_name(instruction);
  const bool tma = instruction == vosti::GemmInstruction::kWgmmaTmaWarpSpecialized;
  const int max_m = *std::max_element(ms.begin(), ms.end());
  // Placement p's operands (w, x) and outputs (y ours, yc cuBLAS); every p holds the same values.
  struct Operands {
    __nv_bfloat16 *w, *x, *y, *yc;
  };
  std::vector<Operands> set(static_cast<size_t>(g_placements));
  for (Operands& o : set) {
    o.w = dalloc<__nv_bfloat16>(size_t(s.n) * s.k);
    o.x = dalloc<__nv_bfloat16>(size_t(max_m) * s.k);
    o.y = dalloc<__nv_bfloat16>(size_t(max_m) * s.n);
    o.yc = dalloc<__nv_bfloat16>(size_t(max_m) * s.n);
    fill_bf16<<<1024, 256>>>(o.w, size_t(s.n) * s.k, 1234u + s.n, 0.1f);
    fill_bf16<<<1024, 256>>>(o.x, size_t(max_m) * s.k, 99u + s.k, 2.0f);
  }
  CK(cudaGetLastError());
  __nv_bfloat16 *w = set[0].w, *x = set[0].x, *y = set[0].y, *yc = set[0].yc;  // checks and sweeps: placement 0
  auto* y1 = dalloc<__nv_bfloat16>(size_t(s.n));
  const vosti::GemmSchedule sched = vosti::select_schedule(s.n, s.k, instruction).value();
  const int sweep_max_m = 1024;  // every plan is timed up to this m
  const size_t ws_bytes =
      std::max({size_t{256}, vosti::gemm_workspace_bytes(sched, max_m, num_sms),
                vosti::make_gemm_launch(sched, sweep_max_m, 64, sched.num_segments, num_sms).workspace_bytes});
  void* ws = dalloc<unsigned char>(ws_bytes);
  CK(cudaMemset(ws, 0, ws_bytes));
  const float alpha = 1.f, beta = 0.f;
  for (int m : ms) {
    vosti::GemmArgs a;
    a.x = reinterpret_cast<const uint16_t*>(x);
    a.w = reinterpret_cast<const uint16_t*>(w);
    a.y = y;
    a.out_dtype = vosti::DType::kBF16;
    a.m = m;
    // x and y hold max_m rows: the CUTLASS family may compute up to a whole tile of rows
    // (GemmArgs::row_capacity), as an engine with activation buffers of max_m rows does.
    a.row_capacity = max_m;
    auto cublas = [&](int rows, void* out) {
      CKB(cublasGemmEx(handle, CUBLAS_OP_T, CUBLAS_OP_N, s.n, rows, s.k, &alpha, w, CUDA_R_16BF, s.k, x, CUDA_R_16BF,
                       s.k, &beta, out, CUDA_R_16BF, s.n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    };
    // Ours, cuBLAS and ours again (the same version twice: the spread of the measurement),
    // interleaved, round r on placement r % P.
    auto placed_args = [&] {  // `a` on this round's placement
      const Operands& o = set[static_cast<size_t>(g_round % g_placements)];
      vosti::GemmArgs b = a;
      b.x = reinterpret_cast<const uint16_t*>(o.x);
      b.w = reinterpret_cast<const uint16_t*>(o.w);
      b.y = o.y;
      return b;
    };
    auto ours_placed = [&] { CKS(vosti::gemm_bf16(sched, placed_args(), {ws, ws_bytes}, nullptr, g_device)); };
    auto cublas_placed = [&] {
      const Operands& o = set[static_cast<size_t>(g_round % g_placements)];
      CKB(cublasGemmEx(handle, CUBLAS_OP_T, CUBLAS_OP_N, s.n, m, s.k, &alpha, o.w, CUDA_R_16BF, s.k, o.x, CUDA_R_16BF,
                       s.k, &beta, o.yc, CUDA_R_16BF, s.n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    };
    // The TMA family's plan also with the weight's L2 hint flipped (GemmLaunch::tma_stream_weights,
    // NOTES v20), in the same rounds: a cache hint, the same bits.
    const vosti::GemmLaunch l = vosti::plan_gemm_launch(sched, m, num_sms);
    vosti::GemmLaunch flipped_hint = l;
    flipped_hint.tma_stream_weights = !l.tma_stream_weights;
    auto flipped_placed = [&] {
      CKS(vosti::gemm_bf16_with_launch(sched, placed_args(), flipped_hint, {ws, ws_bytes}, nullptr, g_device));
    };
    std::vector<std::function<void()>> fns = {ours_placed, cublas_placed, ours_placed};
    if (tma) fns.push_back(flipped_placed);
    const std::vector<Timing> times = time_interleaved(fns, reps);
    const Timing to = times[0], tc = times[1], to2 = times[2];
    const Timing tf = tma ? times[3] : Timing{0, 0, 0};
    g_round = 0;
    ours_placed();          // y (placement 0) holds the plan's result for the checks below
    Timing tight{0, 0, 0};  // the CUTLASS family without spare rows (TMA zero-fills the tile's rows past m)
    if (tma) {
      vosti::GemmArgs t = a;
      t.row_capacity = 0;
      tight = time_it([&] { CKS(vosti::gemm_bf16(sched, t, {ws, ws_bytes}, nullptr, g_device)); }, reps);
    }
    // Agreement with cuBLAS and row-0 invariance of both.
    std::vector<uint16_t> ho(size_t(m) * s.n), hc(size_t(m) * s.n), row(s.n);
    CK(cudaMemcpy(ho.data(), y, ho.size() * 2, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(hc.data(), yc, hc.size() * 2, cudaMemcpyDeviceToHost));
    const double diff = bf16_rel_diff(ho, hc);
    cublas(1, y1);
    CK(cudaMemcpy(row.data(), y1, size_t(s.n) * 2, cudaMemcpyDeviceToHost));
    const bool cublas_inv = std::memcmp(row.data(), hc.data(), size_t(s.n) * 2) == 0;
    a.m = 1;
    a.row_capacity = 0;
    a.y = y1;
    CKS(vosti::gemm_bf16(sched, a, {ws, ws_bytes}, nullptr, g_device));
    CK(cudaMemcpy(row.data(), y1, size_t(s.n) * 2, cudaMemcpyDeviceToHost));
    const bool ours_inv = std::memcmp(row.data(), ho.data(), size_t(s.n) * 2) == 0;
    const double bytes = 2.0 * (double(m) * s.k + double(s.n) * s.k + double(m) * s.n);
    const double flops = 2.0 * m * double(s.n) * s.k;
    std::printf(
        "%-9s %-8s %5d x %-5d M=%-5d ours %8.2f us (again %8.2f) %7.0f GB/s %6.1f TF/s | cublas %8.2f us %6.1f TF/s"
        " | ratio %.2f | rel diff %.1e | inv ours %d cublas %d | host %.1f / %.1f us | bm %d groups %d S %d%s%s%s\n",
        iname, s.name, s.n, s.k, m, to.median_us, to2.median_us, bytes / to.median_us / 1e3, flops / to.median_us / 1e6,
        tc.median_us, flops / tc.median_us / 1e6, to.median_us / tc.median_us, diff, ours_inv, cublas_inv, to.host_us,
        tc.host_us, l.block_m, l.num_groups, sched.num_segments, tma ? " | " : "", tma ? tma_plan_name(l).c_str() : "",
        tma ? (" | no spare rows " + std::to_string(tight.median_us) + " us | weights evict-first " +
               std::to_string(int(l.tma_stream_weights)) + ", flipped " + std::to_string(tf.median_us) + " us")
                  .c_str()
            : "");
    g_summary.push_back(
        {iname, s.name, m, to.median_us, tc.median_us, tma ? tma_plan_name(l) : std::to_string(l.block_m)});
    char buf[1024];
    std::snprintf(buf, sizeof(buf),
                  "{\"kind\": \"gemm\", \"instruction\": \"%s\", \"shape\": \"%s\", \"N\": %d, \"K\": %d, \"M\": %d, "
                  "\"ours_us\": %.3f, "
                  "\"ours_p10_us\": %.3f, \"ours_p90_us\": %.3f, \"ours_again_us\": %.3f, \"cublas_us\": %.3f, "
                  "\"cublas_p10_us\": %.3f, \"cublas_p90_us\": %.3f, \"ratio_ours_over_cublas\": %.4f, "
                  "\"ours_GBps\": %.1f, \"ours_TFs\": %.2f, \"cublas_GBps\": %.1f, \"cublas_TFs\": %.2f, "
                  "\"rel_diff_vs_cublas\": %.3e, \"ours_row0_equals_M1\": %s, \"cublas_row0_equals_M1\": %s, "
                  "\"block_m\": %d, \"groups\": %d, \"segments\": %d, \"ours_no_spare_rows_us\": %.3f, "
                  "\"weights_evict_first\": %s, \"ours_hint_flipped_us\": %.3f, \"ours_host_us\": %.2f, "
                  "\"cublas_host_us\": %.2f, \"flush\": \"%s\", \"placements\": %d}",
                  iname, s.name, s.n, s.k, m, to.median_us, to.p10_us, to.p90_us, to2.median_us, tc.median_us,
                  tc.p10_us, tc.p90_us, to.median_us / tc.median_us, bytes / to.median_us / 1e3,
                  flops / to.median_us / 1e6, bytes / tc.median_us / 1e3, flops / tc.median_us / 1e6, diff,
                  ours_inv ? "true" : "false", cublas_inv ? "true" : "false", l.block_m, l.num_groups,
                  sched.num_segments, tight.median_us, l.tma_stream_weights ? "true" : "false", tf.median_us,
                  to.host_us, tc.host_us, g_read_flush ? "read" : "memset", g_placements);
    json_add(buf);
    a.y = y;  // the sweep writes m rows
    a.row_capacity = max_m;
    if (sweep && tma)
      sweep_tma_tiles(
          s, sched, a, m, num_sms, to.median_us, [&] { cublas(m, yc); }, std::max(10, reps / 2));
    if (sweep && !tma && m <= sweep_max_m) {
      sweep_plans(s, sched, a, m, {ws, ws_bytes}, num_sms, to.median_us, tc.median_us);
    }
  }
  for (const Operands& o : set) {
    CK(cudaFree(o.w));
    CK(cudaFree(o.x));
    CK(cudaFree(o.y));
    CK(cudaFree(o.yc));
  }
  CK(cudaFree(y1));
  CK(cudaFree(ws));
}

// The ratio (ours / cuBLAS, same run) per shape and m for each family, and the sweep's winners.
void print_summary(const std::vector<int>& ms) {
  std::vector<std::string> families;
  for (const Summary& r : g_summary)
    if (std::find(families.begin(), families.end(), r.instruction) == families.end()) families.push_back(r.instruction);
  const char* shapes[] = {"qkv", "o", "gate_up", "down"};
  auto table = [&](const std::vector<Summary>& rows, const std::string& family, const char* title) {
    std::printf("\n%s %s: ours/cublas (ours us)\n%-8s", title, family.c_str(), "shape");
    for (int m : ms) std::printf(" %14d", m);
    std::printf("\n");
    for (const char* sh : shapes) {
      std::printf("%-8s", sh);
      for (int m : ms) {
        const Summary* hit = nullptr;
        for (const Summary& r : rows)
          if (r.instruction == family && r.shape == sh && r.m == m) hit = &r;
        if (hit) {
          std::printf("  %5.2f (%6.1f)", hit->ours_us / hit->cublas_us, hit->ours_us);
        } else {
          std::printf(" %14s", "-");
        }
      }
      std::printf("\n");
    }
  };
  for (const std::string& f : families) table(g_summary, f, "ratio");
  if (!g_sweep_best.empty()) {
    table(g_sweep_best, "wgmma_tma", "best instantiation");
    table(g_sweep_best, "wgmma_tma S=2", "best two-segment instantiation");
    std::printf("winners:\n");
    for (const Summary& r : g_sweep_best)
      std::printf("  %-13s %-8s M=%-5d %s\n", r.instruction.c_str(), r.shape.c_str(), r.m, r.plan.c_str());
  }
}

void report_row(const char* name, double bytes, const Timing& t, double copy_tbps) {
  const double gbps = bytes / t.median_us / 1e3;
  std::printf("%-22s %8.2f us %7.0f GB/s  %5.1f%% of copy (p10 %.2f us = %.1f%%, p90 %.2f us)\n", name, t.median_us,
              gbps, gbps / (copy_tbps * 10.0), t.p10_us, bytes / t.p10_us / 1e3 / (copy_tbps * 10.0), t.p90_us);
  char buf[1024];
  std::snprintf(buf, sizeof(buf),
                "{\"kind\": \"row\", \"op\": \"%s\", \"bytes\": %.0f, \"us\": %.3f, \"GBps\": %.1f, "
                "\"fraction_of_copy\": %.4f, \"p10_us\": %.3f, \"p90_us\": %.3f}",
                name, bytes, t.median_us, gbps, gbps / (copy_tbps * 1000.0), t.p10_us, t.p90_us);
  json_add(buf);
}

void bench_rows(double copy_tbps, int reps) {
  const int64_t m = 16384, h = 4096;  // [m, h] f32 = 256 MiB
  float* a = dalloc<float>(size_t(m) * h);
  float* b = dalloc<float>(size_t(m) * h);
  float* wt = dalloc<float>(size_t(h));
  auto* o16 = dalloc<__nv_bfloat16>(size_t(m) * h);
  fill_f32<<<1024, 256>>>(a, size_t(m) * h, 1, 4.0f, 0.1f);
  fill_f32<<<1024, 256>>>(b, size_t(m) * h, 2, 4.0f, 0.0f);
  fill_f32<<<64, 256>>>(wt, size_t(h), 3, 0.5f, 1.0f);
  CK(cudaGetLastError());
  const double mh = double(m) * h;
  report_row("rms_norm f32->bf16", mh * 6,
             time_it([&] { CKS(vosti::rms_norm(a, m, h, wt, 1e-5f, o16, vosti::DType::kBF16, nullptr)); }, reps),
             copy_tbps);
  report_row("add_rms_norm ->bf16", mh * 14,
             time_it([&] { CKS(vosti::add_rms_norm(a, b, m, h, wt, 1e-5f, o16, vosti::DType::kBF16, nullptr)); }, reps),
             copy_tbps);
  // silu_mul: gate_up [m/2, 2h] f32 -> [m/2, h] bf16.
  report_row("silu_mul f32->bf16", mh * 5,
             time_it([&] { CKS(vosti::silu_mul(a, m / 2, h, o16, vosti::DType::kBF16, nullptr)); }, reps), copy_tbps);
  report_row("bias_add f32", mh * 8, time_it([&] { CKS(vosti::bias_add(a, m, h, wt, nullptr)); }, reps), copy_tbps);
  int32_t* pos = dalloc<int32_t>(size_t(m));
  std::vector<int32_t> hp(m);
  for (int64_t i = 0; i < m; ++i) hp[i] = int32_t(i % 8192);
  CK(cudaMemcpy(pos, hp.data(), m * 4, cudaMemcpyHostToDevice));
  report_row("rope neox 32x128", mh * 8,
             time_it([&] { CKS(vosti::rope(a, h, m, 32, 128, pos, wt, vosti::RopeLayout::kNeox, nullptr)); }, reps),
             copy_tbps);
  report_row("head_rms_norm 32x128", mh * 8,
             time_it([&] { CKS(vosti::head_rms_norm(a, h, m, 32, 128, wt, 1e-6f, nullptr)); }, reps), copy_tbps);
  // Embedding: m ids into a 32768-row bf16 table; reads m * h bf16, writes m * h f32.
  const int vocab = 32768;
  int32_t* ids = dalloc<int32_t>(size_t(m));
  for (int64_t i = 0; i < m; ++i) hp[i] = int32_t((i * 7919) % vocab);
  CK(cudaMemcpy(ids, hp.data(), m * 4, cudaMemcpyHostToDevice));
  auto* table = dalloc<__nv_bfloat16>(size_t(vocab) * h);
  fill_bf16<<<1024, 256>>>(table, size_t(vocab) * h, 5, 1.0f);
  report_row(
      "embedding bf16->f32", mh * 6,
      time_it(
          [&] {
            CKS(vosti::embedding_gather(reinterpret_cast<const uint16_t*>(table), vocab, h, ids, m, 1.0f, b, nullptr));
          },
          reps),
      copy_tbps);
  CK(cudaFree(a));
  CK(cudaFree(b));
  CK(cudaFree(wt));
  CK(cudaFree(o16));
  CK(cudaFree(pos));
  CK(cudaFree(ids));
  CK(cudaFree(table));
}

}  // namespace

int main(int argc, char** argv) {
  std::string json_path;
  bool quick = false, sweep = false, rows = true;
  int reps_arg = 0;
  std::vector<std::string> only, only_shapes;
  // The issue's row counts, plus 129 and 192: just past the 128-row plans, where the cost steps up
  // (dev/cuda/NOTES.md v14), so that the table shows that region too.
  std::vector<int> ms = {1, 8, 32, 64, 128, 129, 192, 256, 1024, 4096};
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--json") && i + 1 < argc) json_path = argv[++i];
    if (!std::strcmp(argv[i], "--quick")) quick = true;
    if (!std::strcmp(argv[i], "--sweep")) sweep = true;
    if (!std::strcmp(argv[i], "--no-rows")) rows = false;
    if (!std::strcmp(argv[i], "--reps") && i + 1 < argc) reps_arg = std::max(1, std::atoi(argv[++i]));
    if (!std::strcmp(argv[i], "--instruction") && i + 1 < argc) only.push_back(argv[++i]);
    if (!std::strcmp(argv[i], "--shape") && i + 1 < argc) only_shapes.push_back(argv[++i]);
    if (!std::strcmp(argv[i], "--flush") && i + 1 < argc) g_read_flush = !std::strcmp(argv[++i], "read");
    if (!std::strcmp(argv[i], "--placements") && i + 1 < argc) g_placements = std::max(1, std::atoi(argv[++i]));
    if (!std::strcmp(argv[i], "--m") && i + 1 < argc) {
      ms.clear();
      for (char* t = std::strtok(argv[++i], ","); t != nullptr; t = std::strtok(nullptr, ","))
        ms.push_back(std::atoi(t));
    }
  }
  int dev_count = 0;
  if (cudaGetDeviceCount(&dev_count) != cudaSuccess || dev_count == 0) {
    std::fprintf(stderr, "gemm_cuda_bench: no CUDA device\n");
    return 2;
  }
  cudaDeviceProp prop{};
  CK(cudaGetDeviceProperties(&prop, 0));
  g_device = vosti::read_cuda_device().value().gemm();
  std::printf("device: %s, %d SMs, L2 %d MiB\n", prop.name, prop.multiProcessorCount, prop.l2CacheSize >> 20);
  if (g_placements > 1)
    std::printf("placements: %d copies of each GEMM's buffers, round r on copy r %% %d\n", g_placements, g_placements);
  CK(cudaMalloc(&g_flush, kFlushBytes));
  CK(cudaMemset(g_flush, 0, kFlushBytes));
  const int reps = reps_arg > 0 ? reps_arg : (quick ? 10 : 50);

  // Copy ceiling: device-to-device, bytes read + written.
  const size_t copy_bytes = size_t(2) << 30;
  void* c0 = dalloc<unsigned char>(copy_bytes);
  void* c1 = dalloc<unsigned char>(copy_bytes);
  CK(cudaMemset(c0, 1, copy_bytes));
  const Timing tcopy = time_it([&] { CK(cudaMemcpyAsync(c1, c0, copy_bytes, cudaMemcpyDeviceToDevice)); }, 10);
  const double copy_tbps = 2.0 * copy_bytes / tcopy.median_us / 1e6;
  std::printf("copy: %.2f TB/s (2 GiB d2d, read+write)\n", copy_tbps);
  CK(cudaFree(c0));
  CK(cudaFree(c1));
  char buf[1024];
  std::snprintf(buf, sizeof(buf), "{\"kind\": \"copy\", \"TBps\": %.4f, \"device\": \"%s\", \"sms\": %d}", copy_tbps,
                prop.name, prop.multiProcessorCount);
  json_add(buf);

  cublasHandle_t handle;
  CKB(cublasCreate(&handle));
  const std::vector<Shape> shapes = {
      {"qkv", 6144, 4096}, {"o", 4096, 4096}, {"gate_up", 28672, 4096}, {"down", 4096, 14336}};
  std::vector<vosti::GemmInstruction> instructions = {vosti::GemmInstruction::kMmaSyncM16N8K16};
  if (g_device.has_wgmma) instructions.push_back(vosti::GemmInstruction::kWgmmaTmaWarpSpecialized);
  for (vosti::GemmInstruction instruction : instructions) {
    if (!only.empty() && std::find(only.begin(), only.end(), instruction_name(instruction)) == only.end()) continue;
    for (const Shape& s : shapes) {
      if (!only_shapes.empty() && std::find(only_shapes.begin(), only_shapes.end(), s.name) == only_shapes.end())
        continue;
      bench_gemm(handle, s, instruction, ms, prop.multiProcessorCount, reps, sweep);
    }
  }
  if (rows) bench_rows(copy_tbps, reps);
  print_summary(ms);
  CKB(cublasDestroy(handle));

  if (!json_path.empty()) {
    FILE* f = std::fopen(json_path.c_str(), "w");
    if (f == nullptr) {
      std::fprintf(stderr, "cannot write %s\n", json_path.c_str());
      return 1;
    }
    std::fprintf(f, "[\n%s\n]\n", g_json.c_str());
    std::fclose(f);
  }
  return 0;
}
