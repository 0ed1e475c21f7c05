// TpIbverbs setup over two real TpTcp ranks (threads, loopback) on a host without a usable RDMA
// device: both ranks fail cleanly with the same kind of error (missing library named, or the
// device not found), nothing hangs or crashes. The RDMA data path itself is not exercised here
// (docs/tp.md "One-shot RDMA transport": not verified on hardware).
#include <catch2/catch.hpp>
#include <thread>

#include "parallel/tp_ibverbs.hpp"
#include "parallel/tp_tcp.hpp"
#include "tp_script.hpp"

using namespace dsv41;
using namespace dsv41::parallel;
using namespace std::chrono_literals;

namespace {

struct Both {
  Status s0, s1;
};

Both setup(const IbvDeviceOptions& o0, const IbvDeviceOptions& o1) {
  uint16_t port = tp_test::free_port();
  Both b;
  auto rank = [&](int r, const IbvDeviceOptions& o, Status& out) {
    auto tcp = connect_tp_tcp(tp_test::loopback_params(r, port), tp_test::test_handshake());
    if (!tcp) {
      out = tcp.status();
      return;
    }
    auto comm = make_tp_ibverbs(std::move(*tcp), o, kOneShotDefaultMaxBytes, 5000ms);
    out = comm ? Status::ok() : comm.status();
  };
  std::thread t([&] { rank(1, o1, b.s1); });
  rank(0, o0, b.s0);
  t.join();
  return b;
}

}  // namespace

TEST_CASE("tp ibverbs: missing libibverbs on both ranks names the library", "[tp][parallel]") {
  IbvDeviceOptions o;
  o.library = "libdsv41-absent-ibverbs.so.1";
  o.device = "mlx5_0";
  auto start = std::chrono::steady_clock::now();
  Both b = setup(o, o);
  INFO(b.s0.to_string() << " | " << b.s1.to_string());
  REQUIRE(b.s0.code() == ErrorCode::kUnsupported);
  REQUIRE(b.s1.code() == ErrorCode::kUnsupported);
  CHECK_THAT(b.s0.message(), Catch::Contains("libdsv41-absent-ibverbs.so.1"));
  CHECK(std::chrono::steady_clock::now() - start < 10s);
}

TEST_CASE("tp ibverbs: one rank without its device fails both ranks", "[tp][parallel]") {
  IbvDeviceOptions bad;
  bad.library = "libdsv41-absent-ibverbs.so.1";
  bad.device = "mlx5_0";
  IbvDeviceOptions other = bad;
  other.device = "dsv41-no-such-rdma-dev";
  other.library = IbvShim::kDefaultLibrary;
  Both b = setup(bad, other);
  INFO(b.s0.to_string() << " | " << b.s1.to_string());
  REQUIRE(b.s0.code() == ErrorCode::kUnsupported);  // its own library error
  REQUIRE_FALSE(b.s1.is_ok());  // the device is absent here, or names rank 0's failure
  CHECK((b.s1.code() == ErrorCode::kNotFound || b.s1.code() == ErrorCode::kUnsupported));
}
