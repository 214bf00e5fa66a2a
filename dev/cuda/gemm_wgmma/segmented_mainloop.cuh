// Kept from src/kernels/cuda/gemm_bf16_sm90_tma.cuh (until issue 38 moved it here): the mainloop
// through which the CUTLASS family evaluated two k segments in one CTA (the Seg2 tiles), never
// planned (select_schedule gives S = 1). Not built; see NOTES.md beside it.
#pragma once

namespace vosti::gemm_detail {

// CUTLASS's warp-specialized mainloop run once per k segment, for the instantiations that
// evaluate kSegments > 1 in one CTA: segment s is the k-tiles [s * t / S, (s + 1) * t / S) of the
// tile's t, each a chain of wgmma k16 steps from a zero accumulator (the collective's first
// k-tile runs with scale-d = 0), its result added to the running f32 total in segment order:
// total = P_0, then total = total + P_s. Each segment drains its wgmma batches and releases its
// shared-memory stages before the next (the collective's mma_tail), so the kernel's own
// mma_tail has nothing left to do. t % S == 0 is checked by the host before the launch.
template <class Base, int kSegments>
struct SegmentedMainloop : Base {
  using Base::Base;
  template <class FrgTensorC>
  CUTLASS_DEVICE void mma(typename Base::MainloopPipeline pipeline, typename Base::PipelineState smem_pipe_read,
                          FrgTensorC& accum, int k_tile_count, int thread_idx,
                          typename Base::TensorStorage& shared_tensors, typename Base::Params const& params) {
    const int per_segment = k_tile_count / kSegments;
    Base::mma(pipeline, smem_pipe_read, accum, per_segment, thread_idx, shared_tensors, params);
    Base::mma_tail(pipeline, smem_pipe_read, per_segment);
    smem_pipe_read.advance(per_segment);
    auto partial = cute::make_fragment_like(accum);
    CUTLASS_PRAGMA_NO_UNROLL
    for (int s = 1; s < kSegments; ++s) {
      Base::mma(pipeline, smem_pipe_read, partial, per_segment, thread_idx, shared_tensors, params);
      Base::mma_tail(pipeline, smem_pipe_read, per_segment);
      smem_pipe_read.advance(per_segment);
      CUTLASS_PRAGMA_UNROLL
      for (int i = 0; i < cute::size(accum); ++i) accum(i) = accum(i) + partial(i);
    }
  }
  CUTLASS_DEVICE void mma_tail(typename Base::MainloopPipeline, typename Base::PipelineState, int) {}
};

}  // namespace vosti::gemm_detail
