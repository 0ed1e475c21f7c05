// ThreadPool: static chunking, chunk i of size() chunks runs on worker i (caller runs chunk 0).
#include "core/thread_pool.hpp"

#include <algorithm>

namespace dsv41 {

ThreadPool::ThreadPool(size_t n_threads) {
  if (n_threads == 0) n_threads = std::max<size_t>(1, std::thread::hardware_concurrency());
  for (size_t i = 1; i < n_threads; ++i) workers_.emplace_back([this, i] { worker_loop(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_work_.notify_all();
  for (auto& t : workers_) t.join();
}

static void chunk_range(size_t n, size_t parts, size_t i, size_t* b, size_t* e) {
  const size_t base = n / parts, rem = n % parts;
  *b = i * base + std::min(i, rem);
  *e = *b + base + (i < rem ? 1 : 0);
}

void ThreadPool::worker_loop(size_t index) {
  size_t seen = 0;
  for (;;) {
    const std::function<void(size_t, size_t)>* job;
    size_t n;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_work_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
      job = job_;
      n = job_n_;
    }
    size_t b, e;
    chunk_range(n, size(), index, &b, &e);
    std::exception_ptr err;
    if (b < e) {
      try {
        (*job)(b, e);
      } catch (...) {
        err = std::current_exception();
      }
    }
    std::lock_guard<std::mutex> lock(mu_);
    if (err && !error_) error_ = err;
    if (--pending_ == 0) cv_done_.notify_one();
  }
}

void ThreadPool::parallel_for(size_t n, const std::function<void(size_t, size_t)>& fn) {
  if (n == 0) return;
  // The job slot is single: a second caller while the workers run someone else's job would
  // overwrite it (two Sessions of one model hung so), so it runs its range itself.
  std::unique_lock<std::mutex> owner(busy_, std::try_to_lock);
  if (workers_.empty() || n == 1 || !owner.owns_lock()) {
    fn(0, n);
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    job_ = &fn;
    job_n_ = n;
    pending_ = workers_.size();
    error_ = nullptr;
    ++generation_;
  }
  cv_work_.notify_all();
  size_t b, e;
  chunk_range(n, size(), 0, &b, &e);
  std::exception_ptr err;
  try {
    if (b < e) fn(b, e);
  } catch (...) {
    err = std::current_exception();
  }
  std::unique_lock<std::mutex> lock(mu_);
  cv_done_.wait(lock, [&] { return pending_ == 0; });
  if (!err) err = error_;
  job_ = nullptr;
  if (err) std::rethrow_exception(err);
}

}  // namespace dsv41
