#include "api/image_worker.hpp"

#include <utility>

namespace dsv41::server {

ImageWorker::ImageWorker() : thread_([this] { loop(); }) {}

ImageWorker::~ImageWorker() {
  stop();
  thread_.join();
}

bool ImageWorker::post(Task t) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return false;
    queue_.push_back(std::move(t));
  }
  cv_.notify_one();
  return true;
}

void ImageWorker::stop() {
  std::deque<Task> dropped;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
    dropped.swap(queue_);
  }
  cv_.notify_one();
  for (Task& t : dropped)
    if (t.abandon) t.abandon();
}

bool ImageWorker::stopped() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stopping_;
}

void ImageWorker::loop() {
  for (;;) {
    Task t;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping, nothing left
      t = std::move(queue_.front());
      queue_.pop_front();
    }
    t.run();
  }
}

}  // namespace dsv41::server
