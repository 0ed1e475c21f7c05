// dsv41_tp_peer <rank> <port> <mode>: the second process of the [tp] tests.
//   script   connect, run_script, exit 0 on success (1 + message on stderr
//   otherwise) mismatch connect with max_context 131072; exit 0 iff refused
//   naming 'max_context' hold     connect, one barrier, then sleep 60 s (the
//   test kills or stops this process)
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

#include "parallel/tp_tcp.hpp"
#include "tp_script.hpp"

int main(int argc, char** argv) {
  using namespace dsv41;
  if (argc != 4) {
    std::fprintf(stderr, "usage: dsv41_tp_peer <rank> <port> script|mismatch|hold\n");
    return 2;
  }
  const int rank = std::atoi(argv[1]);
  const auto port = static_cast<uint16_t>(std::atoi(argv[2]));
  const std::string mode = argv[3];
  auto params = tp_test::loopback_params(rank, port);
  auto comm = parallel::connect_tp_tcp(
      params, tp_test::test_handshake(mode == "mismatch" ? "131072" : "262144"));
  if (mode == "mismatch") {
    bool named =
        !comm.is_ok() && comm.status().message().find("'max_context'") != std::string::npos;
    std::fprintf(stderr, "peer: %s\n", comm.status().to_string().c_str());
    return named ? 0 : 1;
  }
  if (!comm.is_ok()) {
    std::fprintf(stderr, "peer connect: %s\n", comm.status().to_string().c_str());
    return 1;
  }
  if (mode == "script") {
    std::string err = tp_test::run_script(**comm);
    if (!err.empty()) std::fprintf(stderr, "peer script: %s\n", err.c_str());
    return err.empty() ? 0 : 1;
  }
  if (Status s = (*comm)->barrier(); !s.is_ok()) return 1;
  std::this_thread::sleep_for(std::chrono::seconds(60));
  return 0;
}
