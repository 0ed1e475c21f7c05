#include "http/connection.hpp"

#include <fmt/format.h>
#include <sys/socket.h>

#include <boost/asio/post.hpp>
#include <boost/asio/write.hpp>
#include <cctype>
#include <cerrno>
#include <ctime>

#include "api/api_errors.hpp"
#include "http/listener.hpp"

namespace dsv41::server {

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;

namespace {

// Request header block limit: 64 KiB (Beast's default 8 KiB is short for long bearer keys plus
// proxy headers).
constexpr uint32_t kHeaderLimit = 64 * 1024;
// After an early error response (413, 400) the rest of the request is read and dropped for at
// most this long, so the client sees the response instead of a reset connection.
constexpr auto kDrainTime = std::chrono::seconds(2);
// The first read of a request (what arrived so far, up to this much).
constexpr size_t kFirstRead = 4096;

// IMF-fixdate of now, for the Date header every response carries (RFC 9110 §6.6.1).
std::string http_date() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  static constexpr const char* kDays[] = {"Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"};
  static constexpr const char* kMonths[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                            "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
  return fmt::format("{}, {:02d} {} {} {:02d}:{:02d}:{:02d} GMT", kDays[tm.tm_wday], tm.tm_mday,
                     kMonths[tm.tm_mon], tm.tm_year + 1900, tm.tm_hour, tm.tm_min, tm.tm_sec);
}

HttpRequest to_request(http::request<http::string_body>&& req) {
  HttpRequest out;
  out.method = std::string(req.method_string());
  std::string target(req.target());
  // Absolute form (RFC 9112 §3.2.2, "http://host/v1/models"): the path after the authority.
  if (const size_t scheme = target.find("://");
      scheme != std::string::npos && target.find('/') > scheme) {
    const size_t path = target.find('/', scheme + 3);
    target = path == std::string::npos ? "/" : target.substr(path);
  }
  out.path = target.substr(0, target.find('?'));
  for (const auto& field : req) {
    std::string name(field.name_string());
    for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    out.headers[name] = std::string(field.value());
  }
  out.body = std::move(req.body());
  return out;
}

}  // namespace

Connection::Connection(tcp::socket socket, Api& api, const HttpLimits& limits,
                       std::shared_ptr<ConnectionTracker> tracker)
    : stream_(std::move(socket)),
      api_(api),
      limits_(limits),
      tracker_(std::move(tracker)),
      keepalive_timer_(stream_.get_executor()) {}

Connection::~Connection() {
  if (channel_) channel_->cancel();  // never leave a generation running for nobody
  tracker_->remove(this);
}

void Connection::start() {
  net::dispatch(stream_.get_executor(), [self = shared_from_this()] { self->read_header(); });
}

void Connection::shutdown() {
  net::post(stream_.get_executor(), [self = shared_from_this()] {
    self->closing_ = true;
    if (self->idle_) self->close();
  });
}

// Empty lines before a request line are ignored (RFC 9112 §2.2: a stray CRLF after a body);
// true when some were.
bool Connection::skip_empty_lines() {
  bool skipped = false;
  for (;;) {
    const auto* p = static_cast<const char*>(buffer_.data().data());
    const size_t n = buffer_.size();
    if (n >= 2 && p[0] == '\r' && p[1] == '\n') {
      buffer_.consume(2);
    } else if (n >= 1 && p[0] == '\n') {
      buffer_.consume(1);
    } else if (n == 1 && p[0] == '\r') {  // a CRLF split across segments: its '\n' follows
      buffer_.consume(1);
    } else {
      return skipped;
    }
    skipped = true;
  }
}

void Connection::read_header() {
  if (closing_) return close();
  head_ = http10_ = false;  // of the previous request; reject() may answer before dispatch()
  skip_empty_lines();
  parser_.emplace();
  parser_->header_limit(kHeaderLimit);
  parser_->body_limit(static_cast<uint64_t>(limits_.max_body_bytes));
  idle_ = true;
  if (buffer_.size() > 0) return read_request();  // pipelined bytes: the request has begun
  // Between requests the idle timeout runs until the first byte; from there one read timeout
  // covers the header and the body (the idle timer used to cover the header too, so a client
  // trickling its header held a slot for idle + read timeout).
  stream_.expires_after(std::chrono::seconds(limits_.idle_timeout_s));
  stream_.async_read_some(buffer_.prepare(kFirstRead),
                          [self = shared_from_this()](beast::error_code ec, size_t n) {
                            self->buffer_.commit(n);
                            if (ec)
                              return self->close();  // idle timeout, the client left, shutdown
                            if (self->skip_empty_lines() && self->buffer_.size() == 0)
                              return self->read_header();
                            self->read_request();
                          });
}

void Connection::read_request() {
  idle_ = false;
  stream_.expires_after(std::chrono::seconds(limits_.read_timeout_s));
  http::async_read_header(
      stream_, buffer_, *parser_,
      [self = shared_from_this()](beast::error_code ec, size_t) { self->on_header(ec); });
}

void Connection::on_header(beast::error_code ec) {
  idle_ = false;
  if (ec == http::error::body_limit) return reject(413, "request body exceeds --max-body-bytes");
  if (ec == http::error::header_limit) return reject(431, "request header block exceeds 64 KiB");
  // The empty lines arrived after the read began: skip them and parse again.
  if (ec == http::error::bad_method && skip_empty_lines()) return read_header();
  if (ec) {
    if (ec == http::error::end_of_stream || ec == beast::error::timeout ||
        ec == net::error::operation_aborted || ec == net::error::connection_reset) {
      return close();
    }
    return reject(400, "malformed HTTP request: " + ec.message());
  }
  if (parser_->get().version() >= 11 && parser_->get().count(http::field::host) != 1)
    return reject(400, "an HTTP/1.1 request needs exactly one Host header (RFC 9112 §3.2)");
  // curl and libcurl send "Expect: 100-continue" for bodies over 1 KiB and wait ~1 s for the
  // interim response before sending the body anyway.
  // (Not to an HTTP/1.0 client: it must not get a 1xx, RFC 9110 §10.1.1.)
  if (parser_->get().version() >= 11 &&
      beast::iequals(parser_->get()[http::field::expect], "100-continue")) {
    static constexpr char kContinue[] = "HTTP/1.1 100 Continue\r\n\r\n";
    return net::async_write(stream_, net::buffer(kContinue, sizeof kContinue - 1),
                            [self = shared_from_this()](beast::error_code e, size_t) {
                              if (e) return self->close();
                              self->read_body();
                            });
  }
  read_body();
}

void Connection::read_body() {  // under read_request()'s timeout
  http::async_read(stream_, buffer_, *parser_,
                   [self = shared_from_this()](beast::error_code e, size_t) { self->on_body(e); });
}

void Connection::on_body(beast::error_code ec) {
  if (ec == http::error::body_limit) return reject(413, "request body exceeds --max-body-bytes");
  // The stream's timer has closed the socket by now: nothing can be written (docs/server.md).
  if (ec == beast::error::timeout) return close();
  if (ec == http::error::end_of_stream || ec == http::error::partial_message) return close();
  // A body the parser rejects (bad chunk framing, ...) is answered, not dropped.
  if (ec.category() == http::make_error_code(http::error::bad_chunk).category())
    return reject(400, "malformed HTTP request body: " + ec.message());
  if (ec) return close();
  dispatch();
}

void Connection::dispatch() {
  http::request<http::string_body> req = parser_->release();
  keep_alive_ = req.keep_alive() && !closing_;
  head_ = req.method() == http::verb::head;
  http10_ = req.version() < 11;
  HttpResponse res = api_.handle(to_request(std::move(req)));
  ++exchange_;
  if (!res.channel) return write_plain(std::move(res), !keep_alive_);
  channel_ = res.channel;
  streaming_ = true;
  if (channel_->mode() == ResponseChannel::Mode::kEventStream) return start_event_stream(res);
  await_channel();
}

void Connection::reject(int status, const std::string& message) {
  keep_alive_ = false;
  HttpResponse res = error_response(status, message);
  write_plain(std::move(res), true);
}

void Connection::write_plain(HttpResponse response, bool close_after) {
  auto msg = std::make_shared<http::response<http::string_body>>(
      static_cast<http::status>(response.status), 11);
  msg->set(http::field::server, "dsv41-server");
  msg->set(http::field::date, http_date());
  msg->set(http::field::content_type, response.content_type);
  for (const auto& [name, value] : response.headers) msg->set(name, value);
  msg->keep_alive(!close_after);
  if (head_) {  // the GET response's headers and length, no body (RFC 9110 §9.3.2)
    auto head = std::make_shared<http::response<http::empty_body>>(msg->base());
    head->content_length(response.body.size());
    stream_.expires_after(std::chrono::seconds(limits_.idle_timeout_s));
    return http::async_write(
        stream_, *head,
        [self = shared_from_this(), head, close_after](beast::error_code ec, size_t) {
          if (ec) return self->close();
          self->end_exchange(close_after);
        });
  }
  msg->body() = std::move(response.body);
  msg->prepare_payload();
  stream_.expires_after(std::chrono::seconds(limits_.idle_timeout_s));
  http::async_write(stream_, *msg,
                    [self = shared_from_this(), msg, close_after](beast::error_code ec, size_t) {
                      if (ec) return self->close();
                      self->end_exchange(close_after);
                    });
}

void Connection::start_event_stream(HttpResponse response) {
  auto msg = std::make_shared<http::response<http::empty_body>>(
      static_cast<http::status>(response.status), 11);
  msg->set(http::field::server, "dsv41-server");
  msg->set(http::field::date, http_date());
  msg->set(http::field::content_type, response.content_type);
  for (const auto& [name, value] : response.headers) msg->set(name, value);
  if (http10_) keep_alive_ = false;  // the body ends with the connection
  msg->keep_alive(keep_alive_);
  msg->chunked(!http10_);
  auto sr = std::make_shared<http::response_serializer<http::empty_body>>(*msg);
  writing_ = true;
  stream_.expires_after(std::chrono::seconds(limits_.idle_timeout_s));
  http::async_write_header(stream_, *sr,
                           [self = shared_from_this(), msg, sr](beast::error_code ec, size_t) {
                             self->writing_ = false;
                             if (ec) return self->client_gone();
                             self->last_write_ = std::chrono::steady_clock::now();
                             self->arm_keepalive();
                             self->await_channel();
                           });
}

void Connection::await_channel() {
  pending_self_ = shared_from_this();
  std::weak_ptr<Connection> weak = weak_from_this();
  auto executor = stream_.get_executor();
  watch_disconnect();
  channel_->set_waker([weak, executor] {
    if (auto self = weak.lock()) net::post(executor, [self] { self->pump(); });
  });
}

void Connection::pump() {
  if (!streaming_ || writing_ || closed_) return;
  ResponseChannel::Drained d = channel_->drain();
  if (channel_->mode() == ResponseChannel::Mode::kDeferred) {
    if (!d.response) return;
    streaming_ = false;
    keepalive_timer_.cancel();
    channel_.reset();
    // closing_: shutdown began while it waited; say so (Connection: close) before closing.
    write_plain(std::move(*d.response), !keep_alive_ || closing_);  // handler holds `this`
    pending_self_.reset();
    return;
  }
  if (d.bytes.empty() && !d.closed) return;
  write_chunk(std::move(d.bytes), d.closed);
}

void Connection::write_chunk(std::string bytes, bool last) {
  writing_ = true;
  out_ = std::move(bytes);
  stream_.expires_after(std::chrono::seconds(limits_.idle_timeout_s));
  auto done = [self = shared_from_this(), last](beast::error_code ec, size_t) {
    self->on_chunk_written(ec, last);
  };
  if (http10_) {  // raw bytes; the end of the body is the connection's close
    if (out_.empty()) return net::post(stream_.get_executor(), [done] { done({}, 0); });
    return net::async_write(stream_, net::buffer(out_), std::move(done));
  }
  if (out_.empty()) {
    net::async_write(stream_, http::make_chunk_last(), std::move(done));
  } else if (last) {
    // The final data, then the terminating zero-length chunk.
    net::async_write(stream_, http::make_chunk(net::buffer(out_)),
                     [self = shared_from_this()](beast::error_code ec, size_t) {
                       if (ec) return self->on_chunk_written(ec, true);
                       net::async_write(self->stream_, http::make_chunk_last(),
                                        [self](beast::error_code e, size_t) {
                                          self->on_chunk_written(e, true);
                                        });
                     });
  } else {
    net::async_write(stream_, http::make_chunk(net::buffer(out_)), std::move(done));
  }
}

void Connection::on_chunk_written(beast::error_code ec, bool last) {
  writing_ = false;
  if (ec) return client_gone();
  last_write_ = std::chrono::steady_clock::now();
  if (last) {
    streaming_ = false;
    keepalive_timer_.cancel();
    channel_.reset();
    pending_self_.reset();  // `self` of the write handler keeps this alive through end_exchange
    return end_exchange(!keep_alive_);
  }
  pump();
}

void Connection::arm_keepalive() {
  keepalive_timer_.expires_after(std::chrono::milliseconds(limits_.sse_keepalive_ms));
  keepalive_timer_.async_wait([self = shared_from_this()](beast::error_code ec) {
    if (ec || !self->streaming_ || self->closed_) return;
    const auto quiet = std::chrono::steady_clock::now() - self->last_write_;
    if (!self->writing_ && quiet >= std::chrono::milliseconds(self->limits_.sse_keepalive_ms))
      self->write_chunk(": keep-alive\n\n", false);
    self->arm_keepalive();
  });
}

void Connection::watch_disconnect() {
  // Readable while a response is pending means EOF/reset (client gone) or a pipelined request.
  // The wait belongs to one exchange: a completion left over from an earlier exchange on this
  // keep-alive connection is ignored. The peek never blocks (MSG_DONTWAIT on the raw socket): a
  // readiness whose bytes were already consumed by the request reader must not park an I/O thread
  // in recv() (that was the intermittent non-stream hang: the strand, and the thread, stayed
  // blocked until the client timed out). Nothing to read yet re-arms the wait.
  const uint64_t exchange = exchange_;
  stream_.socket().async_wait(
      tcp::socket::wait_read, [self = shared_from_this(), exchange](beast::error_code ec) {
        if (ec || exchange != self->exchange_ || !self->streaming_ || self->closed_) return;
        char byte;
        const ssize_t n =
            ::recv(self->stream_.socket().native_handle(), &byte, 1, MSG_PEEK | MSG_DONTWAIT);
        if (n > 0) return self->buffer_pipelined();  // keep watching for the close
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
          return self->watch_disconnect();
        self->client_gone();  // 0 = orderly EOF, < 0 = reset or another socket error
      });
}

// Bytes after the request (a pipelined request, a stray CRLF) while its response is pending:
// read them into buffer_ (parsed after the response) and watch again, so a client that then
// leaves is still noticed (the generation is cancelled, not left running with the socket in
// CLOSE_WAIT). Past the header limit the watch stops, as a client pipelining that much is
// reading its responses.
void Connection::buffer_pipelined() {
  beast::error_code ec;
  auto& sock = stream_.socket();
  const size_t avail = sock.available(ec);
  if (ec) return client_gone();
  if (avail == 0) return watch_disconnect();  // nothing readable after all: never block below
  if (buffer_.size() + avail > kHeaderLimit) return;
  const size_t n = sock.read_some(buffer_.prepare(avail), ec);  // avail bytes are there
  if (ec == net::error::would_block) return watch_disconnect();
  if (ec) return client_gone();  // includes EOF: the client left
  buffer_.commit(n);
  watch_disconnect();
}

void Connection::client_gone() {
  if (channel_) channel_->cancel();
  channel_.reset();
  streaming_ = false;
  close();
}

void Connection::end_exchange(bool close_after) {
  if (close_after || closing_) return drain_and_close();
  read_header();
}

void Connection::drain_and_close() {
  beast::error_code ec;
  stream_.socket().shutdown(tcp::socket::shutdown_send, ec);
  stream_.expires_after(kDrainTime);
  drain_some();
}

void Connection::drain_some() {
  out_.resize(16384);
  stream_.async_read_some(net::buffer(out_),
                          [self = shared_from_this()](beast::error_code e, size_t) {
                            if (e) return self->close();
                            self->drain_some();
                          });
}

void Connection::close() {
  if (closed_) return;
  closed_ = true;
  keepalive_timer_.cancel();
  if (channel_) channel_->cancel();
  beast::error_code ec;
  stream_.socket().shutdown(tcp::socket::shutdown_both, ec);
  stream_.close();
  // Last: may drop the final reference (callers reach here through a handler holding `self`).
  pending_self_.reset();
}

}  // namespace dsv41::server
