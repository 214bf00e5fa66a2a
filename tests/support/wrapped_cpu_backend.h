// A backend behind a forwarding wrapper (the CPU backend by default): the base of the test-only
// backends that change one or a few kernels and forward the rest (the planted variants of
// tests/support/planted*.cc, the bf16 emulation of tests/model_cuda/bf16_policy.h), so that a
// kernel added to KernelBackend is forwarded here once. Test-only.
// Thread safety: as the CPU backend (one caller at a time).
#pragma once

#include <cstdint>
#include <memory>
#include <utility>

#include "kernels/kernel_backend.h"

namespace vosti {

class ThreadPool;

class WrappedCpuBackend : public KernelBackend {
 public:
  explicit WrappedCpuBackend(ThreadPool* pool) : inner_(make_cpu_backend(pool)) {}
  explicit WrappedCpuBackend(std::unique_ptr<KernelBackend> inner) : inner_(std::move(inner)) {}
  using KernelBackend::matmul;
  using KernelBackend::rope;
  void matmul(const float* x, int64_t m, const WeightMatrix& w, const float* bias, float* y) override {
    inner_->matmul(x, m, w, bias, y);
  }
  void rms_norm(const float* x, int64_t m, int64_t n, const float* weight, float eps, float* y) override {
    inner_->rms_norm(x, m, n, weight, eps, y);
  }
  void rope(float* x, int64_t m, int num_heads, int head_dim, const float* cos, const float* sin,
            RopeLayout layout) override {
    inner_->rope(x, m, num_heads, head_dim, cos, sin, layout);
  }
  void silu_mul(const float* gate_up, int64_t m, int64_t n, float* y) override { inner_->silu_mul(gate_up, m, n, y); }
  void gelu_tanh_mul(const float* gate_up, int64_t m, int64_t n, float* y) override {
    inner_->gelu_tanh_mul(gate_up, m, n, y);
  }
  void kv_write(const float* k_new, const float* v_new, int64_t m, const int32_t* slots, PagedKvView kv) override {
    inner_->kv_write(k_new, v_new, m, slots, kv);
  }
  void attention(const float* q, int64_t m, int num_heads, const AttentionQuery* queries, PagedKvView kv, float scale,
                 float* out) override {
    inner_->attention(q, m, num_heads, queries, kv, scale, out);
  }

 protected:
  std::unique_ptr<KernelBackend> inner_;
};

}  // namespace vosti
