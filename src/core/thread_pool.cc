#include "core/thread_pool.h"

#include <algorithm>

#include "core/check.h"

namespace vosti {

ThreadPool::ThreadPool(int num_threads) : num_threads_(std::max(1, num_threads)) {
  ranges_.resize(static_cast<size_t>(num_threads_));
  for (int i = 1; i < num_threads_; ++i) workers_.emplace_back([this, i] { worker_loop(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  work_cv_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::parallel_for(size_t n, size_t grain, const std::function<void(size_t, size_t)>& fn) {
  if (n == 0) return;
  grain = std::max<size_t>(grain, 1);
  const size_t max_parts = (n + grain - 1) / grain;
  const size_t parts = std::min<size_t>(static_cast<size_t>(num_threads_), max_parts);
  if (parts <= 1) {
    fn(0, n);
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (size_t i = 0; i < ranges_.size(); ++i) {
      const size_t b = i < parts ? n * i / parts : n;
      const size_t e = i < parts ? n * (i + 1) / parts : n;
      ranges_[i] = {b, e};
    }
    job_ = &fn;
    pending_ = num_threads_ - 1;
    ++generation_;
  }
  work_cv_.notify_all();
  fn(ranges_[0].first, ranges_[0].second);
  std::unique_lock<std::mutex> lock(mu_);
  done_cv_.wait(lock, [this] { return pending_ == 0; });
  job_ = nullptr;
}

void ThreadPool::worker_loop(int index) {
  uint64_t seen = 0;
  for (;;) {
    const std::function<void(size_t, size_t)>* job;
    std::pair<size_t, size_t> range;
    {
      std::unique_lock<std::mutex> lock(mu_);
      work_cv_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
      job = job_;
      range = ranges_[static_cast<size_t>(index)];
    }
    if (range.first < range.second) (*job)(range.first, range.second);
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (--pending_ == 0) done_cv_.notify_one();
    }
  }
}

}  // namespace vosti
