// ThreadPool: full coverage of [0, n), exceptions propagate, reuse across calls.
#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <future>
#include <stdexcept>
#include <vector>

#include "core/thread_pool.hpp"

using namespace dsv41;

TEST_CASE("thread pool: every index exactly once, many rounds", "[unit][threads]") {
  ThreadPool pool(3);
  REQUIRE(pool.size() == 3);
  for (size_t n : {0u, 1u, 2u, 5u, 1000u}) {
    std::vector<std::atomic<int>> hits(n);
    pool.parallel_for(n, [&](size_t b, size_t e) {
      for (size_t i = b; i < e; ++i) hits[i]++;
    });
    for (size_t i = 0; i < n; ++i) REQUIRE(hits[i] == 1);
  }
}

TEST_CASE("thread pool: an exception in a worker reaches the caller", "[unit][threads]") {
  ThreadPool pool(2);
  REQUIRE_THROWS_WITH(pool.parallel_for(100,
                                        [](size_t b, size_t e) {
                                          if (b > 0) throw std::runtime_error("worker failed");
                                        }),
                      "worker failed");
  int sum = 0;
  pool.parallel_for(1, [&](size_t b, size_t e) { sum += static_cast<int>(e - b); });
  REQUIRE(sum == 1);
}

TEST_CASE("thread pool: callers on several threads at once all finish with their own results",
          "[unit][threads]") {
  // The job slot is single; before callers were serialised two threads on one pool (two
  // Sessions of one CPU model) overwrote each other's job and hung.
  ThreadPool pool(4);
  auto caller = [&pool](int id) {
    for (int round = 0; round < 300; ++round) {
      std::vector<int> hits(97 + id, 0);
      pool.parallel_for(hits.size(), [&](size_t b, size_t e) {
        for (size_t i = b; i < e; ++i) hits[i] += 1;
      });
      for (size_t i = 0; i < hits.size(); ++i)
        if (hits[i] != 1) return false;
    }
    return true;
  };
  std::vector<std::future<bool>> runs;
  for (int id = 0; id < 3; ++id) runs.push_back(std::async(std::launch::async, caller, id));
  for (auto& r : runs) {
    REQUIRE(r.wait_for(std::chrono::seconds(60)) == std::future_status::ready);
    REQUIRE(r.get());
  }
}
