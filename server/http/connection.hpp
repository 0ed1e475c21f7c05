// One HTTP/1.1 connection (Beast): read a request under body/header limits and timeouts, hand it
// to Api::handle, write the response; keep-alive between requests. Event-stream responses are
// written as one chunk per drain of the ResponseChannel (flushed at once), with ': keep-alive'
// comments while nothing is produced, and a client disconnect cancels the generation
// (api-and-clients.md §2.5, §4.1). All work for one connection runs on its strand.
#pragma once

#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include "api/api.hpp"

namespace dsv41::server {

struct HttpLimits {
  int64_t max_body_bytes = 64 << 20;
  int idle_timeout_s = 60;  // waiting for the next request; also the write timeout
  int read_timeout_s = 30;  // one request, header to end of body
  int sse_keepalive_ms = 10000;
};

class ConnectionTracker;

class Connection : public std::enable_shared_from_this<Connection> {
 public:
  Connection(boost::asio::ip::tcp::socket socket, Api& api, const HttpLimits& limits,
             std::shared_ptr<ConnectionTracker> tracker);
  ~Connection();
  void start();
  // Any thread: close now when idle, else after the response in progress.
  void shutdown();

 private:
  using Parser = boost::beast::http::request_parser<boost::beast::http::string_body>;

  bool skip_empty_lines();
  void read_header();
  void read_request();
  void on_header(boost::beast::error_code ec);
  void read_body();
  void on_body(boost::beast::error_code ec);
  void dispatch();
  void reject(int status, const std::string& message);
  void write_plain(HttpResponse response, bool close_after);
  void start_event_stream(HttpResponse response);
  void await_channel();
  void pump();
  void write_chunk(std::string bytes, bool last);
  void on_chunk_written(boost::beast::error_code ec, bool last);
  void arm_keepalive();
  void watch_disconnect();
  void buffer_pipelined();
  void client_gone();
  void end_exchange(bool close_after);
  void drain_and_close();
  void drain_some();
  void close();

  boost::beast::tcp_stream stream_;
  boost::beast::flat_buffer buffer_;
  std::optional<Parser> parser_;
  Api& api_;
  HttpLimits limits_;
  std::shared_ptr<ConnectionTracker> tracker_;
  boost::asio::steady_timer keepalive_timer_;
  std::shared_ptr<ResponseChannel> channel_;
  // This connection while a channel response is pending: the engine's waker holds only a weak
  // reference, and the disconnect watch ends when it sees a pipelined byte, so without it a
  // non-stream request followed by more bytes lost its last owner (response dropped, socket
  // reset, generation never cancelled). Cleared when the exchange ends or the socket closes.
  std::shared_ptr<Connection> pending_self_;
  std::string out_;  // bytes of the chunk being written
  std::chrono::steady_clock::time_point last_write_;
  uint64_t exchange_ = 0;  // requests dispatched; tags the disconnect watch of each
  bool keep_alive_ = false;
  bool head_ = false;  // the current request is HEAD: the response carries no body
  // The current request is HTTP/1.0: a stream is sent without chunked framing (RFC 9112 §6.1:
  // no Transfer-Encoding to 1.0 clients) and ends by closing the connection.
  bool http10_ = false;
  bool streaming_ = false;  // a channel response is in progress
  bool writing_ = false;
  bool idle_ = false;  // waiting for a request header
  bool closing_ = false;
  bool closed_ = false;
};

}  // namespace dsv41::server
