#include "http/listener.hpp"

#include <fmt/format.h>

#include <boost/asio/post.hpp>
#include <boost/asio/strand.hpp>

namespace dsv41::server {

namespace net = boost::asio;
using tcp = net::ip::tcp;

void ConnectionTracker::add(Connection* c, std::weak_ptr<Connection> weak) {
  std::lock_guard<std::mutex> lock(mu_);
  live_[c] = std::move(weak);
}

void ConnectionTracker::remove(Connection* c) {
  std::lock_guard<std::mutex> lock(mu_);
  live_.erase(c);
}

size_t ConnectionTracker::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return live_.size();
}

void ConnectionTracker::shutdown_all() {
  std::vector<std::shared_ptr<Connection>> all;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [ptr, weak] : live_) {
      if (auto c = weak.lock()) all.push_back(std::move(c));
    }
  }
  for (auto& c : all) c->shutdown();
}

Listener::Listener(net::io_context& ioc, Api& api, const HttpLimits& limits, int max_connections)
    : ioc_(ioc),
      acceptor_(net::make_strand(ioc)),
      api_(api),
      limits_(limits),
      max_connections_(max_connections),
      retry_(acceptor_.get_executor()) {}

Status Listener::open(const std::string& host, int port) {
  boost::system::error_code ec;
  const auto address = net::ip::make_address(host, ec);
  if (ec)
    return Status(ErrorCode::kInvalidArgument,
                  fmt::format("--host '{}' is not an IP address: {}", host, ec.message()));
  const tcp::endpoint endpoint(address, static_cast<uint16_t>(port));
  const std::string where = fmt::format("{}:{}", host, port);
  if (acceptor_.open(endpoint.protocol(), ec); ec)
    return Status(ErrorCode::kIo, fmt::format("{}: socket: {}", where, ec.message()));
  if (acceptor_.set_option(net::socket_base::reuse_address(true), ec); ec)
    return Status(ErrorCode::kIo, fmt::format("{}: SO_REUSEADDR: {}", where, ec.message()));
  if (acceptor_.bind(endpoint, ec); ec)
    return Status(ErrorCode::kIo, fmt::format("{}: bind: {}", where, ec.message()));
  if (acceptor_.listen(net::socket_base::max_listen_connections, ec); ec)
    return Status(ErrorCode::kIo, fmt::format("{}: listen: {}", where, ec.message()));
  return Status::ok();
}

int Listener::port() const { return acceptor_.local_endpoint().port(); }

void Listener::run() { accept(); }

void Listener::stop() {
  net::post(acceptor_.get_executor(), [self = shared_from_this()] {
    boost::system::error_code ec;
    self->acceptor_.close(ec);
    self->retry_.cancel();
    self->tracker_->shutdown_all();
  });
}

void Listener::accept() {
  acceptor_.async_accept(
      net::make_strand(ioc_),
      [self = shared_from_this()](boost::system::error_code ec, tcp::socket socket) {
        if (ec == net::error::operation_aborted || !self->acceptor_.is_open()) return;
        if (ec) {  // e.g. out of descriptors: try again in 100 ms, not in a busy loop
          self->retry_.expires_after(std::chrono::milliseconds(100));
          self->retry_.async_wait([self](boost::system::error_code e) {
            if (!e && self->acceptor_.is_open()) self->accept();
          });
          return;
        }
        boost::system::error_code ignored;
        if (static_cast<int>(self->tracker_->size()) >= self->max_connections_) {
          socket.close(ignored);
        } else {
          socket.set_option(tcp::no_delay(true), ignored);
          auto c = std::make_shared<Connection>(std::move(socket), self->api_, self->limits_,
                                                self->tracker_);
          self->tracker_->add(c.get(), c);
          c->start();
        }
        self->accept();
      });
}

}  // namespace dsv41::server
