// ResponseChannel and HttpRequest helpers (no Beast: compiled into the handler library).
#include "http/http_types.hpp"

namespace dsv41::server {

std::string HttpRequest::header(const std::string& name) const {
  auto it = headers.find(name);
  return it == headers.end() ? std::string() : it->second;
}

void ResponseChannel::wake(std::unique_lock<std::mutex>& lock) {
  std::function<void()> waker = waker_;
  lock.unlock();
  if (waker) waker();
}

void ResponseChannel::push(std::string bytes) {
  std::unique_lock<std::mutex> lock(mu_);
  if (closed_) return;
  pending_ += bytes;
  wake(lock);
}

void ResponseChannel::close() {
  std::unique_lock<std::mutex> lock(mu_);
  if (closed_) return;
  closed_ = true;
  wake(lock);
}

void ResponseChannel::complete(HttpResponse response) {
  std::unique_lock<std::mutex> lock(mu_);
  if (closed_) return;
  response_ = std::move(response);
  closed_ = true;
  wake(lock);
}

void ResponseChannel::set_canceller(std::function<void()> fn) {
  std::unique_lock<std::mutex> lock(mu_);
  if (cancelled_) {
    lock.unlock();
    fn();
    return;
  }
  canceller_ = std::move(fn);
}

void ResponseChannel::set_waker(std::function<void()> fn) {
  std::unique_lock<std::mutex> lock(mu_);
  waker_ = std::move(fn);
  if (!pending_.empty() || closed_) wake(lock);
}

ResponseChannel::Drained ResponseChannel::drain() {
  std::lock_guard<std::mutex> lock(mu_);
  Drained out;
  out.bytes.swap(pending_);
  out.closed = closed_;
  if (closed_ && response_) out.response = std::move(response_);
  return out;
}

void ResponseChannel::cancel() {
  std::unique_lock<std::mutex> lock(mu_);
  if (cancelled_) return;
  cancelled_ = true;
  waker_ = nullptr;
  std::function<void()> fn = std::move(canceller_);
  lock.unlock();
  if (fn) fn();
}

bool ResponseChannel::cancelled() const {
  std::lock_guard<std::mutex> lock(mu_);
  return cancelled_;
}

}  // namespace dsv41::server
