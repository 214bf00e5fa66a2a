#include "core/thread_pool.h"

#include <immintrin.h>

#include <algorithm>

namespace vosti {
namespace {

// Spin iterations (each one pause, ~30-140 cycles) before a waiting thread blocks or yields:
// ~100 us at worst, longer than the gaps between the kernels of one forward step.
constexpr int kSpinBudget = 1 << 12;

}  // namespace

ThreadPool::ThreadPool(int num_threads)
    : num_threads_(std::max(1, num_threads)),
      spin_(static_cast<unsigned>(num_threads_) <= std::max(1u, std::thread::hardware_concurrency())) {
  for (int i = 1; i < num_threads_; ++i) workers_.emplace_back([this, i] { worker_loop(i); });
}

ThreadPool::~ThreadPool() {
  stop_.store(true);
  generation_.fetch_add(1);
  generation_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::run(size_t n, size_t grain, const Job& job) {
  if (n == 0) return;
  grain = std::max<size_t>(grain, 1);
  const size_t parts = std::min<size_t>(static_cast<size_t>(num_threads_), (n + grain - 1) / grain);
  if (parts <= 1) {
    job.invoke(job.ctx, 0, n, 0);
    return;
  }
  // Every worker takes part (an empty range past `parts`), so the count is always the
  // same and no worker can miss a generation.
  job_ = job;
  job_n_ = n;
  job_parts_ = parts;
  pending_.store(num_threads_ - 1, std::memory_order_relaxed);
  generation_.fetch_add(1, std::memory_order_seq_cst);
  if (sleepers_.load(std::memory_order_seq_cst) > 0) generation_.notify_all();
  job.invoke(job.ctx, 0, n / parts, 0);
  for (int spins = 0; pending_.load(std::memory_order_acquire) != 0; ++spins) {
    if (spin_ && spins < kSpinBudget) {
      _mm_pause();
    } else {
      std::this_thread::yield();
    }
  }
}

uint64_t ThreadPool::wait_for_work(uint64_t seen) {
  if (spin_) {
    for (int spins = 0; spins < kSpinBudget; ++spins) {
      const uint64_t g = generation_.load(std::memory_order_acquire);
      if (g != seen) return g;
      _mm_pause();
    }
  }
  for (;;) {
    sleepers_.fetch_add(1, std::memory_order_seq_cst);
    generation_.wait(seen, std::memory_order_seq_cst);
    sleepers_.fetch_sub(1, std::memory_order_relaxed);
    const uint64_t g = generation_.load(std::memory_order_acquire);
    if (g != seen) return g;
  }
}

void ThreadPool::worker_loop(int index) {
  uint64_t seen = 0;
  for (;;) {
    seen = wait_for_work(seen);
    if (stop_.load(std::memory_order_acquire)) return;
    const auto i = static_cast<size_t>(index);
    if (i < job_parts_) {
      const size_t b = job_n_ * i / job_parts_, e = job_n_ * (i + 1) / job_parts_;
      job_.invoke(job_.ctx, b, e, index);
    }
    pending_.fetch_sub(1, std::memory_order_acq_rel);
  }
}

}  // namespace vosti
