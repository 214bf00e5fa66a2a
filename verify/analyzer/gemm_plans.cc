// vosti_gemm_plans: the GEMM launch plans the real gemm_schedule.cc selects, for the kernel
// analyzer (verify/analyzer/vosti-analyze, docs/VERIFICATION.md). Built on every build (it needs
// no GPU and no CUDA: it links gemm_schedule.cc itself, not a copy of its rules).
//   vosti_gemm_plans < shapes    (one "n k num_sms has_wgmma max_m" per line)
// For each input line it prints the schedule (instruction, k segments) and then every launch plan
// the rule selects for some m in 1..max_m, as runs of consecutive m with the same plan:
//   schedule <n> <k> <sms> <instruction> <num_segments> <num_k_blocks>
//   plan <m_first> <m_last> mma <block_m> <num_groups>
//   plan <m_first> <m_last> tma <tile> <tile_segments> <split_n> <tail_tile> <tail_segments>
//   tile <enum index> <enum name> <segments>      (every instantiation, once, first)
// Errors: a malformed line or a shape select_schedule() refuses prints "error <line>: <why>" and
// exits 1.
#include <cstdint>
#include <iostream>
#include <iterator>
#include <sstream>
#include <string>

#include "kernels/cuda/gemm/gemm_schedule.h"

namespace {

// The enum names: the per-tile translation units (gemm_tma/<name>.cu, build/ptx/.../<name>.ptx).
constexpr const char* kTileIds[] = {
#define VOSTI_GEMM_TMA_TILE(tile, ...) #tile,
#include "kernels/cuda/gemm/gemm_tma_tiles.def"
#undef VOSTI_GEMM_TMA_TILE
};
static_assert(std::size(kTileIds) == vosti::kNumGemmTmaTiles, "one name per GemmTmaTile");

using vosti::GemmInstruction;
using vosti::GemmLaunch;
using vosti::GemmSchedule;

const char* instruction_name(GemmInstruction i) {
  switch (i) {
    case GemmInstruction::kMmaSyncM16N8K16:
      return "mma_sync_m16n8k16";
    case GemmInstruction::kWgmmaTmaWarpSpecialized:
      return "wgmma_tma_warp_specialized";
  }
  return "?";
}

// The plan as one line's tail; two m with equal strings run the same kernels the same way.
std::string describe(const GemmSchedule& s, const GemmLaunch& l) {
  std::ostringstream o;
  if (s.instruction == GemmInstruction::kWgmmaTmaWarpSpecialized) {
    // "1": the k segments each instantiation evaluates (the family evaluates one since issue 38).
    o << "tma " << static_cast<int>(l.tma_tile) << " 1 " << l.tma_split_n << ' ' << static_cast<int>(l.tma_tail_tile)
      << " 1";
  } else {
    o << "mma " << l.block_m << ' ' << l.num_groups;
  }
  return o.str();
}

int run_line(const std::string& line, int line_no) {
  std::istringstream in(line);
  int64_t n = 0, k = 0, max_m = 0;
  int sms = 0, wgmma = 0;
  if (!(in >> n >> k >> sms >> wgmma >> max_m) || sms < 1 || max_m < 1) {
    std::cout << "error " << line_no << ": expected \"n k num_sms has_wgmma max_m\", got \"" << line << "\"\n";
    return 1;
  }
  const GemmInstruction instruction = vosti::select_instruction(n, k, wgmma != 0);
  const vosti::Result<GemmSchedule> schedule = vosti::select_schedule(n, k, instruction);
  if (!schedule.ok()) {
    std::cout << "error " << line_no << ": " << schedule.status().message() << "\n";
    return 1;
  }
  const GemmSchedule& s = *schedule;
  std::cout << "schedule " << n << ' ' << k << ' ' << sms << ' ' << instruction_name(s.instruction) << ' '
            << s.num_segments << ' ' << s.num_k_blocks << "\n";
  std::string current;
  int64_t first = 1;
  for (int64_t m = 1; m <= max_m + 1; ++m) {
    const std::string plan = m <= max_m ? describe(s, vosti::plan_gemm_launch(s, m, sms)) : std::string();
    if (m == 1) {
      current = plan;
      continue;
    }
    if (plan != current) {
      std::cout << "plan " << first << ' ' << m - 1 << ' ' << current << "\n";
      current = plan;
      first = m;
    }
  }
  return 0;
}

}  // namespace

int main() {
  for (const vosti::GemmTmaTile tile : vosti::kAllGemmTmaTiles) {
    std::cout << "tile " << static_cast<int>(tile) << ' ' << kTileIds[static_cast<int>(tile)] << " 1\n";
  }
  std::string line;
  int line_no = 0, status = 0;
  while (std::getline(std::cin, line)) {
    ++line_no;
    if (line.empty() || line[0] == '#') continue;
    status |= run_line(line, line_no);
  }
  return status;
}
