// TpParams::validate: every rejection names the field.
#include <catch2/catch.hpp>

#include "parallel/tp_comm.hpp"

using namespace dsv41;
using namespace dsv41::parallel;

namespace {

TpParams two_rank() {
  TpParams p;
  p.rank = 0;
  p.world = 2;
  p.bind_address = "10.10.10.13";
  p.peer_address = "10.10.10.11";
  p.port = 29500;
  return p;
}

void require_rejected(const TpParams& p, const std::string& needle) {
  Status s = p.validate();
  INFO(s.to_string());
  REQUIRE(s.code() == ErrorCode::kInvalidArgument);
  REQUIRE(s.message().find(needle) != std::string::npos);
}

}  // namespace

TEST_CASE("TpParams accepts the deployment pair and world 1", "[unit][parallel]") {
  REQUIRE(two_rank().validate().is_ok());
  TpParams one;
  REQUIRE(one.validate().is_ok());  // world 1 needs no addresses
}

TEST_CASE("TpParams rejects bad rank, world, addresses, port, timeouts", "[unit][parallel]") {
  TpParams p = two_rank();
  p.world = 3;
  require_rejected(p, "TpParams.world 3");
  p = two_rank();
  p.world = 0;
  require_rejected(p, "TpParams.world 0");
  p = two_rank();
  p.rank = 2;
  require_rejected(p, "TpParams.rank 2");
  p = two_rank();
  p.rank = -1;
  require_rejected(p, "TpParams.rank -1");
  p = two_rank();
  p.bind_address = "0.0.0.0";
  require_rejected(p, "wildcard");
  p = two_rank();
  p.bind_address = "";
  require_rejected(p, "TpParams.bind_address is empty");
  p = two_rank();
  p.peer_address = "spark-worker";
  require_rejected(p, "TpParams.peer_address 'spark-worker' is not an IPv4 literal");
  p = two_rank();
  p.peer_address = "255.255.255.255";
  require_rejected(p, "TpParams.peer_address");
  p = two_rank();
  p.peer_address = p.bind_address;
  require_rejected(p, "are both '10.10.10.13'");
  p = two_rank();
  p.port = 0;
  require_rejected(p, "TpParams.port is 0");
  p = two_rank();
  p.op_timeout = std::chrono::milliseconds(0);
  require_rejected(p, "TpParams.op_timeout is 0 ms");
  p = two_rank();
  p.connect_timeout = std::chrono::milliseconds(-5);
  require_rejected(p, "TpParams.connect_timeout is -5 ms");
  p = two_rank();
  p.heartbeat_interval = std::chrono::milliseconds(1000);
  p.heartbeat_timeout = std::chrono::milliseconds(2000);
  require_rejected(p, "heartbeat_timeout 2000 ms must exceed 2 x heartbeat_interval 1000 ms");
}
