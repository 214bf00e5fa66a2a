#include "kernels/cuda/gemm_schedule.h"

#include <algorithm>
#include <string>

namespace vosti {

namespace {
// Enough CTAs to cover the chip twice when m is small and the weight stream is the cost.
constexpr int64_t kTargetSmallMCtas = 256;
constexpr int kMinKBlocksPerSegment = 4;
constexpr int kMaxSegments = 16;
constexpr size_t kWorkspaceAlign = 256;
}  // namespace

Result<GemmSchedule> select_schedule(int64_t n, int64_t k) {
  if (n <= 0 || n % 8 != 0) {
    return invalid_argument("GEMM weight rows n=" + std::to_string(n) +
                            ": must be a positive multiple of 8 (pad the weight)");
  }
  if (k <= 0 || k % kGemmBlockK != 0) {
    return invalid_argument("GEMM inner dimension k=" + std::to_string(k) + ": must be a positive multiple of " +
                            std::to_string(kGemmBlockK) + " (pad the weight and activations)");
  }
  GemmSchedule s;
  s.n = n;
  s.k = k;
  s.instruction = GemmInstruction::kMmaSyncM16N8K16;
  s.num_k_blocks = static_cast<int>(k / kGemmBlockK);
  const int64_t n_tiles = (n + kGemmBlockN - 1) / kGemmBlockN;
  const int64_t wanted = (kTargetSmallMCtas + n_tiles - 1) / n_tiles;
  const int64_t most = std::max<int64_t>(1, std::min<int64_t>(kMaxSegments, s.num_k_blocks / kMinKBlocksPerSegment));
  s.num_segments = static_cast<int>(std::clamp<int64_t>(wanted, 1, most));
  return s;
}

GemmLaunch plan_gemm_launch(const GemmSchedule& schedule, int64_t m, int num_sms) {
  GemmLaunch l;
  l.block_m = m <= 16 ? 16 : (m <= 64 ? 64 : 128);
  l.num_m_tiles = static_cast<int>((m + l.block_m - 1) / l.block_m);
  l.num_n_tiles = static_cast<int>((schedule.n + kGemmBlockN - 1) / kGemmBlockN);
  const int64_t tiles = static_cast<int64_t>(l.num_m_tiles) * l.num_n_tiles;
  l.split_segments = schedule.num_segments > 1 && tiles < num_sms;
  if (l.split_segments) {
    const size_t counters = (static_cast<size_t>(tiles) * sizeof(uint32_t) + kWorkspaceAlign - 1) /
                            kWorkspaceAlign * kWorkspaceAlign;
    l.workspace_bytes = counters + static_cast<size_t>(schedule.num_segments) * static_cast<size_t>(m) *
                                       static_cast<size_t>(schedule.n) * sizeof(float);
  }
  return l;
}

}  // namespace vosti
