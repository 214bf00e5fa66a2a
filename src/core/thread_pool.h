// ThreadPool: a fixed set of worker threads for the CPU kernels.
//
// parallel_for(n, fn) calls fn(begin, end) on disjoint ranges that cover [0, n)
// and returns when all are done. Which thread runs which range never changes a
// result: kernels only split independent outputs (rows or columns), never a
// reduction (DESIGN.md rule 2), so results are identical for any thread count.
// Thread safety: parallel_for may be called from one thread at a time.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <functional>
#include <mutex>
#include <thread>
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
  // Splits [0, n) into at most num_threads() contiguous ranges of at least `grain` items.
  void parallel_for(size_t n, size_t grain, const std::function<void(size_t, size_t)>& fn);

 private:
  void worker_loop(int index);

  int num_threads_;
  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable work_cv_;
  std::condition_variable done_cv_;
  const std::function<void(size_t, size_t)>* job_ = nullptr;
  std::vector<std::pair<size_t, size_t>> ranges_;  // [num_threads]: range per thread
  uint64_t generation_ = 0;
  int pending_ = 0;
  bool stop_ = false;
};

}  // namespace vosti
