// ImageWorker: runs the vision tower for chat requests off the HTTP I/O threads. The CPU tower
// takes minutes for a large image (docs/perf.md "Vision tower, CPU reference"); on an I/O thread
// that would stall every connection it serves, /health included. One thread, FIFO.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

namespace dsv41::server {

class ImageWorker {
 public:
  struct Task {
    std::function<void()> run;      // on the worker thread
    std::function<void()> abandon;  // instead of run, when the worker stops first
  };
  ImageWorker();
  ~ImageWorker();  // stop(), then joins (a running task finishes first)
  ImageWorker(const ImageWorker&) = delete;
  ImageWorker& operator=(const ImageWorker&) = delete;

  // Queues t; false (t dropped, nothing called) after stop().
  bool post(Task t);
  // Abandons the queued tasks on the caller's thread; the running one finishes. Idempotent; does
  // not wait.
  void stop();
  bool stopped() const;

 private:
  void loop();

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Task> queue_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace dsv41::server
