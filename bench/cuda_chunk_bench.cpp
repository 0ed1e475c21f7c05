// Prefill chunks of many sizes on one GPU through cuda::CudaTransformer: the steps a chat or a
// coding agent runs when it appends a tool result or a user turn of tens to hundreds of tokens to a
// cached context (dsv41_bench_cuda_forward times one 2048-token chunk). Between 17 and a few
// hundred rows every projection's GEMM grid is small (docs/perf.md "Stop 36"), so this is where
// CudaForwardOptions::gemm_min_rows, moe_gemm_min_rows and gemm_split_k are chosen.
//
// One sequence per chunk size is prefilled to `context` (untimed), then `repeats` chunks of that
// size are timed one after another (enqueue + sync; logits of every row stay on the device), the
// median printed with tokens/s and ms per token, then one chunk is profiled by segment.
// Usage: dsv41_bench_cuda_chunks DIR [chunks=16,32,64,128,256,512] [context=4096] [repeats=3]
//                                [gemm=ROWS] [moegemm=ROWS] [moetile=ROWS] [exl3gemm=ROWS]
//                                [splitk=0]
//                                [x=fp32|bf16x2|bf16]
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "backend/cuda/cuda_check.hpp"
#include "backend/cuda/cuda_device.hpp"
#include "backend/cuda/event_timer.hpp"
#include "backend/cuda/forward/cuda_transformer.hpp"
#include "bench_inputs.hpp"
#include "bench_main.hpp"
#include "model/transformer.hpp"

namespace {

using dsv41::bench::parse_list;
using dsv41::bench::random_ids;
using dsv41::cuda::CudaTransformer;
using dsv41::cuda::DeviceSequence;

int usage() {
  std::fprintf(stderr,
               "usage: dsv41_bench_cuda_chunks DIR [chunks=16,32,64,128,256,512] [context=4096] "
               "[repeats=3] [gemm=ROWS] [moegemm=ROWS] [moetile=ROWS] [exl3gemm=ROWS] [splitk=0] "
               "[x=fp32|bf16x2|bf16]\n"
               "  gemm=ROWS: layer projections take the GEMM from ROWS rows "
               "(CudaForwardOptions::gemm_min_rows, 17..4097)\n"
               "  moegemm=ROWS: routed experts likewise (moe_gemm_min_rows, 17..4097)\n"
               "  moetile=ROWS: rows per routed descriptor below that (moe_gemv_tile_rows, 1..16)\n"
               "  exl3gemm=ROWS: moegemm for layers with EXL3 experts (moe_exl3_gemm_min_rows)\n"
               "  splitk=0: no split-K for small GEMM grids (gemm_split_k off)\n");
  return 2;
}

int run(int argc, char** argv) {
  if (argc < 2) return usage();
  const std::string dir = argv[1];
  const std::vector<int64_t> chunks = parse_list(argc > 2 ? argv[2] : "16,32,64,128,256,512");
  const int64_t context = argc > 3 ? std::atoll(argv[3]) : 4096;
  const int repeats = argc > 4 ? std::atoi(argv[4]) : 3;
  dsv41::cuda::CudaForwardOptions opts;
  for (int i = 5; i < argc; ++i) {
    const std::string a = argv[i];
    if (a.rfind("gemm=", 0) == 0) {
      opts.gemm_min_rows = std::atoi(a.c_str() + 5);
    } else if (a.rfind("moegemm=", 0) == 0) {
      opts.moe_gemm_min_rows = std::atoi(a.c_str() + 8);
    } else if (a.rfind("exl3gemm=", 0) == 0) {
      opts.moe_exl3_gemm_min_rows = std::atoi(a.c_str() + 9);
    } else if (a.rfind("moetile=", 0) == 0) {
      opts.moe_gemv_tile_rows = std::atoi(a.c_str() + 8);
    } else if (a == "splitk=0") {
      opts.gemm_split_k = false;
    } else if (a == "x=fp32" || a == "x=bf16x2" || a == "x=bf16") {
      opts.prefill_x = a == "x=fp32"     ? dsv41::kernels::GemmX::kFp32
                       : a == "x=bf16x2" ? dsv41::kernels::GemmX::kBf16x2
                                         : dsv41::kernels::GemmX::kBf16;
    } else {
      std::fprintf(stderr, "dsv41_bench_cuda_chunks: unknown argument \"%s\"\n", a.c_str());
      return usage();
    }
  }
  if (chunks.empty() || context < 0 || repeats < 1 ||
      *std::min_element(chunks.begin(), chunks.end()) < 1) {
    std::fprintf(stderr, "dsv41_bench_cuda_chunks: chunks >= 1, context >= 0, repeats >= 1\n");
    return usage();
  }
  if (dsv41::cuda::device_count() == 0) {
    std::fprintf(stderr, "dsv41_bench_cuda_chunks: no CUDA device\n");
    return 1;
  }
  std::printf("device: %s\n", dsv41::cuda::describe(dsv41::cuda::device_info(0)).c_str());
  std::unique_ptr<dsv41::Transformer> cpu = dsv41::Transformer::load(dir, 0);
  const int64_t vocab = cpu->config().text.vocab_size;
  const int64_t longest = *std::max_element(chunks.begin(), chunks.end());
  opts.max_chunk = static_cast<int>(std::max<int64_t>(longest, 512));
  opts.max_context = context + (repeats + 2) * longest + 16;
  std::unique_ptr<CudaTransformer> gpu = CudaTransformer::upload(*cpu, opts);
  std::printf(
      "options: gemm_min_rows %d, moe_gemm_min_rows %d, moe_gemv_tile_rows %d, gemm_split_k %d, "
      "prefill_x %d parts; context %lld, workspace %.2f GiB\n\n",
      opts.gemm_min_rows, opts.moe_gemm_min_rows, opts.moe_gemv_tile_rows,
      opts.gemm_split_k ? 1 : 0, static_cast<int>(opts.prefill_x), static_cast<long long>(context),
      gpu->load_report().workspace_bytes / (1024.0 * 1024 * 1024));
  std::printf("| chunk | ms (median of %d) | tokens/s | ms per token |\n", repeats);
  std::printf("| --- | --- | --- | --- |\n");
  std::mt19937 rng(99);
  std::vector<std::string> profiles;
  for (int64_t c : chunks) {
    DeviceSequence seq = gpu->new_sequence();
    for (int64_t done = 0; done < context;) {  // untimed, in max_chunk pieces
      const int64_t n = std::min<int64_t>(opts.max_chunk, context - done);
      gpu->enqueue(seq, random_ids(rng, n, vocab));
      DSV41_CUDA_CHECK(cudaStreamSynchronize(gpu->stream()));  // the staging is reused
      done += n;
    }
    gpu->enqueue(seq, random_ids(rng, c, vocab));  // warm: the first chunk of this shape
    DSV41_CUDA_CHECK(cudaStreamSynchronize(gpu->stream()));
    std::vector<double> ms;
    for (int i = 0; i < repeats; ++i) {
      dsv41::cuda::EventTimer timer;
      timer.start(gpu->stream());
      gpu->enqueue(seq, random_ids(rng, c, vocab));
      timer.stop(gpu->stream());
      ms.push_back(timer.elapsed_ms());
      DSV41_CUDA_CHECK(cudaStreamSynchronize(gpu->stream()));
    }
    std::sort(ms.begin(), ms.end());
    const double med = ms[ms.size() / 2];
    std::printf("| %lld | %.2f | %.0f | %.3f |\n", static_cast<long long>(c), med,
                c / (med / 1000.0), med / c);
    std::fflush(stdout);
    std::string line = "profile chunk " + std::to_string(c) + ":";
    for (const auto& [name, t] : gpu->profile(seq, random_ids(rng, c, vocab)))
      line += " " + name + " " + std::to_string(t).substr(0, 7) + ";";
    profiles.push_back(line);
  }
  std::printf("\n");
  for (const std::string& l : profiles) std::printf("%s\n", l.c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return dsv41::bench::guarded_main("dsv41_bench_cuda_chunks", [&] { return run(argc, argv); });
}
