// Waits for a handler's response channel to close and returns (status, body): the deferred JSON
// response, or the bytes an event stream wrote. Shared by the server's handler tests.
#pragma once

#include <catch2/catch.hpp>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <string>
#include <utility>

#include "http/http_types.hpp"

namespace dsv41::server::test {

inline std::pair<int, std::string> collect(HttpResponse res,
                                           std::chrono::seconds limit = std::chrono::seconds(60)) {
  if (!res.channel) return {res.status, res.body};
  std::mutex mu;
  std::condition_variable cv;
  bool closed = false;
  std::string bytes;
  std::optional<HttpResponse> final_response;
  res.channel->set_waker([&] {
    std::lock_guard<std::mutex> lock(mu);
    ResponseChannel::Drained d = res.channel->drain();
    bytes += d.bytes;
    if (d.response) final_response = std::move(d.response);
    if (d.closed) closed = true;
    cv.notify_all();
  });
  std::unique_lock<std::mutex> lock(mu);
  REQUIRE(cv.wait_for(lock, limit, [&] { return closed; }));
  if (final_response) return {final_response->status, final_response->body};
  return {res.status, bytes};
}

}  // namespace dsv41::server::test
