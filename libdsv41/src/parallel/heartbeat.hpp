// Heartbeat: liveness of the TP peer. A thread sends a beat every interval and
// declares the peer lost when no frame at all (beat or data) arrived for
// `timeout`; the owner's reader thread calls saw_traffic() on every frame. Dead
// processes are found faster by the reader (EOF/RST -> kAborted); the heartbeat
// catches what EOF cannot: a stopped process, a cut cable, a stalled link
// (kTimeout).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

#include "dsv41/status.hpp"

namespace dsv41::parallel {

class Heartbeat {
 public:
  struct Hooks {
    std::function<void()> send_beat;      // must not block for long (TpTcp: try-lock + bound)
    std::function<void(Status)> on_lost;  // called once, from the heartbeat thread
  };
  // peer names the peer in the loss message, e.g. "rank 1 (10.10.10.11)".
  Heartbeat(std::chrono::milliseconds interval, std::chrono::milliseconds timeout, Hooks hooks,
            std::string peer);
  ~Heartbeat();
  Heartbeat(const Heartbeat&) = delete;
  Heartbeat& operator=(const Heartbeat&) = delete;

  void saw_traffic();
  void stop();  // joins the thread; idempotent

 private:
  void run();

  const std::chrono::milliseconds interval_;
  const std::chrono::milliseconds timeout_;
  const Hooks hooks_;
  const std::string peer_;
  std::atomic<int64_t> last_seen_ns_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace dsv41::parallel
