// TpParams::validate and op names (tp_comm.hpp).
#include <arpa/inet.h>

#include "core/check.hpp"
#include "parallel/tp_comm.hpp"

namespace dsv41::parallel {
namespace {

// Error text for an address field, or empty when it is a usable unicast IPv4
// literal.
std::string address_problem(const std::string& field, const std::string& value) {
  in_addr addr{};
  if (value.empty())
    return fmt::format("TpParams.{} is empty (need the fabric IPv4 address)", field);
  if (inet_pton(AF_INET, value.c_str(), &addr) != 1)
    return fmt::format("TpParams.{} '{}' is not an IPv4 literal", field, value);
  if (addr.s_addr == htonl(INADDR_ANY) || addr.s_addr == htonl(INADDR_BROADCAST))
    return fmt::format(
        "TpParams.{} '{}' is a wildcard/broadcast address; bind to the fabric "
        "address so rank traffic stays on the intended network",
        field, value);
  return {};
}

}  // namespace

Status TpParams::validate() const {
  using std::chrono::milliseconds;
  if (world < 1 || world > kMaxWorld)
    return {ErrorCode::kInvalidArgument,
            fmt::format("TpParams.world {} outside [1, {}]", world, kMaxWorld)};
  if (rank < 0 || rank >= world)
    return {ErrorCode::kInvalidArgument,
            fmt::format("TpParams.rank {} outside [0, world {})", rank, world)};
  if (world == 1) return Status::ok();
  for (const auto& [field, value] :
       {std::pair<const char*, const std::string&>{"bind_address", bind_address},
        std::pair<const char*, const std::string&>{"peer_address", peer_address}}) {
    std::string problem = address_problem(field, value);
    if (!problem.empty()) return {ErrorCode::kInvalidArgument, problem};
  }
  if (bind_address == peer_address)
    return {ErrorCode::kInvalidArgument,
            fmt::format("TpParams.bind_address and peer_address are both '{}'", bind_address)};
  if (port == 0) return {ErrorCode::kInvalidArgument, "TpParams.port is 0 (rank 1 must know it)"};
  for (const auto& [field, value] :
       {std::pair<const char*, milliseconds>{"connect_timeout", connect_timeout},
        {"op_timeout", op_timeout},
        {"heartbeat_interval", heartbeat_interval},
        {"heartbeat_timeout", heartbeat_timeout}}) {
    if (value.count() <= 0)
      return {ErrorCode::kInvalidArgument,
              fmt::format("TpParams.{} is {} ms (must be > 0)", field, value.count())};
  }
  // One lost or late beat must not declare the peer dead.
  if (heartbeat_timeout <= 2 * heartbeat_interval)
    return {ErrorCode::kInvalidArgument,
            fmt::format("TpParams.heartbeat_timeout {} ms must exceed 2 x "
                        "heartbeat_interval {} ms",
                        heartbeat_timeout.count(), heartbeat_interval.count())};
  return Status::ok();
}

const char* tp_op_name(TpOp op) {
  switch (op) {
    case TpOp::kAllReduceF32:
      return "all_reduce_sum_f32";
    case TpOp::kAllReduceBf16:
      return "all_reduce_sum_bf16";
    case TpOp::kAllGather:
      return "all_gather";
    case TpOp::kBroadcast:
      return "broadcast";
    case TpOp::kBarrier:
      return "barrier";
  }
  return "unknown_op";
}

}  // namespace dsv41::parallel
