// TpLocal (world 1): identities, argument checks, caller abort, sticky abort().
#include <catch2/catch.hpp>
#include <vector>

#include "parallel/tp_comm.hpp"

using namespace dsv41;
using namespace dsv41::parallel;

TEST_CASE("TpLocal collectives are identities", "[unit][parallel]") {
  auto comm = make_tp_local();
  REQUIRE(comm->rank() == 0);
  REQUIRE(comm->world() == 1);
  std::vector<float> f{1.5f, -2.0f};
  REQUIRE(comm->all_reduce_sum_f32(f).is_ok());
  REQUIRE(f == std::vector<float>{1.5f, -2.0f});
  std::vector<uint16_t> b{0x3fc0, 0xc000};
  REQUIRE(comm->all_reduce_sum_bf16(b).is_ok());
  REQUIRE(b == std::vector<uint16_t>{0x3fc0, 0xc000});
  std::vector<std::byte> mine{std::byte{7}, std::byte{9}}, out(2);
  REQUIRE(comm->all_gather(mine, out).is_ok());
  REQUIRE(out == mine);
  REQUIRE(comm->broadcast(out, 0).is_ok());
  REQUIRE(comm->barrier().is_ok());
}

TEST_CASE("TpLocal rejects bad sizes and roots, honours abort", "[unit][parallel]") {
  auto comm = make_tp_local();
  std::vector<std::byte> mine(4), out(8);
  Status s = comm->all_gather(mine, out);
  REQUIRE(s.code() == ErrorCode::kInvalidArgument);
  REQUIRE(s.message().find("out has 8 bytes") != std::string::npos);
  REQUIRE(comm->broadcast(mine, 1).code() == ErrorCode::kInvalidArgument);

  std::atomic<bool> cancel{true};
  CallControl ctl;
  ctl.abort = &cancel;
  s = comm->barrier(ctl);
  REQUIRE(s.code() == ErrorCode::kAborted);
  REQUIRE(s.message().find("barrier") != std::string::npos);
  REQUIRE(comm->barrier().is_ok());  // a caller abort on world 1 leaves no undefined state

  comm->abort("engine shutdown");
  s = comm->barrier();
  REQUIRE(s.code() == ErrorCode::kAborted);
  REQUIRE(s.message().find("engine shutdown") != std::string::npos);
}

TEST_CASE("borrow_tp_comm forwards every call and owns nothing", "[unit][parallel]") {
  auto target = make_tp_local();
  {
    auto b = borrow_tp_comm(*target);
    REQUIRE(b->rank() == 0);
    REQUIRE(b->world() == 1);
    REQUIRE_FALSE(b->takes_device_memory());
    std::vector<float> f{1.5f};
    REQUIRE(b->all_reduce_sum_f32(f).is_ok());
    std::vector<std::byte> mine{std::byte{3}}, out(2);
    const Status s = b->all_gather(mine, out);  // the target's own size check answers
    REQUIRE(s.code() == ErrorCode::kInvalidArgument);
    REQUIRE(s.message().find("world 1") != std::string::npos);
    REQUIRE(b->health().is_ok());
  }
  REQUIRE(target->barrier().is_ok());  // still usable after the borrower is gone
  auto b = borrow_tp_comm(*target);
  b->abort("test says stop");  // reaches the target: sticky there
  const Status s = target->barrier();
  REQUIRE(s.code() == ErrorCode::kAborted);
  REQUIRE(s.message().find("test says stop") != std::string::npos);
  REQUIRE(b->barrier().code() == ErrorCode::kAborted);
}
