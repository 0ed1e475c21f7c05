// Heartbeat thread (heartbeat.hpp).
#include "parallel/heartbeat.hpp"

#include <fmt/format.h>

namespace dsv41::parallel {
namespace {

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

Heartbeat::Heartbeat(std::chrono::milliseconds interval, std::chrono::milliseconds timeout,
                     Hooks hooks, std::string peer)
    : interval_(interval),
      timeout_(timeout),
      hooks_(std::move(hooks)),
      peer_(std::move(peer)),
      last_seen_ns_(now_ns()) {
  thread_ = std::thread([this] { run(); });
}

Heartbeat::~Heartbeat() { stop(); }

void Heartbeat::saw_traffic() { last_seen_ns_.store(now_ns(), std::memory_order_relaxed); }

void Heartbeat::stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable() && thread_.get_id() != std::this_thread::get_id()) thread_.join();
}

void Heartbeat::run() {
  std::unique_lock lock(mu_);
  while (!cv_.wait_for(lock, interval_, [this] { return stopping_; })) {
    lock.unlock();
    if (hooks_.send_beat) hooks_.send_beat();
    int64_t silent_ms = (now_ns() - last_seen_ns_.load(std::memory_order_relaxed)) / 1000000;
    if (silent_ms > timeout_.count()) {
      if (hooks_.on_lost)
        hooks_.on_lost(Status(ErrorCode::kTimeout,
                              fmt::format("TP peer {} silent for {} ms (heartbeat timeout "
                                          "{} ms): the peer process "
                                          "is stopped or hung, or the link is down",
                                          peer_, silent_ms, timeout_.count())));
      return;
    }
    lock.lock();
  }
}

}  // namespace dsv41::parallel
