// Collects an Engine's events per request (tokens in order, the kFinished event) and waits for a
// request to finish; shared by the runtime, TP and vision engine tests.
#pragma once

#include <catch2/catch.hpp>
#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <vector>

#include "dsv41/engine.hpp"

namespace dsv41::test {

struct EventCollector {
  std::mutex mu;
  std::condition_variable cv;
  std::map<RequestId, std::vector<int32_t>> tokens;
  std::map<RequestId, GenerationEvent> done;

  EventCallback callback() {
    return [this](const GenerationEvent& ev) {
      std::lock_guard<std::mutex> lock(mu);
      if (ev.kind == GenerationEvent::Kind::kToken)
        tokens[ev.id].push_back(ev.token);
      else
        done[ev.id] = ev;
      cv.notify_all();
    };
  }
  // id's kFinished event within `limit` into *ev; false on timeout.
  bool wait_for(RequestId id, std::chrono::milliseconds limit, GenerationEvent* ev) {
    std::unique_lock<std::mutex> lock(mu);
    if (!cv.wait_for(lock, limit, [&] { return done.count(id) > 0; })) return false;
    *ev = done[id];
    return true;
  }
  // REQUIREs id's kFinished event within 60 s and returns it.
  GenerationEvent wait(RequestId id) {
    GenerationEvent ev;
    REQUIRE(wait_for(id, std::chrono::seconds(60), &ev));
    return ev;
  }
};

}  // namespace dsv41::test
