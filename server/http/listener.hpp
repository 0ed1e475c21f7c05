// The accept loop: binds host:port, caps open connections (beyond the cap a socket is closed at
// accept), sets TCP_NODELAY (token-sized writes), and tracks connections for graceful shutdown.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <map>
#include <memory>
#include <mutex>

#include "api/api.hpp"
#include "http/connection.hpp"

namespace dsv41::server {

class ConnectionTracker {
 public:
  void add(Connection* c, std::weak_ptr<Connection> weak);
  void remove(Connection* c);
  size_t size() const;
  void shutdown_all();

 private:
  mutable std::mutex mu_;
  std::map<Connection*, std::weak_ptr<Connection>> live_;
};

class Listener : public std::enable_shared_from_this<Listener> {
 public:
  Listener(boost::asio::io_context& ioc, Api& api, const HttpLimits& limits, int max_connections);
  // Errors name the address: unresolvable host, bind/listen failures.
  Status open(const std::string& host, int port);
  int port() const;
  size_t connections() const { return tracker_->size(); }
  void run();
  // Any thread: stop accepting and close idle connections.
  void stop();

 private:
  void accept();

  boost::asio::io_context& ioc_;
  boost::asio::ip::tcp::acceptor acceptor_;
  Api& api_;
  HttpLimits limits_;
  int max_connections_;
  // Accept failures (EMFILE / ENFILE when descriptors run out) retry after a pause: an immediate
  // retry fails again at once and spun a core until a connection closed.
  boost::asio::steady_timer retry_;
  std::shared_ptr<ConnectionTracker> tracker_ = std::make_shared<ConnectionTracker>();
};

}  // namespace dsv41::server
