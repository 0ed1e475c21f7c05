// TcpSocket: an owned IPv4 stream socket whose every wait is bounded by a
// deadline and a stop check, so no TP path can hang on the network (docs/tp.md
// "Failure modes"). Sockets always bind to the configured fabric address, never
// INADDR_ANY (seed.md: rank traffic stays on RoCE).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <string>

#include "dsv41/status.hpp"

namespace dsv41::parallel {

using Clock = std::chrono::steady_clock;
// Polled at least every kPollSlice while an I/O call waits; a non-ok Status
// ends the wait with it.
using StopCheck = std::function<Status()>;
inline constexpr std::chrono::milliseconds kPollSlice{50};

class TcpSocket {
 public:
  TcpSocket() = default;
  explicit TcpSocket(int fd) : fd_(fd) {}
  TcpSocket(TcpSocket&& o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
  TcpSocket& operator=(TcpSocket&& o) noexcept;
  TcpSocket(const TcpSocket&) = delete;
  TcpSocket& operator=(const TcpSocket&) = delete;
  ~TcpSocket();

  int fd() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  // shutdown(SHUT_RDWR): wakes a reader blocked on this socket in another
  // thread.
  void shutdown_both();

  // Listening socket on bind_address:port (SO_REUSEADDR). Throws kIo naming
  // address and errno.
  static TcpSocket listen_on(const std::string& bind_address, uint16_t port);
  // Accepts the first connection whose source address is peer_address (others
  // are closed: only the configured peer may join). Throws kTimeout at the
  // deadline.
  static TcpSocket accept_from(const TcpSocket& listener, const std::string& peer_address,
                               Clock::time_point deadline, const StopCheck& stop);
  // Binds to bind_address (ephemeral port), connects to peer_address:port,
  // retrying refused connections every 100 ms until the deadline (the peer may
  // start later). Throws kTimeout.
  static TcpSocket connect_to(const std::string& bind_address, const std::string& peer_address,
                              uint16_t port, Clock::time_point deadline, const StopCheck& stop);

  // Full send / receive. Throws kTimeout at the deadline, the stop check's
  // Status when it reports one, kAborted when the peer closed the connection,
  // kIo on other socket errors. `what` names the transfer in errors ("frame
  // header from rank 1").
  void send_all(std::span<const std::byte> data, Clock::time_point deadline, const StopCheck& stop,
                const std::string& what);
  void recv_all(std::span<std::byte> data, Clock::time_point deadline, const StopCheck& stop,
                const std::string& what);

  // "a.b.c.d:port" of the local end, for logs and tests.
  std::string local_endpoint() const;

 private:
  int fd_ = -1;
};

}  // namespace dsv41::parallel
