#include "runner/cuda/cuda_graphs.h"

#include <array>

#include "kernels/cuda/cuda_status.h"

namespace vosti {
namespace {

// Padded batch sizes of the decode graphs (each up to the runner's caps; the cap itself is the last).
constexpr std::array<int64_t, 19> kGraphSizes = {1,   2,   4,   8,   16,  24,  32,  48,  64, 96,
                                                 128, 160, 192, 224, 256, 320, 384, 448, 512};

}  // namespace

DecodeGraphs::~DecodeGraphs() {
  for (auto& [size, exec] : graphs_) (void)cudaGraphExecDestroy(exec);
}

int64_t DecodeGraphs::size_for(int64_t num_seqs) const {
  if (!enabled_) return 0;
  for (int64_t g : kGraphSizes)
    if (g >= num_seqs && g <= max_rows_) return g;
  return num_seqs <= max_rows_ ? max_rows_ : 0;
}

cudaGraphExec_t DecodeGraphs::find(int64_t size) const {
  const auto it = graphs_.find(size);
  return it == graphs_.end() ? nullptr : it->second;
}

Status DecodeGraphs::capture(int64_t size, cudaStream_t stream, const std::function<Status()>& enqueue) {
  cudaGraph_t graph = nullptr;
  Status captured =
      cuda_status(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), "cudaStreamBeginCapture");
  if (captured.ok()) {
    captured = enqueue();
    const cudaError_t ended = cudaStreamEndCapture(stream, &graph);
    if (captured.ok()) captured = cuda_status(ended, "cudaStreamEndCapture");
  }
  cudaGraphExec_t exec = nullptr;
  if (captured.ok()) captured = cuda_status(cudaGraphInstantiate(&exec, graph, 0), "cudaGraphInstantiate");
  if (graph != nullptr) (void)cudaGraphDestroy(graph);
  if (!captured.ok()) {
    (void)cudaGetLastError();
    enabled_ = false;
    return captured;
  }
  graphs_[size] = exec;
  return Status();
}

}  // namespace vosti
