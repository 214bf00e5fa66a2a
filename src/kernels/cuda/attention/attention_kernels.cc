#include "kernels/cuda/attention/attention_kernels.h"

#include <algorithm>
#include <string>

#include "kernels/cuda/cuda_device.h"
#include "kernels/cuda/cuda_status.h"

namespace vosti {
namespace {

// Raises `k`'s dynamic shared-memory limit where it needs more than the default 48 KiB and counts
// the CTAs of it that fit the device at once.
Status prepare(AttentionKernel& k, const CudaDevice& device) {
  if (k.function == nullptr) return Status();
  if (k.smem_bytes > 48 * 1024) {
    VOSTI_CUDA_RETURN_IF_ERROR(
        cudaFuncSetAttribute(k.function, cudaFuncAttributeMaxDynamicSharedMemorySize, k.smem_bytes));
  }
  int per_sm = 0;
  VOSTI_CUDA_RETURN_IF_ERROR(
      cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, k.function, k.threads, static_cast<size_t>(k.smem_bytes)));
  k.resident_ctas = std::max(1, device.num_sms * per_sm);
  return Status();
}

}  // namespace

Result<AttentionKernels> prepare_attention_kernels(const CudaDevice& device, int head_dim) {
  AttentionKernels out;
  out.head_dim = head_dim;
  out.num_sms = device.num_sms;
  out.has_wgmma = device.has_wgmma;
  for (const auto registry : {attention_stream_kernels(), attention_wgmma_kernels(), attention_decode_kernels()}) {
    for (const AttentionKernel& k : registry) {
      if (k.function == nullptr || k.head_dim != head_dim) continue;
      const int o = attention_out_index(k.out);
      AttentionKernel* slot = nullptr;
      switch (k.kind) {
        case AttentionKernelKind::kStream:
          slot = &out.stream[o][k.fold ? 1 : 0][k.blocks - 1];
          break;
        case AttentionKernelKind::kWgmma:
          // Its body is sm_90a's; elsewhere the launcher never picks it (has_wgmma).
          if (device.has_wgmma) slot = &out.wgmma[o][k.fold ? 1 : 0];
          break;
        case AttentionKernelKind::kDecode:
          slot = &out.decode[o];
          break;
      }
      if (slot == nullptr) continue;
      *slot = k;
      VOSTI_RETURN_IF_ERROR(prepare(*slot, device));
    }
  }
  VOSTI_RETURN_IF_ERROR(prepare_attention_per_query(head_dim));
  return out;
}

}  // namespace vosti
