// Transport-agnostic request/response types shared by server/http (Beast) and server/api
// (handlers). A response either carries its body or a ResponseChannel that the handler fills later
// from the engine's scheduler thread (style-models.md §3 principle 13: handlers are functions from
// request to response with generator-style streaming).
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace dsv41::server {

struct HttpRequest {
  std::string method;                         // "GET", "POST", ...
  std::string path;                           // target without the query string
  std::map<std::string, std::string> headers;  // names lower-cased
  std::string body;

  // The header's value, or "" when absent (`name` lower-case).
  std::string header(const std::string& name) const;
};

class ResponseChannel;

struct HttpResponse {
  int status = 200;
  std::string content_type = "application/json";
  std::vector<std::pair<std::string, std::string>> headers;  // extra headers (Retry-After, ...)
  std::string body;
  // Set: the body is produced later. kEventStream sends headers now and the channel's bytes as
  // chunks; kDeferred waits for complete() and sends that response instead of this one.
  std::shared_ptr<ResponseChannel> channel;
};

// One producer (the handler's engine callback, any thread) and one consumer (the connection).
// The consumer's waker is invoked after every push()/close()/complete() and must not block
// (it posts to the connection's strand). cancel() is the consumer saying the client is gone.
class ResponseChannel {
 public:
  enum class Mode { kEventStream, kDeferred };
  explicit ResponseChannel(Mode mode) : mode_(mode) {}
  Mode mode() const { return mode_; }

  // Producer side.
  void push(std::string bytes);
  void close();
  void complete(HttpResponse response);
  // Runs `fn` once when the consumer cancels (at once if it already has).
  void set_canceller(std::function<void()> fn);

  // Consumer side.
  void set_waker(std::function<void()> fn);  // invoked at once if something is pending
  struct Drained {
    std::string bytes;
    bool closed = false;
    std::optional<HttpResponse> response;  // kDeferred, once complete
  };
  Drained drain();
  void cancel();
  bool cancelled() const;

 private:
  void wake(std::unique_lock<std::mutex>& lock);

  const Mode mode_;
  mutable std::mutex mu_;
  std::string pending_;
  bool closed_ = false;
  std::optional<HttpResponse> response_;
  bool cancelled_ = false;
  std::function<void()> canceller_;
  std::function<void()> waker_;
};

}  // namespace dsv41::server
