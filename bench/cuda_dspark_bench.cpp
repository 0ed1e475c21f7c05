// dsv41_bench_cuda_dspark DIR [context=4096] [repeats=20]: DSpark (spec §6) on one GPU at the
// checkpoint's geometry (bench/synthetic --dspark for the released one): after a `context`-token
// prefill, the host-timed median of a draft round (CudaTransformer::dspark_draft: 3 stages on a
// 5-row block, head, 5 Markov steps, one sync), of a 1-row decode step and of a 6-row verify step
// (each forward + sync, then rolled back so every repeat runs at the same position), and the
// device time of the forward's DSpark context writes (main_proj + 3 stage rows) from a profiled
// 1- and 6-row step. docs/perf.md "DSpark on CUDA" has the results and the command lines.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <random>
#include <string>
#include <vector>

#include "backend/cuda/cuda_device.hpp"
#include "backend/cuda/forward/cuda_transformer.hpp"
#include "bench_main.hpp"
#include "model/dspark/dspark_drafter.hpp"
#include "model/transformer.hpp"

namespace {

using Clock = std::chrono::steady_clock;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

template <typename F>
double median_ms(int repeats, const F& f) {
  std::vector<double> ms;
  for (int r = 0; r < repeats; ++r) {
    const auto t0 = Clock::now();
    f();
    ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
  }
  return median(ms);
}

double segment(const std::vector<std::pair<std::string, double>>& segs, const std::string& name) {
  for (const auto& [n, ms] : segs)
    if (n == name) return ms;
  return 0.0;
}

int run(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: dsv41_bench_cuda_dspark DIR [context=4096] [repeats=20]\n");
    return 2;
  }
  const std::string dir = argv[1];
  const int64_t context = argc > 2 ? std::atoll(argv[2]) : 4096;
  const int repeats = argc > 3 ? std::atoi(argv[3]) : 20;
  if (context < 1 || repeats < 1) {
    std::fprintf(stderr, "dsv41_bench_cuda_dspark: context and repeats must be >= 1\n");
    return 2;
  }
  if (dsv41::cuda::device_count() == 0) {
    std::fprintf(stderr, "dsv41_bench_cuda_dspark: no CUDA device\n");
    return 1;
  }
  std::printf("device: %s\n", dsv41::cuda::describe(dsv41::cuda::device_info(0)).c_str());
  auto cpu = dsv41::Transformer::load(dir, 0, nullptr, "", /*dspark=*/true);
  const dsv41::TextConfig& t = cpu->config().text;
  dsv41::cuda::CudaForwardOptions opts;
  opts.max_chunk = 2048;
  opts.max_context = context + 64;
  auto gpu = dsv41::cuda::CudaTransformer::upload(*cpu, opts);
  std::printf(
      "model: %d layers + %d DSpark stages (%d experts top-%d, block %d), vocab %lld; "
      "weights %.2f GiB\n",
      t.num_hidden_layers, t.num_nextn_predict_layers, t.dspark_n_routed_experts,
      t.dspark_num_experts_per_tok, t.dspark_block_size, static_cast<long long>(t.vocab_size),
      gpu->load_report().weight_bytes / (1024.0 * 1024 * 1024));
  std::mt19937 rng(7);
  std::uniform_int_distribution<int32_t> any(0, static_cast<int32_t>(t.vocab_size - 1));
  std::vector<int32_t> prompt(static_cast<size_t>(context));
  for (auto& id : prompt) id = any(rng);
  dsv41::cuda::DeviceSequence seq = gpu->new_sequence(0, 8);
  const auto p0 = Clock::now();
  gpu->forward_last(seq, prompt);
  cudaStreamSynchronize(gpu->stream());
  std::printf("prefill %lld tokens: %.1f ms\n", static_cast<long long>(context),
              std::chrono::duration<double, std::milli>(Clock::now() - p0).count());
  const int32_t next = any(rng);
  dsv41::DsparkProposal last;
  const double draft = median_ms(repeats, [&] { last = gpu->dspark_draft(seq, next); });
  std::vector<int32_t> one{next}, six{next};
  six.insert(six.end(), last.tokens.begin(), last.tokens.end());
  const double step1 = median_ms(repeats, [&] {
    gpu->forward_last(seq, one);
    cudaStreamSynchronize(gpu->stream());
    gpu->rollback(seq, 1);
  });
  const double step6 = median_ms(repeats, [&] {
    (void)gpu->forward(seq, six);
    gpu->rollback(seq, static_cast<int64_t>(six.size()));
  });
  const double ctx1 = segment(gpu->profile(seq, one), "dspark context");
  gpu->rollback(seq, 1);
  const double ctx6 = segment(gpu->profile(seq, six), "dspark context");
  gpu->rollback(seq, static_cast<int64_t>(six.size()));
  std::printf("\n| at context %lld | ms (median of %d, host-timed) |\n| --- | --- |\n",
              static_cast<long long>(context), repeats);
  std::printf("| draft round (5-row block, 3 stages, head, 5 Markov steps) | %.3f |\n", draft);
  std::printf("| 1-row decode step (forward + sync) | %.3f |\n", step1);
  std::printf("| 6-row verify step (forward, all logits) | %.3f |\n", step6);
  std::printf("| of which DSpark context rows, 1 row (device, profiled step) | %.3f |\n", ctx1);
  std::printf("| of which DSpark context rows, 6 rows (device, profiled step) | %.3f |\n", ctx6);
  std::printf("\ndraft round parts (device ms, one profiled round):");
  for (const auto& [name, ms] : gpu->dspark_profile(seq, next))
    std::printf(" %s %.3f;", name.c_str(), ms);
  std::printf("\n");
  std::printf(
      "\nround = draft + 6-row verify = %.3f ms: %.1f tok/s at 3.5 accepted + 1 bonus, "
      "%.1f tok/s at 1.7 + 1 (plain decode %.1f tok/s)\n",
      draft + step6, 4.5 / (draft + step6) * 1e3, 2.7 / (draft + step6) * 1e3, 1e3 / step1);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return dsv41::bench::guarded_main("dsv41_bench_cuda_dspark", [&] { return run(argc, argv); });
}
