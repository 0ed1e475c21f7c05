// The CUDA forward's TP collectives alone (issue 8: "the all-reduce time per step measured
// separately"): DeviceTp::all_reduce_sum of [rows, 5120] fp32 device rows (the attention and FFN
// outputs, 2 per layer) and the one-row logits gather (64,640 floats per rank at the released
// vocabulary), over the TCP link or the NCCL data link, between two processes (one GPU each:
// CUDA_VISIBLE_DEVICES). Each call includes DeviceTp's stream sync, as in a forward step. Both
// ranks run the same sequence; rank 0 prints the table and the per-step estimate (80
// all-reduces of the step's rows + one gather) for the released 40 layers.
//
//   dsv41_bench_tp_allreduce tcp|nccl RANK BIND PEER PORT   (50 timed calls per size)
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "backend/cuda/cuda_check.hpp"
#include "backend/cuda/cuda_stream.hpp"
#include "backend/cuda/device_buffer.hpp"
#include "backend/cuda/forward/device_tp.hpp"
#include "parallel/tp_tcp.hpp"
#include "runtime/tp_nccl_link.hpp"

using Clock = std::chrono::steady_clock;
using namespace dsv41;

namespace {

constexpr int64_t kHidden = 5120;
constexpr int64_t kVocabPerRank = 64640;  // 129,280 / 2
constexpr int kLayers = 40;

int usage() {
  std::fprintf(stderr, "usage: dsv41_bench_tp_allreduce tcp|nccl RANK BIND PEER PORT\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) try {
  if (argc != 6) return usage();
  const std::string link = argv[1];
  if (link != "tcp" && link != "nccl") return usage();
  constexpr int repeats = 50;
  parallel::TpParams p;
  p.world = 2;
  p.rank = std::atoi(argv[2]);
  p.bind_address = argv[3];
  p.peer_address = argv[4];
  p.port = static_cast<uint16_t>(std::atoi(argv[5]));
  if (Status s = p.validate(); !s.is_ok()) {
    std::fprintf(stderr, "%s\n", s.to_string().c_str());
    return 2;
  }
  parallel::Handshake h;
  h.settings["bench"] = "tp_allreduce " + link;
  Result<std::unique_ptr<parallel::TpComm>> tcp = parallel::connect_tp_tcp(p, h);
  if (!tcp) {
    std::fprintf(stderr, "connect: %s\n", tcp.status().to_string().c_str());
    return 1;
  }
  std::unique_ptr<parallel::TpComm> nccl;
  if (link == "nccl") nccl = connect_tp_nccl(**tcp, std::chrono::milliseconds(60000));
  parallel::TpComm& comm = nccl ? *nccl : **tcp;

  const std::vector<int64_t> rows = {1, 2, 6, 16, 2048};
  cuda::DeviceTp tp(comm, rows.back() * kHidden, kVocabPerRank);
  cuda::CudaStream stream;
  cuda::DeviceBuffer data(static_cast<size_t>(rows.back() * kHidden) * 4);
  data.fill_bytes(0);
  auto time_us = [&](auto&& call) {
    for (int i = 0; i < 5; ++i) call();
    const auto t0 = Clock::now();
    for (int i = 0; i < repeats; ++i) call();
    return std::chrono::duration<double, std::micro>(Clock::now() - t0).count() / repeats;
  };
  const double gather_us = time_us(
      [&] { (void)tp.all_gather(data.as<float>(), kVocabPerRank, stream.get(), "bench gather"); });
  std::vector<double> reduce_us;
  for (int64_t r : rows)
    reduce_us.push_back(time_us([&] {
      tp.all_reduce_sum(data.as<float>(), r * kHidden, stream.get(), "bench all-reduce");
    }));
  if (p.rank == 0) {
    std::printf("link %s, %d calls each (device buffers, stream sync included)\n\n", link.c_str(),
                repeats);
    std::printf("| rows | all-reduce KB | µs/call | ms per step (%d all-reduces + gather) |\n",
                2 * kLayers);
    std::printf("|---|---|---|---|\n");
    for (size_t i = 0; i < rows.size(); ++i)
      std::printf("| %lld | %.0f | %.1f | %.2f |\n", static_cast<long long>(rows[i]),
                  rows[i] * kHidden * 4 / 1024.0, reduce_us[i],
                  (2 * kLayers * reduce_us[i] + gather_us) / 1e3);
    std::printf("\nlogits gather of one row (%lld floats per rank): %.1f µs\n",
                static_cast<long long>(kVocabPerRank), gather_us);
  }
  if (Status s = comm.barrier(); !s.is_ok()) {
    std::fprintf(stderr, "barrier: %s\n", s.to_string().c_str());
    return 1;
  }
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "dsv41_bench_tp_allreduce: %s\n", e.what());
  return 1;
}
