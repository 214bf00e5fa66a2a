// The tensor-core attention's launcher (attention.h, family 1): checks the call, turns the plan's
// view (AttentionWorkView) into kernel parameters and launches the folded items, the per-split
// items and the merge from the prepared kernel table (attention_kernels.h). Which kernel runs an
// item is a function of the deployment (head_dim, group, block size, the device's wgmma) and of
// the plan's row shape, and every one of them computes a row's bits the same way (attention.h).
#include <cuda_bf16.h>

#include <algorithm>
#include <string>

#include "kernels/cuda/attention/attention.h"
#include "kernels/cuda/attention/attention_kernels.h"
#include "kernels/cuda/attention/attention_mma_tile.cuh"
#include "kernels/cuda/cuda_status.h"

namespace vosti {
namespace {

using attention_mma::MmaParams;

// Launches a streaming kernel over `items` work items of `heads` KV heads: grid (heads, CTAs), the
// heads of an item next to each other in the launch order. resident_only: at most as many CTAs as
// fit the device at once (prepare_attention_kernels counted them), each streaming its items' tiles
// (the per-split launch, whose graph form reads its count on the device); otherwise one CTA an
// item (up to the grid's limit), so that the hardware hands the next item to whichever SM is free:
// the folded items, whose lengths differ (the plan puts the longest first).
Status launch_streaming(const AttentionKernel& k, const MmaParams& p, int items, int heads, bool resident_only,
                        cudaStream_t stream) {
  const int cap = resident_only ? std::max(1, k.resident_ctas / heads) : 65535;  // 65535: grid.y's limit
  items = std::min(items, cap);
  MmaParams params = p;
  void* args[] = {&params};
  VOSTI_CUDA_RETURN_IF_ERROR(
      cudaLaunchKernel(k.function, dim3(static_cast<unsigned>(heads), static_cast<unsigned>(items)),
                       dim3(static_cast<unsigned>(k.threads)), args, static_cast<size_t>(k.smem_bytes), stream));
  return cuda_launch_status("attention (tensor cores)");
}

Status no_instance(int hd, const char* what) {
  return unimplemented("attention: head_dim " + std::to_string(hd) + " has no tensor-core instantiation " + what +
                       " (attention_instances.def)");
}

// The streaming kernel of (fold, blocks) over the items.
Status launch_stream(const AttentionKernels& ks, int o, bool fold, int blocks, const MmaParams& p, int items, int heads,
                     bool resident_only, cudaStream_t stream) {
  const AttentionKernel& k = ks.stream[o][fold ? 1 : 0][blocks - 1];
  if (k.function == nullptr) {
    return no_instance(ks.head_dim, blocks > 1 ? "for 128-row CTAs (two m16 blocks a warp)" : "");
  }
  return launch_streaming(k, p, items, heads, resident_only, stream);
}

// The per-split items: attention_decode_kernel where attention_decode_fits (functions of the
// deployment), else the streaming kernel's one-split form.
Status launch_per_split(const AttentionKernels& ks, int o, const MmaParams& p, int items, int heads, bool folds,
                        cudaStream_t stream) {
  const int hd = ks.head_dim;
  const bool decode = attention_decode_fits(hd, p.group, p.block_size);
  if (folds && !decode)
    return invalid_argument(
        "attention (tensor cores): the plan folds decode rows in the per-split kernel, which "
        "needs attention_decode_fits (head_dim " +
        std::to_string(hd) + ", group " + std::to_string(p.group) + ", block size " + std::to_string(p.block_size) +
        ")");
  if (decode && ks.decode[o].function != nullptr) return launch_streaming(ks.decode[o], p, items, heads, true, stream);
  return launch_stream(ks, o, false, 1, p, items, heads, true, stream);
}

// The folded items [first, first + count) with or without the fold, at the plan's rows per CTA:
// with 128 rows, the wgmma kernel where the device has wgmma and an instantiation, else two m16
// blocks a warp.
Status launch_folded(const AttentionKernels& ks, int o, bool fold, const AttentionWorkView& w, MmaParams p, int first,
                     int count, int heads, cudaStream_t stream) {
  if (count <= 0) return Status();
  p.work = w.folded + first;
  p.num_work_dev = nullptr;
  p.num_work_host = count;
  if (w.folded_rows == 2 * kAttnRowsPerCta) {
    static_assert(attention_mma::Shape<128, 2, true>::kRowsPerThread == 128 / 16, "attention_two_blocks_fit's rows");
    if (!attention_two_blocks_fit(ks.head_dim, p.block_size))
      return unimplemented("attention (tensor cores): " + std::to_string(2 * kAttnRowsPerCta) +
                           "-row CTAs need a power-of-two block size of " +
                           std::to_string(std::max(1, ks.head_dim / 16)) + " to 64 positions, not " +
                           std::to_string(p.block_size));
    const AttentionKernel& wg = ks.wgmma[o][fold ? 1 : 0];
    if (ks.has_wgmma && wg.function != nullptr) {  // the same bits as the two-block kernel (wgmma_ptx.cuh), sooner
      return launch_streaming(wg, p, count, heads, false, stream);
    }
    return launch_stream(ks, o, fold, 2, p, count, heads, false, stream);
  }
  return launch_stream(ks, o, fold, 1, p, count, heads, false, stream);
}

MmaParams mma_params(const AttentionArgs& a, const CudaKvLayer& kv) {
  const AttentionWorkView& w = a.work;
  MmaParams p{};
  p.q = a.q;
  p.q_row_stride = a.q_row_stride;
  p.num_heads = a.num_heads;
  p.group = a.num_heads / kv.num_kv_heads;
  p.block_tables = a.block_tables;
  p.block_table_stride = a.block_table_stride;
  p.k = static_cast<const __nv_bfloat16*>(kv.k);
  p.v = static_cast<const __nv_bfloat16*>(kv.v);
  p.num_kv_heads = kv.num_kv_heads;
  p.block_size = kv.block_size;
  p.block_shift = -1;
  for (int shift = 0; shift <= 6; ++shift)
    if (kv.block_size == 1 << shift) p.block_shift = shift;
  p.tiles_per_split = w.split / attention_mma::kTile;
  p.window = a.window;
  p.c = a.scale * 1.44269504088896340736f;  // one f32 rounding
  p.out = a.out;
  p.out_row_stride = a.out_row_stride;
  p.partial_o = w.partials;
  p.partial_ml = w.partials == nullptr
                     ? nullptr
                     : w.partials + static_cast<int64_t>(w.partial_capacity) * a.num_heads * kv.head_dim;
  return p;
}

Status launch_all(const AttentionArgs& a, const CudaKvLayer& kv, cudaStream_t stream) {
  const AttentionKernels& ks = *a.kernels;
  const AttentionWorkView& w = a.work;
  const int o = attention_out_index(a.out_dtype);
  MmaParams p = mma_params(a, kv);
  const int heads = kv.num_kv_heads;
  VOSTI_RETURN_IF_ERROR(launch_folded(ks, o, false, w, p, 0, w.num_folded_one_split, heads, stream));
  VOSTI_RETURN_IF_ERROR(
      launch_folded(ks, o, true, w, p, w.num_folded_one_split, w.num_folded - w.num_folded_one_split, heads, stream));
  if (w.per_split_grid > 0) {
    p.work = w.per_split;
    p.num_work_dev = w.num_per_split;
    p.num_work_host = 0;
    VOSTI_RETURN_IF_ERROR(launch_per_split(ks, o, p, w.per_split_grid, heads, w.per_split_folds, stream));
  }
  if (w.merge_grid > 0) {
    VOSTI_RETURN_IF_ERROR(
        launch_attention_merge(w, a.num_heads, kv.head_dim, p.c, a.out_dtype, a.out, a.out_row_stride, stream));
  }
  return Status();
}

// The plan's view against the call (a plan made for another call is refused, never run).
Status check_plan(const AttentionArgs& a, const CudaKvLayer& kv) {
  const AttentionWorkView& w = a.work;
  if (w.window != a.window)
    return invalid_argument("attention (tensor cores): the plan was made for sliding window " +
                            std::to_string(w.window) + ", the call asks for " + std::to_string(a.window));
  if (w.num_folded < 0 || w.num_folded_one_split < 0 || w.num_folded_one_split > w.num_folded || w.per_split_grid < 0 ||
      w.merge_grid < 0)
    return invalid_argument("attention (tensor cores): negative grid in the plan");
  if ((w.num_folded > 0 && w.folded == nullptr) ||
      (w.per_split_grid > 0 && (w.per_split == nullptr || w.num_per_split == nullptr)) ||
      (w.merge_grid > 0 && (w.merges == nullptr || w.num_merges == nullptr)))
    return invalid_argument("attention (tensor cores): the plan's device arrays are missing");
  if ((w.per_split_grid > 0 || w.merge_grid > 0) && (w.partials == nullptr || w.partial_capacity <= 0))
    return invalid_argument("attention (tensor cores): split states need a partial workspace");
  if (static_cast<int64_t>(kv.num_kv_heads) * kv.block_size * kv.head_dim > INT32_MAX)
    return invalid_argument("attention (tensor cores): a KV block of " + std::to_string(kv.block_size) +
                            " positions x " + std::to_string(kv.num_kv_heads) + " heads x " +
                            std::to_string(kv.head_dim) + " must hold fewer than 2^31 elements");
  return Status();
}

AttentionWorkView base_view(const AttentionPlanDevice& at) {
  AttentionWorkView v;
  v.num_per_split = at.counts;
  v.num_merges = at.counts == nullptr ? nullptr : at.counts + 1;
  v.merges = at.merges;
  v.folded = at.folded;
  v.per_split = at.per_split;
  v.partials = at.partials;
  v.partial_capacity = at.partial_capacity;
  return v;
}

}  // namespace

void attention_plan_counts(const AttentionPlan& plan, int32_t (&counts)[4]) {
  counts[0] = static_cast<int32_t>(plan.per_split.size());
  counts[1] = static_cast<int32_t>(plan.merges.size());
  counts[2] = static_cast<int32_t>(plan.folded.size());
  counts[3] = plan.num_partials;
}

AttentionWorkView attention_eager_view(const AttentionPlan& plan, const AttentionPlanDevice& at) {
  AttentionWorkView v = base_view(at);
  v.split = plan.split;
  v.window = plan.window;
  v.folded_rows = plan.folded_rows;
  v.num_folded = static_cast<int32_t>(plan.folded.size());
  v.num_folded_one_split = plan.num_folded_one_split;
  v.per_split_grid = static_cast<int32_t>(plan.per_split.size());
  v.per_split_folds = plan.decode_folds;
  v.merge_grid = static_cast<int32_t>(plan.merges.size());
  return v;
}

AttentionWorkView attention_graph_view(const AttentionPlanDevice& at, int split, int window, int64_t num_rows,
                                       int32_t per_split_ctas) {
  AttentionWorkView v = base_view(at);
  v.split = split;
  v.window = window;
  v.num_folded = 0;
  v.per_split_grid = std::max<int32_t>(1, per_split_ctas);
  v.merge_grid = static_cast<int32_t>(num_rows);
  return v;
}

Status attention_tensor_cores(const AttentionArgs& a, CudaKvLayer kv, cudaStream_t stream) {
  if (kv.dtype != DType::kBF16) return invalid_argument("attention (tensor cores): the KV pool must be bf16");
  AttentionShape shape{a.num_heads, kv.num_kv_heads, kv.head_dim, a.work.split, a.work.folded_rows, a.window};
  if (kv.head_dim == 256 && shape.folded_rows != kAttnRowsPerCta)
    return unimplemented("attention (tensor cores): head_dim 256 folds with " + std::to_string(kAttnRowsPerCta) +
                         " rows per CTA only");
  VOSTI_RETURN_IF_ERROR(check_attention_shape(shape));
  if (a.kernels == nullptr || a.kernels->head_dim != kv.head_dim)
    return invalid_argument("attention (tensor cores): no kernels prepared for head_dim " +
                            std::to_string(kv.head_dim) + " (AttentionArgs::kernels: prepare_attention_kernels)");
  VOSTI_RETURN_IF_ERROR(check_plan(a, kv));
  const int64_t width = static_cast<int64_t>(a.num_heads) * kv.head_dim;
  if (a.q_row_stride < width || a.out_row_stride < width) {
    return invalid_argument("attention: q and out row strides must be >= num_heads * head_dim (" +
                            std::to_string(width) + ")");
  }
  if (a.out_dtype != DType::kF32 && a.out_dtype != DType::kBF16)
    return invalid_argument("attention: output dtype must be f32 or bf16");
  if (a.out_row_stride % 2 != 0 || a.q_row_stride % 4 != 0)
    return invalid_argument("attention (tensor cores): q rows must be 16-byte aligned and out rows even");
  return launch_all(a, kv, stream);
}

}  // namespace vosti
