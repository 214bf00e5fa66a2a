// bf16 GEMM on NVIDIA tensor cores: y[m, n] = x[m, k] * w[n, k]^T (+ bias[n]),
// bf16 inputs, f32 accumulation, bf16 or f32 output: mma.sync on sm_80 and later,
// wgmma on sm_90a (the schedule's instruction); on sm_90a the deployment default is the
// CUTLASS 3 family kWgmmaTmaWarpSpecialized (gemm_bf16_sm90_tma.h: one k segment, no
// workspace), which runs small m at full speed only when the caller passes
// GemmArgs::row_capacity >= 64 (spare rows in x and y).
//
// Reduction order: the one fixed by the GemmSchedule (gemm_schedule.h): fixed k
// segments, each a chain of k16 tensor-core steps of the schedule's instruction in
// increasing k from a zero accumulator, the segment results added in segment order, then
// bias, then one rounding.
// A row's output bits depend only on that row of x, w, bias and the schedule: never on
// m, the row's index, other rows or the launch plan.
// Workspace: when the plan splits segments over CTAs, per-tile integer counters (zero
// between calls: the caller zeroes the buffer once after allocating it, every call
// leaves them zero) and f32 partials [num_segments, m, n]. No floating-point atomics.
// Thread safety: calls on different streams need different workspaces.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "core/dtype.h"
#include "core/status.h"
#include "kernels/cuda/gemm/gemm_schedule.h"

namespace vosti {

struct GemmArgs {
  const uint16_t* x = nullptr;     // [m, k] bf16, device, rows contiguous, 16-byte aligned
  const uint16_t* w = nullptr;     // [n, k] bf16, device, 16-byte aligned
  const float* bias = nullptr;     // [n] f32, device, or nullptr
  void* y = nullptr;               // [m, n] out_dtype, device
  DType out_dtype = DType::kBF16;  // kBF16 or kF32
  int64_t m = 0;
  // Rows of x and y that the call may read and write (>= m; 0 means m). Where larger, the
  // kWgmmaTmaWarpSpecialized family computes rows up to its tile height (at most row_capacity):
  // rows [m, row_capacity) of y are scratch the call may overwrite, each from the same row of x
  // (any bits, NaN included); rows < m are unaffected, since a row's arithmetic reads only its own
  // row. TMA zero-fills rows past the end of x slowly, so small-m calls with a capacity run faster.
  int64_t row_capacity = 0;
};

// Device workspace for split launches; counters must be zero before the first call.
struct GemmWorkspace {
  void* data = nullptr;
  size_t bytes = 0;
};

// The device properties a GEMM call needs, read once (kernels/cuda/cuda_device.h) and passed to
// every call, so that no call queries the driver.
struct GemmDevice {
  int device = 0;          // CUDA device ordinal
  int num_sms = 0;         // multiprocessors
  bool has_wgmma = false;  // sm_90 (H100/H200)
};

// Bytes of workspace that every call with 1..max_m rows fits in.
size_t gemm_workspace_bytes(const GemmSchedule& schedule, int64_t max_m, int num_sms);

// Enqueues the GEMM on `stream`, on the device `device` describes (read once by the caller).
// Errors: kInvalidArgument for null pointers, m < 1, m >= 2^31, an unsupported out_dtype or a
// workspace too small for the plan; kFailedPrecondition for a wgmma schedule on a GPU other than
// sm_90; kInternal for a CUDA launch failure.
Status gemm_bf16(const GemmSchedule& schedule, const GemmArgs& args, GemmWorkspace workspace, cudaStream_t stream,
                 const GemmDevice& device);

// The same GEMM with a caller-chosen launch (make_gemm_launch); the output bits are those of
// gemm_bf16(). Errors as gemm_bf16(), and kInvalidArgument for a launch not made for (schedule, m).
Status gemm_bf16_with_launch(const GemmSchedule& schedule, const GemmArgs& args, const GemmLaunch& launch,
                             GemmWorkspace workspace, cudaStream_t stream, const GemmDevice& device);

}  // namespace vosti
