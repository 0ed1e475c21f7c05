// Heartbeat: silence longer than the timeout is reported once; traffic keeps
// the peer alive.
#include <atomic>
#include <catch2/catch.hpp>
#include <thread>

#include "parallel/heartbeat.hpp"

using namespace dsv41;
using namespace dsv41::parallel;
using namespace std::chrono_literals;

TEST_CASE("heartbeat reports a silent peer within the timeout", "[unit][parallel]") {
  std::atomic<int> beats{0}, losses{0};
  std::mutex mu;
  Status lost;
  auto t0 = std::chrono::steady_clock::now();
  std::atomic<int64_t> lost_after_ms{-1};
  Heartbeat hb(20ms, 200ms,
               {[&] { ++beats; },
                [&](Status s) {
                  std::lock_guard lock(mu);
                  lost = s;
                  ++losses;
                  lost_after_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                                      std::chrono::steady_clock::now() - t0)
                                      .count();
                }},
               "rank 1 (10.77.0.2)");
  for (int i = 0; i < 100 && losses == 0; ++i) std::this_thread::sleep_for(10ms);
  hb.stop();
  std::lock_guard lock(mu);
  REQUIRE(losses == 1);
  REQUIRE(lost.code() == ErrorCode::kTimeout);
  REQUIRE(lost.message().find("rank 1 (10.77.0.2)") != std::string::npos);
  REQUIRE(lost_after_ms >= 200);
  REQUIRE(lost_after_ms < 600);
  REQUIRE(beats >= 5);
}

TEST_CASE("heartbeat with traffic never reports", "[unit][parallel]") {
  std::atomic<int> losses{0};
  Heartbeat hb(20ms, 100ms, {[] {}, [&](Status) { ++losses; }}, "rank 0");
  for (int i = 0; i < 40; ++i) {  // 400 ms of traffic, 4x the timeout
    hb.saw_traffic();
    std::this_thread::sleep_for(10ms);
  }
  hb.stop();
  REQUIRE(losses == 0);
}
