// Two ranks of TpTcp in one process (two threads) over loopback.
#include <array>
#include <catch2/catch.hpp>
#include <cstring>
#include <future>
#include <span>
#include <thread>
#include <vector>

#include "parallel/rendezvous.hpp"
#include "parallel/tcp_socket.hpp"
#include "parallel/tp_tcp.hpp"
#include "tp_script.hpp"

using namespace dsv41;
using namespace dsv41::parallel;
using dsv41::tp_test::loopback_params;
using dsv41::tp_test::test_handshake;

namespace {

struct Ranks {
  Result<std::unique_ptr<TpComm>> r0 = Status(ErrorCode::kInternal, "unset");
  Result<std::unique_ptr<TpComm>> r1 = Status(ErrorCode::kInternal, "unset");
};

Ranks connect_pair(const std::string& max_context_rank1 = "262144") {
  uint16_t port = tp_test::free_port();
  Ranks r;
  std::thread t(
      [&] { r.r1 = connect_tp_tcp(loopback_params(1, port), test_handshake(max_context_rank1)); });
  r.r0 = connect_tp_tcp(loopback_params(0, port), test_handshake());
  t.join();
  return r;
}

}  // namespace

TEST_CASE("tp threads: every collective, bit-identical sums", "[tp][parallel]") {
  Ranks r = connect_pair();
  INFO(r.r0.status().to_string() << " / " << r.r1.status().to_string());
  REQUIRE(r.r0.is_ok());
  REQUIRE(r.r1.is_ok());
  std::string e1;
  std::thread t([&] { e1 = tp_test::run_script(**r.r1); });
  std::string e0 = tp_test::run_script(**r.r0);
  t.join();
  INFO(e0 << " | " << e1);
  REQUIRE(e0.empty());
  REQUIRE(e1.empty());
}

TEST_CASE("tp threads: settings mismatch refused on both ranks, key named", "[tp][parallel]") {
  Ranks r = connect_pair("131072");
  REQUIRE_FALSE(r.r0.is_ok());
  REQUIRE_FALSE(r.r1.is_ok());
  const std::string want =
      "TP ranks disagree on setting 'max_context': rank 0 "
      "has '262144', rank 1 has '131072'";
  REQUIRE(r.r0.status().code() == ErrorCode::kInvalidArgument);
  REQUIRE(r.r0.status().message() == want);
  REQUIRE(r.r1.status().message() == want);
}

TEST_CASE("tp threads: different ops at the same step are named on both ranks", "[tp][parallel]") {
  Ranks r = connect_pair();
  REQUIRE(r.r0.is_ok());
  REQUIRE(r.r1.is_ok());
  std::vector<std::byte> mine(8), all(16);
  Status s1;
  std::thread t([&] { s1 = (*r.r1)->all_gather(mine, all); });
  Status s0 = (*r.r0)->barrier();
  t.join();
  REQUIRE(s0.code() == ErrorCode::kInvalidArgument);
  REQUIRE(s0.message().find("rank 0 issued barrier(0 bytes, root 0), rank 1 "
                            "issued all_gather(8") != std::string::npos);
  REQUIRE(s1.code() == ErrorCode::kInvalidArgument);
  REQUIRE(s1.message() == s0.message());
  REQUIRE_FALSE((*r.r0)->barrier().is_ok());  // poisoned (own mismatch or the peer's abort)
}

TEST_CASE("tp threads: abort() on one rank ends the other's pending call", "[tp][parallel]") {
  Ranks r = connect_pair();
  REQUIRE(r.r0.is_ok());
  REQUIRE(r.r1.is_ok());
  auto pending = std::async(std::launch::async, [&] { return (*r.r1)->barrier(); });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  (*r.r0)->abort("engine shutdown requested");
  REQUIRE(pending.wait_for(std::chrono::seconds(5)) == std::future_status::ready);
  Status s = pending.get();
  INFO(s.to_string());
  REQUIRE(s.code() == ErrorCode::kAborted);
  REQUIRE(s.message().find("rank 0") != std::string::npos);
  Status local = (*r.r0)->barrier();
  REQUIRE(local.code() == ErrorCode::kAborted);
  REQUIRE(local.message().find("engine shutdown requested") != std::string::npos);
}

TEST_CASE("tp threads: caller abort flag and per-call timeout", "[tp][parallel]") {
  Ranks r = connect_pair();
  REQUIRE(r.r0.is_ok());
  REQUIRE(r.r1.is_ok());
  CallControl ctl;
  ctl.timeout = std::chrono::milliseconds(300);
  auto t0 = std::chrono::steady_clock::now();
  Status s = (*r.r0)->barrier(ctl);  // rank 1 never joins
  auto ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0);
  REQUIRE(s.code() == ErrorCode::kTimeout);
  REQUIRE(s.message().find("barrier #0") != std::string::npos);
  REQUIRE(s.message().find("no reply within 300 ms") != std::string::npos);
  REQUIRE(ms.count() < 2000);

  Ranks q = connect_pair();
  REQUIRE(q.r0.is_ok());
  std::atomic<bool> cancel{false};
  CallControl c2;
  c2.abort = &cancel;
  auto pending = std::async(std::launch::async, [&] { return (*q.r0)->barrier(c2); });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  cancel = true;
  REQUIRE(pending.wait_for(std::chrono::seconds(2)) == std::future_status::ready);
  Status a = pending.get();
  REQUIRE(a.code() == ErrorCode::kAborted);
  REQUIRE(a.message().find("aborted by the caller") != std::string::npos);
}

TEST_CASE("tp threads: nobody listening -> kTimeout naming the endpoint", "[tp][parallel]") {
  TpParams p = loopback_params(1, tp_test::free_port());
  p.connect_timeout = std::chrono::milliseconds(400);
  auto r = connect_tp_tcp(p, test_handshake());
  REQUIRE(r.status().code() == ErrorCode::kTimeout);
  REQUIRE(r.status().message().find("127.0.0.2 -> 127.0.0.1:") != std::string::npos);
}

TEST_CASE("tp threads: bind address not on this host -> kIo naming it", "[tp][parallel]") {
  TpParams p = loopback_params(0, tp_test::free_port());
  p.bind_address = "10.77.0.1";  // the netns test address; not configured on the host
  p.connect_timeout = std::chrono::milliseconds(300);
  auto r = connect_tp_tcp(p, test_handshake());
  REQUIRE(r.status().code() == ErrorCode::kIo);
  REQUIRE(r.status().message().find("bind(10.77.0.1:") != std::string::npos);
}

namespace {

// Rank 0 (a real TpTcp, connected on a thread) and rank 1 as a raw socket after a real handshake:
// the test writes frames by hand. deadline bounds every socket call of the test.
struct RawPeerPair {
  Result<std::unique_ptr<TpComm>> r0 = Status(ErrorCode::kInternal, "unset");
  Clock::time_point deadline = Clock::now() + std::chrono::seconds(30);
  StopCheck none = [] { return Status::ok(); };
  TcpSocket peer;

  explicit RawPeerPair(TpParams p0) {
    std::thread t([&] { r0 = connect_tp_tcp(p0, test_handshake()); });
    const TpParams p1 = loopback_params(1, p0.port);
    peer = TcpSocket::connect_to(p1.bind_address, p1.peer_address, p1.port, deadline, none);
    Handshake mine = test_handshake();
    mine.rank = 1;
    mine.world = 2;
    (void)exchange_handshake(peer, mine, deadline, none);
    t.join();
    REQUIRE(r0.is_ok());
  }
  // FrameHeader: magic "DSVF" (LE), type (1 beat, 2 data, 3 abort), op, root, pad, seq, logical
  // and payload bytes.
  void send_header(uint8_t type, uint64_t logical_bytes, uint64_t payload_bytes) {
    std::array<uint8_t, 32> header{};
    const uint32_t magic = 0x46565344;
    std::memcpy(header.data(), &magic, 4);
    header[4] = type;
    std::memcpy(header.data() + 16, &logical_bytes, 8);
    std::memcpy(header.data() + 24, &payload_bytes, 8);
    peer.send_all(std::as_bytes(std::span(header)), deadline, none, "frame header");
  }
};

}  // namespace

// A corrupt frame header: a beat declaring 8 GiB of payload. The reader refuses it by type
// before allocating (it used to allocate the 8 GiB, and a bad_alloc in the reader thread
// terminated the process), and rank 0's next call fails naming the header.
TEST_CASE("tp threads: a corrupt frame header fails the link by name, nothing allocated",
          "[tp][parallel]") {
  RawPeerPair r(loopback_params(0, tp_test::free_port()));
  r.send_header(1, 0, uint64_t{1} << 33);
  const Status s = (*r.r0)->barrier();
  INFO(s.to_string());
  REQUIRE(s.code() == ErrorCode::kCorruptFile);
  REQUIRE(s.message().find("bad header") != std::string::npos);
  REQUIRE(s.message().find("type 1, 8589934592 payload bytes, at most 0 for its type") !=
          std::string::npos);
  // The peer is told why: after any beats and the barrier's data frame, an abort frame (type 3)
  // whose reason names the header.
  for (;;) {
    std::array<uint8_t, 32> reply{};
    r.peer.recv_all(std::as_writable_bytes(std::span(reply)), r.deadline, r.none, "frame header");
    uint64_t payload_bytes = 0;
    std::memcpy(&payload_bytes, reply.data() + 24, 8);
    REQUIRE(payload_bytes < 65536);
    std::string body(payload_bytes, '\0');
    r.peer.recv_all(std::as_writable_bytes(std::span(body)), r.deadline, r.none, "frame payload");
    if (reply[4] != 3) continue;
    REQUIRE(body.find("bad header") != std::string::npos);
    break;
  }
}

// A data frame longer on the wire than the heartbeat timeout: 12 MiB trickled over ~2 s against
// a 1 s timeout. Bytes still arriving are a live peer (the heartbeat counted only whole frames
// and declared the peer silent mid-frame).
TEST_CASE("tp threads: a slow large frame keeps the link alive", "[tp][parallel]") {
  TpParams p0 = loopback_params(0, tp_test::free_port());
  p0.heartbeat_timeout = std::chrono::milliseconds(1000);
  RawPeerPair r(p0);
  const uint64_t payload = uint64_t{12} << 20;
  r.send_header(2, payload, payload);
  const std::vector<std::byte> piece(256 << 10);
  for (uint64_t sent = 0; sent < payload; sent += piece.size()) {
    r.peer.send_all(piece, r.deadline, r.none, "payload");
    std::this_thread::sleep_for(std::chrono::milliseconds(40));
  }
  const Status h = (*r.r0)->health();
  INFO(h.to_string());
  REQUIRE(h.is_ok());
}
