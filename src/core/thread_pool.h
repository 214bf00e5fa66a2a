// ThreadPool: a fixed set of worker threads for the CPU kernels, built for many short calls
// (a decode step makes a few hundred, each tens of microseconds long).
//
// parallel_for(n, grain, fn) calls fn(begin, end) -- or fn(begin, end, worker) -- on
// disjoint contiguous ranges that cover [0, n), range i on worker i (worker 0 is the
// calling thread), and returns when all are done. Which thread runs which range never
// changes a result: kernels only split independent outputs (rows or columns), never a
// reduction (DESIGN.md rule 2), so results are identical for any thread count.
//
// Cost per call: the caller publishes the job by bumping an atomic generation; workers
// that ran a job recently are spinning on it (no system call), do their range and count
// down an atomic; the caller spins until the count is zero. Overhead is about a
// microsecond on the dev VM. A worker idle for longer than its spin budget sleeps on the
// generation (futex) and is woken by the next call (a few microseconds more). When there
// are more threads than hardware threads, nobody spins: a spinner would hold the core the
// job needs.
// Thread safety: parallel_for may be called from one thread at a time.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <thread>
#include <type_traits>
#include <vector>

namespace vosti {

class ThreadPool {
 public:
  // num_threads >= 1; the calling thread is one of them.
  explicit ThreadPool(int num_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int num_threads() const { return num_threads_; }

  // Splits [0, n) into at most num_threads() contiguous ranges of at least `grain` items
  // (range i = [n*i/parts, n*(i+1)/parts)) and runs fn on each: fn(begin, end) or
  // fn(begin, end, worker) with worker in [0, num_threads()).
  template <typename Fn>
  void parallel_for(size_t n, size_t grain, const Fn& fn) {
    Job job;
    job.ctx = &fn;
    job.invoke = [](const void* ctx, size_t b, size_t e, int worker) {
      const Fn& f = *static_cast<const Fn*>(ctx);
      if constexpr (std::is_invocable_v<const Fn&, size_t, size_t, int>) {
        f(b, e, worker);
      } else {
        f(b, e);
      }
    };
    run(n, grain, job);
  }

 private:
  struct Job {
    const void* ctx = nullptr;
    void (*invoke)(const void*, size_t, size_t, int) = nullptr;
  };

  void run(size_t n, size_t grain, const Job& job);
  void worker_loop(int index);
  // Spins (then sleeps) until generation_ differs from `seen`; returns the new value.
  uint64_t wait_for_work(uint64_t seen);

  int num_threads_;
  bool spin_;  // false when threads outnumber hardware threads
  std::vector<std::thread> workers_;
  // The current job, written by the caller before generation_ is bumped (release) and
  // read by workers after they see the bump (acquire).
  Job job_;
  size_t job_n_ = 0;
  size_t job_parts_ = 0;
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> pending_{0};   // workers that have not finished the current job
  std::atomic<int> sleepers_{0};  // workers blocked in generation_.wait()
  std::atomic<bool> stop_{false};
};

}  // namespace vosti
