// A fixed pool of worker threads with a blocking parallel_for; used by the CPU reference backend
// so the golden tests take seconds. One pool per owner (no process-global state).
#pragma once

#include <condition_variable>
#include <cstddef>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace dsv41 {

class ThreadPool {
 public:
  // n_threads == 0: std::thread::hardware_concurrency().
  explicit ThreadPool(size_t n_threads = 0);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  size_t size() const { return workers_.size() + 1; }
  // Calls fn(begin, end) on disjoint chunks covering [0, n); returns when all are done.
  // The first exception thrown by fn is rethrown here. Not re-entrant from inside fn. Callers on
  // several threads at once (two Sessions of one model): one gets the workers, the others run
  // their whole range on their own thread.
  void parallel_for(size_t n, const std::function<void(size_t, size_t)>& fn);

 private:
  void worker_loop(size_t index);

  std::vector<std::thread> workers_;
  std::mutex busy_;  // held by the caller that owns the workers for one parallel_for
  std::mutex mu_;
  std::condition_variable cv_work_, cv_done_;
  const std::function<void(size_t, size_t)>* job_ = nullptr;
  size_t job_n_ = 0;
  size_t generation_ = 0;
  size_t pending_ = 0;
  bool stop_ = false;
  std::exception_ptr error_;
};

}  // namespace dsv41
