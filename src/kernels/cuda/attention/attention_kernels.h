// The tensor-core attention's compiled kernels as data: each kernel's translation unit registers
// its instantiations of attention_instances.def (the __global__ function, its threads and shared
// memory), and prepare_attention_kernels() resolves, once per model, the ones a head_dim uses on
// a device: it raises their dynamic shared-memory limits and counts how many CTAs of each fit the
// device at once. The launcher (attention_launch.cu) then launches from that table; no launch
// queries the driver or keeps state of its own.
// Thread safety: the registries are immutable; prepare_attention_kernels() may run on any thread
// (cudaFuncSetAttribute is the CUDA context's, and idempotent).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <span>

#include "core/dtype.h"
#include "core/status.h"
#include "kernels/cuda/attention/attention.h"

namespace vosti {

struct CudaDevice;

enum class AttentionKernelKind : uint8_t { kStream, kWgmma, kDecode };

// One instantiation: which kernel, for what, and how it launches. function == nullptr: none.
struct AttentionKernel {
  AttentionKernelKind kind = AttentionKernelKind::kStream;
  int head_dim = 0;
  DType out = DType::kF32;  // kF32 or kBF16
  bool fold = false;
  int blocks = 1;                  // m16 row blocks per warp (the CTA's rows: 64 x blocks)
  const void* function = nullptr;  // the __global__ function (cudaLaunchKernel)
  int threads = 0;
  int smem_bytes = 0;     // dynamic shared memory
  int resident_ctas = 0;  // CTAs that fit the device at once (set by prepare_attention_kernels)
};

// Each translation unit's entries (lines of other kinds are empty entries).
std::span<const AttentionKernel> attention_stream_kernels();
std::span<const AttentionKernel> attention_wgmma_kernels();
std::span<const AttentionKernel> attention_decode_kernels();

// The kernels of one head_dim on one device, prepared (shared-memory limits raised, resident CTAs
// counted) for the launcher, and the device facts it reads. Output dtype index: 0 f32, 1 bf16.
struct AttentionKernels {
  int head_dim = 0;
  int num_sms = 0;
  bool has_wgmma = false;           // sm_90a: the 128-row items run the wgmma kernel
  AttentionKernel stream[2][2][2];  // [out][fold][blocks - 1]
  AttentionKernel wgmma[2][2];      // [out][fold]
  AttentionKernel decode[2];        // [out]
};

inline int attention_out_index(DType out) { return out == DType::kBF16 ? 1 : 0; }

// Prepares the tensor-core kernels of head_dim and the per-query kernels of head_dim on `device`
// (the current device). Errors: kInternal for a CUDA failure.
Result<AttentionKernels> prepare_attention_kernels(const CudaDevice& device, int head_dim);

// The per-query family's part of the above (attention_per_query.cu): raises its kernels' dynamic
// shared-memory limit for head_dim. Errors: kInternal for a CUDA failure.
Status prepare_attention_per_query(int head_dim);

// The pool checks kv_write and attention share: pointers, dtype, positive sizes, head_dim.
Status check_kv_layer(const char* op, const CudaKvLayer& kv);

// The merge of saved split states (attention_merge.cu): CTA (x, y) folds head y of merge x of
// the plan `w`; out_rows as AttentionArgs::out. REQUIRES: w.merge_grid > 0, its arrays and
// partials set. Errors: kInternal for a launch failure.
Status launch_attention_merge(const AttentionWorkView& w, int num_heads, int head_dim, float c, DType out,
                              void* out_rows, int64_t out_row_stride, cudaStream_t stream);

}  // namespace vosti
