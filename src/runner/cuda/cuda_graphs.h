// DecodeGraphs: the CUDA runner's graphs of decode steps (every request one new token, no scored
// row), one per padded batch size G (1, 2, 4, 8, 16, 24, ..., up to the runner's caps), captured
// after the first eager step of that size and replayed for every later one. A graph records the
// forward and the logits of G rows at the step buffer's fixed addresses (step_buffer.h); padding
// rows change no bit (every kernel is row-invariant), which the harness's graphs-off variation checks.
// Thread safety: one owner (the runner), on its stream.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <functional>
#include <map>

#include "core/status.h"

namespace vosti {

class DecodeGraphs {
 public:
  // Graphs of up to max_rows rows (min(max_num_seqs, max_num_batched_tokens)); none if !enabled.
  DecodeGraphs(bool enabled, int64_t max_rows) : enabled_(enabled), max_rows_(max_rows) {}
  ~DecodeGraphs();
  DecodeGraphs(const DecodeGraphs&) = delete;
  DecodeGraphs& operator=(const DecodeGraphs&) = delete;

  bool enabled() const { return enabled_; }
  // The padded size of a decode step of num_seqs sequences, or 0 (no graph: run eagerly).
  int64_t size_for(int64_t num_seqs) const;
  // The graph of `size`, or null (not captured yet).
  cudaGraphExec_t find(int64_t size) const;
  // Records what `enqueue` enqueues on `stream` as the graph of `size`. On failure the runner runs
  // eagerly from then on (the bits are the same either way) and the error is returned.
  Status capture(int64_t size, cudaStream_t stream, const std::function<Status()>& enqueue);

 private:
  bool enabled_;
  int64_t max_rows_;
  std::map<int64_t, cudaGraphExec_t> graphs_;  // padded batch size -> decode graph
};

}  // namespace vosti
