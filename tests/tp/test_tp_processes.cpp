// Two ranks of TpTcp in two processes: this test is rank 0, dsv41_tp_peer is
// rank 1.
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>

#include <catch2/catch.hpp>
#include <future>
#include <string>
#include <thread>

#include "parallel/tp_tcp.hpp"
#include "tp_script.hpp"

extern char** environ;

using namespace dsv41;
using namespace dsv41::parallel;

namespace {

pid_t spawn_peer(uint16_t port, const std::string& mode) {
  std::string bin = DSV41_TP_PEER_BIN, rank = "1", p = std::to_string(port);
  char* argv[] = {bin.data(), rank.data(), p.data(), const_cast<char*>(mode.c_str()), nullptr};
  pid_t pid = -1;
  REQUIRE(posix_spawn(&pid, bin.c_str(), nullptr, nullptr, argv, environ) == 0);
  return pid;
}

int wait_exit(pid_t pid) {
  int status = 0;
  REQUIRE(waitpid(pid, &status, 0) == pid);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

std::unique_ptr<TpComm> connect_rank0(uint16_t port) {
  auto r = connect_tp_tcp(tp_test::loopback_params(0, port), tp_test::test_handshake());
  INFO(r.status().to_string());
  REQUIRE(r.is_ok());
  return std::move(r).value();
}

}  // namespace

TEST_CASE("tp processes: every collective, bit-identical sums", "[tp][parallel]") {
  uint16_t port = tp_test::free_port();
  pid_t peer = spawn_peer(port, "script");
  auto comm = connect_rank0(port);
  std::string err = tp_test::run_script(*comm);
  INFO(err);
  REQUIRE(err.empty());
  REQUIRE(wait_exit(peer) == 0);
}

TEST_CASE("tp processes: config mismatch refused on both sides", "[tp][parallel]") {
  uint16_t port = tp_test::free_port();
  pid_t peer = spawn_peer(port, "mismatch");
  auto r = connect_tp_tcp(tp_test::loopback_params(0, port), tp_test::test_handshake());
  REQUIRE(r.status().code() == ErrorCode::kInvalidArgument);
  REQUIRE(r.status().message().find("setting 'max_context'") != std::string::npos);
  REQUIRE(wait_exit(peer) == 0);  // the peer saw the key named too
}

TEST_CASE("tp processes: killed peer -> pending collective kAborted naming it", "[tp][parallel]") {
  uint16_t port = tp_test::free_port();
  pid_t peer = spawn_peer(port, "hold");
  auto comm = connect_rank0(port);
  REQUIRE(comm->barrier().is_ok());
  std::vector<float> x(1024, 1.0f);
  auto t0 = std::chrono::steady_clock::now();
  auto pending = std::async(std::launch::async, [&] { return comm->all_reduce_sum_f32(x); });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  REQUIRE(kill(peer, SIGKILL) == 0);
  REQUIRE(pending.wait_for(std::chrono::seconds(10)) == std::future_status::ready);
  Status s = pending.get();
  auto secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  wait_exit(peer);
  INFO(s.to_string() << " after " << secs << " s");
  REQUIRE(s.code() == ErrorCode::kAborted);
  REQUIRE(s.message().find("rank 1 (127.0.0.2)") != std::string::npos);
  REQUIRE(secs < 10.0);
}

TEST_CASE(
    "tp processes: stopped peer (SIGSTOP) -> kTimeout within the "
    "heartbeat timeout",
    "[tp][parallel]") {
  uint16_t port = tp_test::free_port();
  pid_t peer = spawn_peer(port, "hold");
  auto comm = connect_rank0(port);  // heartbeat timeout 2 s, op timeout 30 s
  REQUIRE(comm->barrier().is_ok());
  REQUIRE(kill(peer, SIGSTOP) == 0);
  std::vector<float> x(1024, 1.0f);
  auto t0 = std::chrono::steady_clock::now();
  auto pending = std::async(std::launch::async, [&] { return comm->all_reduce_sum_f32(x); });
  bool ready = pending.wait_for(std::chrono::seconds(10)) == std::future_status::ready;
  kill(peer, SIGKILL);
  kill(peer, SIGCONT);
  wait_exit(peer);
  REQUIRE(ready);
  Status s = pending.get();
  auto secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  INFO(s.to_string() << " after " << secs << " s");
  REQUIRE(s.code() == ErrorCode::kTimeout);
  REQUIRE(s.message().find("rank 1 (127.0.0.2) silent") != std::string::npos);
  REQUIRE(secs < 10.0);
}
