// tp_script.hpp.
#include "tp_script.hpp"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <vector>

#include "quant/dtype.hpp"

namespace dsv41::tp_test {

using parallel::TpParams;

TpParams loopback_params(int rank, uint16_t port) {
  TpParams p;
  p.rank = rank;
  p.world = 2;
  p.bind_address = rank == 0 ? "127.0.0.1" : "127.0.0.2";
  p.peer_address = rank == 0 ? "127.0.0.2" : "127.0.0.1";
  p.port = port;
  p.connect_timeout = std::chrono::milliseconds(10000);
  p.op_timeout = std::chrono::milliseconds(30000);
  p.heartbeat_interval = std::chrono::milliseconds(100);
  p.heartbeat_timeout = std::chrono::milliseconds(2000);
  return p;
}

uint16_t free_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa));
  socklen_t len = sizeof(sa);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&sa), &len);
  ::close(fd);
  return ntohs(sa.sin_port);
}

parallel::Handshake test_handshake(const std::string& max_context) {
  parallel::Handshake h;
  h.config_hash = parallel::fnv1a_64("config.json");
  h.plan_hash = parallel::fnv1a_64("plan");
  h.inventory_hash = parallel::fnv1a_64("inventory");
  h.settings = {{"kv_dtype", "fp8"}, {"max_context", max_context}};
  return h;
}

namespace {

// Operand of rank r at index i: awkward values so that rounding matters.
float operand(int r, size_t i) {
  return (r == 0 ? 1.0f / 3.0f : 1e-3f) * static_cast<float>(i + 1);
}

// Returns "" when every rank holds the same bytes as this one.
std::string check_identical(parallel::TpComm& comm, std::span<const std::byte> mine,
                            const char* what) {
  std::vector<std::byte> all(2 * mine.size());
  Status s = comm.all_gather(mine, all);
  if (!s.is_ok()) return fmt::format("{}: all_gather for comparison: {}", what, s.to_string());
  if (std::memcmp(all.data(), all.data() + mine.size(), mine.size()) != 0)
    return fmt::format("{}: ranks hold different bytes", what);
  return "";
}

}  // namespace

std::string run_script(parallel::TpComm& comm) {
  const int r = comm.rank();
  constexpr size_t kN = 5120;  // one hidden row
  std::vector<float> f(kN);
  for (size_t i = 0; i < kN; ++i) f[i] = operand(r, i);
  if (Status s = comm.all_reduce_sum_f32(f); !s.is_ok()) return "all_reduce f32: " + s.to_string();
  for (size_t i = 0; i < kN; ++i) {
    float want = operand(0, i) + operand(1, i);
    if (f[i] != want) return fmt::format("all_reduce f32 [{}]: {} != {}", i, f[i], want);
  }
  if (auto e = check_identical(comm, std::as_bytes(std::span(f)), "f32"); !e.empty()) return e;

  std::vector<uint16_t> b(kN);
  for (size_t i = 0; i < kN; ++i) b[i] = f32_to_bf16(operand(r, i));
  if (Status s = comm.all_reduce_sum_bf16(b); !s.is_ok())
    return "all_reduce bf16: " + s.to_string();
  for (size_t i = 0; i < kN; ++i) {
    uint16_t want = f32_to_bf16(bf16_to_f32(f32_to_bf16(operand(0, i))) +
                                bf16_to_f32(f32_to_bf16(operand(1, i))));
    if (b[i] != want) return fmt::format("all_reduce bf16 [{}]: {:#06x} != {:#06x}", i, b[i], want);
  }
  if (auto e = check_identical(comm, std::as_bytes(std::span(b)), "bf16"); !e.empty()) return e;

  std::vector<std::byte> mine(1000, std::byte(0x10 + r)), all(2000);
  if (Status s = comm.all_gather(mine, all); !s.is_ok()) return "all_gather: " + s.to_string();
  for (size_t i = 0; i < all.size(); ++i)
    if (all[i] != std::byte(0x10 + i / 1000)) return fmt::format("all_gather byte {} wrong", i);

  for (int root = 0; root < 2; ++root) {
    std::vector<std::byte> data(777, std::byte(r == root ? 0xA0 + root : 0));
    if (Status s = comm.broadcast(data, root); !s.is_ok()) return "broadcast: " + s.to_string();
    for (std::byte v : data)
      if (v != std::byte(0xA0 + root)) return fmt::format("broadcast root {}: wrong byte", root);
  }
  if (Status s = comm.barrier(); !s.is_ok()) return "barrier: " + s.to_string();
  return "";
}

}  // namespace dsv41::tp_test
