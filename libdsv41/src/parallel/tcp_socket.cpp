// TcpSocket (tcp_socket.hpp): non-blocking fd + poll() in kPollSlice steps.
#include "parallel/tcp_socket.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <thread>

#include "core/check.hpp"

namespace dsv41::parallel {
namespace {

sockaddr_in make_addr(const std::string& address, uint16_t port) {
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(port);
  DSV41_CHECK(inet_pton(AF_INET, address.c_str(), &sa.sin_addr) == 1, kInvalidArgument,
              "'{}' is not an IPv4 literal", address);
  return sa;
}

int new_socket() {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  DSV41_CHECK(fd >= 0, kIo, "socket(): {}", std::strerror(errno));
  return fd;
}

void check_stop(const StopCheck& stop) {
  if (!stop) return;
  Status s = stop();
  if (!s.is_ok()) throw detail::Failure(s.code(), s.message(), __FILE__, __LINE__);
}

// Waits for `events` on fd for at most one slice; throws at the deadline.
void wait_ready(int fd, short events, Clock::time_point deadline, const StopCheck& stop,
                const std::string& what) {
  for (;;) {
    check_stop(stop);
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    DSV41_CHECK(left.count() > 0, kTimeout, "timed out waiting for {}", what);
    pollfd p{fd, events, 0};
    int rc = ::poll(&p, 1, static_cast<int>(std::min(left, kPollSlice).count()));
    if (rc > 0) return;
    DSV41_CHECK(rc == 0 || errno == EINTR, kIo, "poll() for {}: {}", what, std::strerror(errno));
  }
}

void set_nodelay(int fd) {
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

}  // namespace

TcpSocket& TcpSocket::operator=(TcpSocket&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = o.fd_;
    o.fd_ = -1;
  }
  return *this;
}

TcpSocket::~TcpSocket() {
  if (fd_ >= 0) ::close(fd_);
}

void TcpSocket::shutdown_both() {
  if (fd_ >= 0) ::shutdown(fd_, SHUT_RDWR);
}

TcpSocket TcpSocket::listen_on(const std::string& bind_address, uint16_t port) {
  sockaddr_in sa = make_addr(bind_address, port);
  TcpSocket s(new_socket());
  int one = 1;
  ::setsockopt(s.fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  DSV41_CHECK(::bind(s.fd_, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) == 0, kIo,
              "bind({}:{}): {}", bind_address, port, std::strerror(errno));
  DSV41_CHECK(::listen(s.fd_, 4) == 0, kIo, "listen({}:{}): {}", bind_address, port,
              std::strerror(errno));
  return s;
}

TcpSocket TcpSocket::accept_from(const TcpSocket& listener, const std::string& peer_address,
                                 Clock::time_point deadline, const StopCheck& stop) {
  sockaddr_in want = make_addr(peer_address, 0);
  const std::string what =
      fmt::format("a connection from peer {} on {}", peer_address, listener.local_endpoint());
  for (;;) {
    wait_ready(listener.fd_, POLLIN, deadline, stop, what);
    sockaddr_in from{};
    socklen_t len = sizeof(from);
    int fd = ::accept4(listener.fd_, reinterpret_cast<sockaddr*>(&from), &len,
                       SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) {
      DSV41_CHECK(errno == EAGAIN || errno == EINTR || errno == ECONNABORTED, kIo,
                  "accept() on {}: {}", listener.local_endpoint(), std::strerror(errno));
      continue;
    }
    TcpSocket s(fd);
    if (from.sin_addr.s_addr != want.sin_addr.s_addr) continue;  // not our peer: dropped
    set_nodelay(fd);
    return s;
  }
}

TcpSocket TcpSocket::connect_to(const std::string& bind_address, const std::string& peer_address,
                                uint16_t port, Clock::time_point deadline, const StopCheck& stop) {
  sockaddr_in local = make_addr(bind_address, 0);
  sockaddr_in remote = make_addr(peer_address, port);
  const std::string what = fmt::format("connect {} -> {}:{}", bind_address, peer_address, port);
  std::string last_error = "no attempt";
  for (;;) {
    check_stop(stop);
    DSV41_CHECK(Clock::now() < deadline, kTimeout, "timed out: {} (last error: {})", what,
                last_error);
    TcpSocket s(new_socket());
    DSV41_CHECK(::bind(s.fd_, reinterpret_cast<sockaddr*>(&local), sizeof(local)) == 0, kIo,
                "bind({}): {}", bind_address, std::strerror(errno));
    int rc = ::connect(s.fd_, reinterpret_cast<sockaddr*>(&remote), sizeof(remote));
    if (rc != 0 && errno == EINPROGRESS) {
      wait_ready(s.fd_, POLLOUT, deadline, stop, what);
      int err = 0;
      socklen_t len = sizeof(err);
      ::getsockopt(s.fd_, SOL_SOCKET, SO_ERROR, &err, &len);
      rc = err == 0 ? 0 : -1;
      errno = err;
    }
    if (rc == 0) {
      set_nodelay(s.fd_);
      return s;
    }
    last_error = std::strerror(errno);
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

void TcpSocket::send_all(std::span<const std::byte> data, Clock::time_point deadline,
                         const StopCheck& stop, const std::string& what) {
  size_t done = 0;
  while (done < data.size()) {
    ssize_t n = ::send(fd_, data.data() + done, data.size() - done, MSG_NOSIGNAL);
    if (n > 0) {
      done += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
      wait_ready(fd_, POLLOUT, deadline, stop, what);
      continue;
    }
    DSV41_CHECK(errno != EPIPE && errno != ECONNRESET, kAborted,
                "{}: the peer closed the connection", what);
    DSV41_FAIL(kIo, "{}: send(): {}", what, std::strerror(errno));
  }
}

void TcpSocket::recv_all(std::span<std::byte> data, Clock::time_point deadline,
                         const StopCheck& stop, const std::string& what) {
  size_t done = 0;
  while (done < data.size()) {
    ssize_t n = ::recv(fd_, data.data() + done, data.size() - done, 0);
    if (n > 0) {
      done += static_cast<size_t>(n);
      continue;
    }
    if (n == 0) DSV41_FAIL(kAborted, "{}: the peer closed the connection", what);
    if (errno == EAGAIN || errno == EINTR) {
      wait_ready(fd_, POLLIN, deadline, stop, what);
      continue;
    }
    DSV41_CHECK(errno != ECONNRESET, kAborted, "{}: the peer reset the connection", what);
    DSV41_FAIL(kIo, "{}: recv(): {}", what, std::strerror(errno));
  }
}

std::string TcpSocket::local_endpoint() const {
  sockaddr_in sa{};
  socklen_t len = sizeof(sa);
  if (fd_ < 0 || ::getsockname(fd_, reinterpret_cast<sockaddr*>(&sa), &len) != 0) return "?";
  char buf[INET_ADDRSTRLEN] = {};
  ::inet_ntop(AF_INET, &sa.sin_addr, buf, sizeof(buf));
  return fmt::format("{}:{}", buf, ntohs(sa.sin_port));
}

}  // namespace dsv41::parallel
