// ThreadPool: full coverage of [0, n), exceptions propagate, reuse across calls.
#include <catch2/catch.hpp>

#include <atomic>
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
