// Planted violations of the determinism rules, for the tests that show the harness and the
// invariance checks catch them (test-only: never linked into the product, whose configuration
// holds no such switch). Each is the product's own component with one rule broken on purpose.
// Thread safety: as the components they wrap.
#pragma once

#include <memory>

#include "engine/engine.h"
#include "kernels/kernel_backend.h"
#include "model/model.h"
#include "runner/device_model.h"

namespace vosti {

class ThreadPool;

// The CPU backend (kernels/cpu) whose matmul splits its k reduction in two when a call has more
// than one row (tests/support/planted_matmul.h): a row's bits depend on the row count.
std::unique_ptr<KernelBackend> make_planted_cpu_backend(ThreadPool* pool);

// A cpu device whose runners compute with make_planted_cpu_backend.
std::shared_ptr<const DeviceModel> planted_cpu_device_model(std::shared_ptr<const Model> model);

// A cpu device whose mixture-of-experts layers compute each expert's rows with a matmul whose k
// reduction splits in two when more than one token was routed to that expert (rule 2: an expert
// GEMM blocked by its token count); every other matmul is the product's. REQUIRES: a MoE model.
std::shared_ptr<const DeviceModel> planted_moe_cpu_device_model(std::shared_ptr<const Model> model);

// A cpu device whose attention's KV split follows the batch (rule 1): the tiles a query's keys
// are reduced in are 64 positions wide when the call holds several sequences, 32 when one. Only
// the batch composition of a step moves a row's bits; chunking, decode and prefix hits do not.
std::shared_ptr<const DeviceModel> planted_batch_split_cpu_device_model(std::shared_ptr<const Model> model);

// A cpu device whose prefix-cache hits meet KV computed under another chunking (rule 5): the
// chunk a request computes right after a hit (it starts at the hit's block boundary, where a cold
// run's chunk starts at 0) writes its K and V rounded to bf16. A warm request then reads, after
// the shared blocks, KV that no cold run of it ever computes; nothing else moves a bit.
std::shared_ptr<const DeviceModel> planted_hit_chunking_cpu_device_model(std::shared_ptr<const Model> model);

// A cpu device whose window-local KV keeps released window blocks readable (rule 5): its runners
// tell the scheduler a window one block shorter than the model's, so a block the window still
// reads is released to the pool, and read the released block through the id it had, whatever the
// pool has put there since. Without window-local KV (or sliding layers) it is the product.
std::shared_ptr<const DeviceModel> planted_stale_window_cpu_device_model(std::shared_ptr<const Model> model);

// A cpu device whose window-local KV keys a window block by its physical page (rule 5): its
// runners remember the page each full block prefix was first computed in and, on a prefix-cache
// hit, read the window layers' KV from that page, though the pool may have reused it since.
std::shared_ptr<const DeviceModel> planted_page_keyed_window_cpu_device_model(std::shared_ptr<const Model> model);
// A cpu device whose steps that verify draft tokens (speculative decoding) compute every matmul
// with make_planted_cpu_backend's row-count split: the verify chunk's rows get another kernel plan
// than the one-row decode that computes them without speculation (rule 1: the plan follows what
// the step is). Only the speculation variations move a bit.
std::shared_ptr<const DeviceModel> planted_verify_plan_cpu_device_model(std::shared_ptr<const Model> model);

// A cpu device whose structured-output masks follow the batch: a step holding more than one
// sequence fills a constrained row's disallowed tokens with -1e30 instead of -inf. The sampled
// tokens stay those of a lone run (exp(-1e30 - max) is 0 too); only the masked rows' bits, and so
// their digests, move with the batch composition.
std::shared_ptr<const DeviceModel> planted_batch_mask_cpu_device_model(std::shared_ptr<const Model> model);

// Engine hooks whose structured-output grammar pool hands masks that depend on the thread: a mask
// filled on a pool worker other than the first (the step thread) loses its lowest allowed token
// (when it allows more than one). Only steps whose grammars advance on the pool (at least
// EngineConfig::structured_output_pool_threshold of them, two threads or more) move a bit.
EngineHooks planted_worker_dependent_mask_hooks();

// A cuda device (`model` loaded with load_device_model(..., "cuda")) whose runners plan the
// attention with twice the deployment's split whenever a step holds several sequences (rule 1:
// the split follows the batch). Null where the build has no CUDA runner or `model` is not cuda.
std::shared_ptr<const DeviceModel> planted_cuda_device_model(std::shared_ptr<const DeviceModel> model);

}  // namespace vosti
