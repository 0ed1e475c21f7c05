// Prefill and decode through the public API (Model::load -> Session::append) on a chosen backend:
// the serving path's speed, host work included (per-step logits copy of one row, Engram hashing,
// launch overhead without CUDA graphs), to set beside dsv41_bench_cuda_forward's device-only
// figures. Results: docs/perf.md "Session path".
//
//   dsv41_bench_session DIR BACKEND [PROMPT_TOKENS [DECODE_STEPS [CHUNK]]] [--tp RANK BIND PEER
//   PORT] e.g. dsv41_bench_session /tmp/syn cuda 2048 64 2048
// --tp: one rank of a tensor-parallel pair (docs/tp.md "Rank processes"; issue 8's run, e.g. one
// process per GPU with CUDA_VISIBLE_DEVICES, DSV41_TP_NCCL for the NCCL data link): rank 0 times
// the same work and prints the table, rank 1 follows until rank 0 closes the link.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "dsv41/session.hpp"

using namespace dsv41;
using Clock = std::chrono::steady_clock;

namespace {
double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}
int fail(const Status& s, const char* what) {
  std::fprintf(stderr, "%s: %s\n", what, s.to_string().c_str());
  return 1;
}
}  // namespace

int main(int argc, char** argv) {
  ModelParams mp;
  // Trailing "--tp RANK BIND PEER PORT".
  if (argc >= 8 && std::string(argv[argc - 5]) == "--tp") {
    mp.tp.world = 2;
    mp.tp.rank = std::atoi(argv[argc - 4]);
    mp.tp.bind_address = argv[argc - 3];
    mp.tp.peer_address = argv[argc - 2];
    mp.tp.port = static_cast<uint16_t>(std::atoi(argv[argc - 1]));
    argc -= 5;
  }
  if (argc < 3 || argc > 6) {
    std::fprintf(stderr,
                 "usage: %s DIR cpu|cuda [PROMPT_TOKENS [DECODE_STEPS [CHUNK]]] "
                 "[--tp RANK BIND PEER PORT]\n",
                 argv[0]);
    return 2;
  }
  const int64_t prompt = argc > 3 ? std::atoll(argv[3]) : 2048;
  const int64_t steps = argc > 4 ? std::atoll(argv[4]) : 64;
  const int64_t chunk = argc > 5 ? std::atoll(argv[5]) : 2048;
  if (prompt < 1 || steps < 1 || chunk < 0) {
    std::fprintf(stderr, "PROMPT_TOKENS and DECODE_STEPS must be >= 1, CHUNK >= 0\n");
    return 2;
  }
  mp.model_dir = argv[1];
  mp.backend = argv[2];
  const auto t_load = Clock::now();
  auto model = Model::load(mp);
  if (!model) return fail(model.status(), "load");
  if (mp.tp.world == 2 && mp.tp.rank == 1) {
    std::printf("load: %.1f s; rank 1 follows\n", ms_since(t_load) / 1e3);
    const Status s = model->run_tp_follower();  // ends when rank 0 closes the link
    std::printf("rank 1: %s\n", s.to_string().c_str());
    return 0;
  }
  std::printf("load: %.1f s, backend %s, max context %lld\n", ms_since(t_load) / 1e3,
              model->info().backend.c_str(),
              static_cast<long long>(model->info().max_position_embeddings));
  SessionParams sp;
  sp.chunk_tokens = chunk;
  auto session = Session::create(*model, sp);
  if (!session) return fail(session.status(), "session");
  const int64_t V = model->info().vocab_size;
  std::vector<int32_t> ids(static_cast<size_t>(prompt));
  for (int64_t i = 0; i < prompt; ++i) ids[i] = static_cast<int32_t>((i * 7919 + 13) % V);
  const auto t_prefill = Clock::now();
  auto logits = session->append(ids);
  if (!logits) return fail(logits.status(), "prefill");
  const double prefill_ms = ms_since(t_prefill);
  // Greedy decode from the prefill's logits: argmax on the host, one token per append.
  auto argmax = [](const std::vector<float>& l) {
    size_t best = 0;
    for (size_t i = 1; i < l.size(); ++i)
      if (l[i] > l[best]) best = i;
    return static_cast<int32_t>(best);
  };
  int32_t next = argmax(*logits);
  const auto t_decode = Clock::now();
  for (int64_t s = 0; s < steps; ++s) {
    auto l = session->append(std::span<const int32_t>(&next, 1));
    if (!l) return fail(l.status(), "decode");
    next = argmax(*l);
  }
  const double decode_ms = ms_since(t_decode);
  // Speculative verification shape: 6 rows appended, 5 rolled back, repeated.
  std::vector<int32_t> draft(6, next);
  const auto t_verify = Clock::now();
  for (int64_t s = 0; s < steps; ++s) {
    auto l = session->append(draft, true);
    if (!l) return fail(l.status(), "verify");
    if (Status st = session->rollback(5); !st.is_ok()) return fail(st, "rollback");
  }
  const double verify_ms = ms_since(t_verify);
  std::printf(
      "| backend | world | prompt | prefill ms | prefill tok/s | decode ms/token | tok/s | "
      "6-row verify + rollback 5 ms |\n|---|---|---|---|---|---|---|---|\n");
  std::printf("| %s | %d | %lld | %.1f | %.0f | %.2f | %.1f | %.2f |\n",
              model->info().backend.c_str(), mp.tp.world, static_cast<long long>(prompt),
              prefill_ms, prompt / (prefill_ms / 1e3), decode_ms / steps, steps / (decode_ms / 1e3),
              verify_ms / steps);
  return 0;
}
