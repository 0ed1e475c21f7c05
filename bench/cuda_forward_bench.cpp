// Decode and prefill of the whole model on one GPU through cuda::CudaTransformer
// (backend/cuda/forward/), at the geometry of the checkpoint in DIR (e.g. the synthetic
// full-geometry checkpoint of bench/synthetic/, docs/perf.md "CUDA forward").
//
// For every context c: a fresh sequence is prefilled to c with random tokens (untimed), one
// prefill chunk of `chunk` tokens at c is timed (enqueue + sync, logits stay on the device), then
// decode steps of R rows (a verify batch) are timed at context ≈ c + chunk:
//   host-driven  wall time of forward() (launches, input staging, logits copy to the host)
//   graph        one step captured into a CUDA graph and replayed (device time of the same
//                kernels without launch overhead; the replays rewrite the same positions, so the
//                sequence is discarded afterwards)
// Bytes per step = every non-routed weight except the embedding table + the distinct routed
// experts of the step (R = 1: top-k per layer; R > 1: the expected distinct count k' = E·(1 -
// (1 - k/E)^R) under uniform routing, which random weights give) — KV reads (< 0.1 % at 32k) are
// left out. Floor = bytes / the card's datasheet bandwidth (bench/device_peak.hpp).
// Usage: dsv41_bench_cuda_forward DIR [contexts=0,8192,32768] [rows=1,2,6,16] [repeats=20]
//                                 [chunk=2048] [capture=ROWS] [x=fp32|bf16x2|bf16] [gemv=cuda-core]
//                                 [pdl=0] [streams=1] [fp4tc=ROWS] [fp4dec=ROWS]
//                                 [fp4decmin=ROWS] [bf16gemm=ROWS] [splitk=0] [moetile=ROWS]
#include <cuda_profiler_api.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "backend/cuda/cuda_check.hpp"
#include "backend/cuda/cuda_device.hpp"
#include "backend/cuda/cuda_stream.hpp"
#include "backend/cuda/event_timer.hpp"
#include "backend/cuda/forward/cuda_transformer.hpp"
#include "backend/cuda/forward/device_engram.hpp"
#include "backend/cuda/forward/forward_workspace.hpp"
#include "bench_inputs.hpp"
#include "bench_main.hpp"
#include "device_peak.hpp"
#include "dsv41k/launchers.hpp"
#include "model/transformer.hpp"

namespace {

using dsv41::bench::parse_list;
using dsv41::bench::random_ids;
using dsv41::cuda::CudaTransformer;
using dsv41::cuda::DeviceSequence;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Prefill seq by `n` tokens in chunks of at most max_chunk (logits left on the device).
void prefill(const CudaTransformer& m, DeviceSequence& seq, std::mt19937& rng, int64_t n,
             int64_t vocab) {
  const int64_t C = m.options().max_chunk;
  for (int64_t done = 0; done < n;) {
    const int64_t c = std::min(C, n - done);
    m.enqueue(seq, random_ids(rng, c, vocab));
    DSV41_CUDA_CHECK(cudaStreamSynchronize(m.stream()));
    done += c;
  }
}

// Device time of one R-row step from a CUDA graph replay (median of `repeats`, ms).
double graph_step_ms(const CudaTransformer& m, DeviceSequence& seq, std::mt19937& rng, int64_t R,
                     int64_t vocab, int repeats) {
  cudaStream_t s = m.stream();
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  DSV41_CUDA_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  m.enqueue(seq, random_ids(rng, R, vocab));
  DSV41_CUDA_CHECK(cudaStreamEndCapture(s, &graph));
  DSV41_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
  dsv41::cuda::EventTimer timer;
  std::vector<double> ms;
  for (int i = 0; i < repeats + 2; ++i) {
    timer.start(s);
    DSV41_CUDA_CHECK(cudaGraphLaunch(exec, s));
    timer.stop(s);
    const double t = timer.elapsed_ms();
    if (i >= 2) ms.push_back(t);
  }
  DSV41_CUDA_CHECK(cudaGraphExecDestroy(exec));
  DSV41_CUDA_CHECK(cudaGraphDestroy(graph));
  return median(ms);
}

// The Engram block at the released dimensions (spec §5: hc 4 x 5120, 8 heads x (4-1) n-grams x
// 256 = 6144 inputs, wkv 6144 -> 25600 FP8) on R rows, with the table cut to 2^20 rows (the
// released 384M rows x 256 B would not fit beside the model; a row gather reads R·24 rows either
// way). A synthetic checkpoint has no Engram layers unless written with --engram, so this times
// the block alone (device time of a graph replay, ms).
double engram_block_ms(const dsv41::ModelConfig& base, int64_t R, int repeats) {
  dsv41::engram::EngramDims d;
  d.hidden = base.text.hidden_size;
  d.hc = base.text.hc_mult;
  d.head_dim = 256;
  d.n_cols = 3 * 8;
  d.table_rows = 1 << 20;
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> code(0, 0x7E), sc(120, 124);
  auto bytes = [&](size_t n, bool scale) {
    std::vector<uint8_t> v(n);
    for (auto& b : v) b = static_cast<uint8_t>(scale ? sc(rng) : code(rng));
    return v;
  };
  const int64_t out = (d.hc + 1) * d.hidden, in = d.n_cols * d.head_dim;
  const std::vector<uint8_t> table = bytes(d.table_rows * d.head_dim, false);
  const std::vector<uint8_t> table_scale = bytes(d.table_rows * d.head_dim / 32, true);
  const std::vector<uint8_t> wkv = bytes(out * in, false);
  const std::vector<uint8_t> wkv_scale = bytes(((out + 31) / 32) * ((in + 31) / 32), true);
  dsv41::engram::EngramWeights w;
  w.dims = d;
  w.embed = table.data();
  w.embed_scale = table_scale.data();
  w.wkv = wkv.data();
  w.wkv_scale = wkv_scale.data();
  w.qk.assign(d.hc * d.hidden, 0.01f);
  const dsv41::cuda::DeviceEngram block = dsv41::cuda::DeviceEngram::upload(w, 1);
  dsv41::ModelConfig cfg = base;
  cfg.text.engram_layer_ids = {1};
  cfg.text.engram_max_ngram_size = 4;
  cfg.text.engram_n_heads = 8;
  cfg.text.engram_head_dim = 256;
  dsv41::cuda::ForwardWorkspace ws(cfg, static_cast<int>(R), 16);
  std::vector<int64_t> ids(R * d.n_cols);
  std::uniform_int_distribution<int64_t> row(0, d.table_rows - 1);
  for (auto& x : ids) x = row(rng);
  ws.hash_ids.upload(ids.data(), ids.size() * 8);
  DSV41_CUDA_CHECK(cudaMemset(ws.H.data(), 0, ws.H.bytes()));
  dsv41::cuda::CudaStream stream;
  cudaStream_t s = stream.get();
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  DSV41_CUDA_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  block.forward(ws.H.as<float>(), R, ws.hash_ids.as<int64_t>(), nullptr, 1e-20f, ws, s);
  DSV41_CUDA_CHECK(cudaStreamEndCapture(s, &graph));
  DSV41_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
  dsv41::cuda::EventTimer timer;
  std::vector<double> ms;
  for (int i = 0; i < repeats + 2; ++i) {
    timer.start(s);
    DSV41_CUDA_CHECK(cudaGraphLaunch(exec, s));
    timer.stop(s);
    if (i >= 2) ms.push_back(timer.elapsed_ms());
  }
  DSV41_CUDA_CHECK(cudaGraphExecDestroy(exec));
  DSV41_CUDA_CHECK(cudaGraphDestroy(graph));
  return median(ms);
}

int run(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(
        stderr,
        "usage: dsv41_bench_cuda_forward DIR [contexts=0,8192,32768] [rows=1,2,6,16] "
        "[repeats=20] [chunk=2048] [capture=ROWS] [x=fp32|bf16x2|bf16] [gemv=cuda-core] [pdl=0]\n"
        "  [streams=1] [fp4tc=ROWS]\n"
        "  capture=ROWS: after the tables, one host-driven step of ROWS rows between\n"
        "  cudaProfilerStart/Stop (ncu --profile-from-start off: per-kernel times)\n"
        "  x=MODE: prefill GEMM input (CudaForwardOptions::prefill_x; default fp32)\n"
        "  gemv=cuda-core: GEMVs of <= 16 rows (FP8, routed FP4) on the CUDA cores, not "
        "mma.sync\n"
        "  pdl=0: plain stream order instead of programmatic dependent launch\n"
        "  streams=1: everything on the step's stream (CudaForwardOptions::side_streams off: no\n"
        "  mHC mixes beside the sublayer, no shared expert beside the routed experts)\n"
        "  fp4tc=ROWS: steps of ROWS..16 rows take the routed FP4 experts' tensor-core GEMV\n"
        "  (CudaForwardOptions::fp4_tc_min_rows, 1..17, default 5)\n"
        "  fp4dec=ROWS, fp4decmin=ROWS: steps of fp4decmin..fp4dec rows take the routed FP4\n"
        "  experts' decode tensor-core GEMV where its staged x fits\n"
        "  (CudaForwardOptions::fp4_tc_decode_max_rows 0..8, default 8, 0: never;\n"
        "  fp4_tc_decode_min_rows 1..8, default 2)\n"
        "  bf16gemm=ROWS: steps of ROWS+ rows run the BF16 head on the tensor-core GEMM\n"
        "  (CudaForwardOptions::head_gemm_min_rows, 2..17, default 5; 17: never)\n"
        "  splitk=0: no split-K for small GEMM grids (CudaForwardOptions::gemm_split_k)\n"
        "  moetile=ROWS: routed GEMV descriptors of at most ROWS rows in steps of more\n"
        "  (CudaForwardOptions::moe_gemv_tile_rows, 1..16)\n"
        "  verifytile=ROWS: routed descriptors of at most ROWS rows in steps of 2..16 rows\n"
        "  (CudaForwardOptions::moe_verify_tile_rows, 1..16, default 16)\n");
    return 2;
  }
  const std::string dir = argv[1];
  const std::vector<int64_t> contexts = parse_list(argc > 2 ? argv[2] : "0,8192,32768");
  const std::vector<int64_t> rows = parse_list(argc > 3 ? argv[3] : "1,2,6,16");
  const int repeats = argc > 4 ? std::atoi(argv[4]) : 20;
  const int64_t chunk = argc > 5 ? std::atoll(argv[5]) : 2048;
  int64_t capture_rows = 0;
  dsv41::kernels::GemmX prefill_x = dsv41::kernels::GemmX::kFp32;
  bool gemv_tc = true;
  bool side_streams = true;
  int fp4_tc_min_rows = 5;
  int fp4_tc_decode_max_rows = 8, fp4_tc_decode_min_rows = 2;
  int head_gemm_min_rows = dsv41::cuda::CudaForwardOptions{}.head_gemm_min_rows;
  bool gemm_split_k = dsv41::cuda::CudaForwardOptions{}.gemm_split_k;
  int moe_gemv_tile_rows = dsv41::cuda::CudaForwardOptions{}.moe_gemv_tile_rows;
  int moe_verify_tile_rows = dsv41::cuda::CudaForwardOptions{}.moe_verify_tile_rows;
  for (int i = 6; i < argc; ++i) {
    const std::string a = argv[i];
    if (a.rfind("capture=", 0) == 0) {
      capture_rows = std::atoll(a.c_str() + 8);
    } else if (a == "pdl=0") {
      dsv41::kernels::set_programmatic_launch(false);
    } else if (a == "gemv=cuda-core") {
      gemv_tc = false;
    } else if (a.rfind("fp4tc=", 0) == 0) {
      fp4_tc_min_rows = std::atoi(a.c_str() + 6);
    } else if (a.rfind("fp4dec=", 0) == 0) {
      fp4_tc_decode_max_rows = std::atoi(a.c_str() + 7);
    } else if (a.rfind("fp4decmin=", 0) == 0) {
      fp4_tc_decode_min_rows = std::atoi(a.c_str() + 10);
    } else if (a.rfind("bf16gemm=", 0) == 0) {
      head_gemm_min_rows = std::atoi(a.c_str() + 9);
    } else if (a == "splitk=0") {
      gemm_split_k = false;
    } else if (a.rfind("moetile=", 0) == 0) {
      moe_gemv_tile_rows = std::atoi(a.c_str() + 8);
    } else if (a.rfind("verifytile=", 0) == 0) {
      moe_verify_tile_rows = std::atoi(a.c_str() + 11);
    } else if (a == "streams=1") {
      side_streams = false;
    } else if (a == "x=fp32" || a == "x=bf16x2" || a == "x=bf16") {
      prefill_x = a == "x=fp32"     ? dsv41::kernels::GemmX::kFp32
                  : a == "x=bf16x2" ? dsv41::kernels::GemmX::kBf16x2
                                    : dsv41::kernels::GemmX::kBf16;
    } else {
      std::fprintf(stderr, "dsv41_bench_cuda_forward: unknown argument \"%s\"\n", a.c_str());
      return 2;
    }
  }
  if (dsv41::cuda::device_count() == 0) {
    std::fprintf(stderr, "dsv41_bench_cuda_forward: no CUDA device\n");
    return 1;
  }
  const auto info = dsv41::cuda::device_info(0);
  const dsv41::bench::DevicePeak peak = dsv41::bench::device_peak(info);
  std::printf("device: %s; peak %s\n", dsv41::cuda::describe(info).c_str(),
              dsv41::bench::describe(peak).c_str());
  const auto t0 = std::chrono::steady_clock::now();
  std::unique_ptr<dsv41::Transformer> cpu = dsv41::Transformer::load(dir, 0);
  const double cpu_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const dsv41::TextConfig& t = cpu->config().text;
  int64_t max_rows = 1;
  for (int64_t r : rows) max_rows = std::max(max_rows, r);
  dsv41::cuda::CudaForwardOptions opts;
  opts.max_chunk = static_cast<int>(std::max({chunk, max_rows, capture_rows}));
  opts.prefill_x = prefill_x;
  opts.gemv_tc = gemv_tc;
  opts.side_streams = side_streams;
  opts.fp4_tc_min_rows = fp4_tc_min_rows;
  opts.fp4_tc_decode_max_rows = fp4_tc_decode_max_rows;
  opts.fp4_tc_decode_min_rows = fp4_tc_decode_min_rows;
  opts.head_gemm_min_rows = head_gemm_min_rows;
  opts.gemm_split_k = gemm_split_k;
  opts.moe_gemv_tile_rows = moe_gemv_tile_rows;
  opts.moe_verify_tile_rows = moe_verify_tile_rows;
  opts.max_context =  // the first context also runs a profiled prefill chunk; capture 2 steps
      *std::max_element(contexts.begin(), contexts.end()) + 2 * chunk +
      (repeats + 4) * max_rows * 2 + 2 * capture_rows;
  std::unique_ptr<CudaTransformer> gpu = CudaTransformer::upload(*cpu, opts);
  const dsv41::cuda::CudaLoadReport& rep = gpu->load_report();
  const double GiB = 1024.0 * 1024 * 1024;
  std::printf(
      "model: %d layers, hidden %lld, %d heads x %d, %d experts (top-%d), vocab %lld\n"
      "load: CPU bind %.1f s, upload %.1f s; weights %.2f GiB (routed %.2f GiB, one expert %.1f "
      "MiB, Engram tables %.2f GiB), workspace %.2f GiB, device used %.2f GiB, host peak RSS "
      "%.2f GiB\n",
      t.num_hidden_layers, static_cast<long long>(t.hidden_size), t.num_attention_heads, t.head_dim,
      t.n_routed_experts, t.num_experts_per_tok, static_cast<long long>(t.vocab_size), cpu_s,
      rep.seconds, rep.weight_bytes / GiB, rep.routed_bytes / GiB, rep.expert_bytes / 1048576.0,
      rep.engram_table_bytes / GiB, rep.workspace_bytes / GiB, rep.device_used_bytes / GiB,
      rep.host_peak_rss_bytes / GiB);
  std::printf("prefill GEMM input: %s\n", prefill_x == dsv41::kernels::GemmX::kFp32     ? "fp32"
                                          : prefill_x == dsv41::kernels::GemmX::kBf16x2 ? "bf16x2"
                                                                                        : "bf16");
  const double embed_bytes = static_cast<double>(t.vocab_size) * t.hidden_size * 2;
  // Streamed per step: everything but the embedding, the routed experts not chosen and the
  // Engram tables (a step gathers rows · n_cols rows of each, added per row count below).
  const double dense =
      static_cast<double>(rep.weight_bytes - rep.routed_bytes - rep.engram_table_bytes) -
      embed_bytes;
  const double engram_row_bytes = static_cast<double>(t.engram_layer_ids.size()) *
                                  (t.engram_max_ngram_size - 1) * t.engram_n_heads *
                                  (t.engram_head_dim + t.engram_head_dim / 32.0);
  const double E = t.n_routed_experts, k = t.num_experts_per_tok, L = t.num_hidden_layers;
  // Active parameters per token for the prefill FLOP count: dense weights count 1 parameter per
  // byte (FP8) except BF16 head (2 bytes); routed experts 3 · hidden · inter each, whatever
  // their format (FP4 or EXL3 K 2..5).
  const double head_bytes = static_cast<double>(t.vocab_size) * t.hidden_size * 2;
  const double expert_params = 3.0 * static_cast<double>(t.hidden_size) * t.moe_intermediate_size;
  const double params_per_token = (dense - head_bytes) + head_bytes / 2 + k * L * expert_params;
  std::printf(
      "routed experts: %d of %lld (layer, expert) pairs from EXL3 banks, mean %.2f bits "
      "per weight stored\n",
      rep.exl3_experts, static_cast<long long>(L * E),
      8.0 * static_cast<double>(rep.expert_bytes) / expert_params);
  // Experts a step of R rows reads: distinct ids of R uniform top-k draws; over a synthetic
  // expert pool of P (synthetic_expert_pool), the distinct pool slots those ids fall in.
  const double P = t.synthetic_expert_pool;
  const auto distinct_experts = [&](int64_t R) {
    const double ids = R == 1 ? k : E * (1.0 - std::pow(1.0 - k / E, static_cast<double>(R)));
    return P > 0 ? P * (1.0 - std::pow(1.0 - 1.0 / P, ids)) : ids;
  };
  std::mt19937 rng(1234);
  std::printf(
      "\n| context | rows | host-driven ms/step | graph ms/step | graph us/layer "
      "| bytes/step GB | floor ms | graph %% of floor | host %% of floor |\n");
  std::printf("| --- | --- | --- | --- | --- | --- | --- | --- | --- |\n");
  std::vector<std::string> prefill_lines;
  // Contexts ascending: one sequence grows through them (prefill to c, one timed chunk, decode
  // steps of every row count); graph replays at the end of each context rewrite the same positions,
  // so a fresh sequence is prefilled for the next context.
  for (int64_t c : contexts) {
    DeviceSequence seq = gpu->new_sequence();
    prefill(*gpu, seq, rng, c, t.vocab_size);
    {
      dsv41::cuda::EventTimer timer;
      timer.start(gpu->stream());
      gpu->enqueue(seq, random_ids(rng, chunk, t.vocab_size));
      timer.stop(gpu->stream());
      const double ms = timer.elapsed_ms();
      const double tps = chunk / (ms / 1000.0);
      const double tflops = 2.0 * params_per_token * tps / 1e12;
      char pct[32] = "n/a";
      if (peak.bf16_tflops > 0)
        std::snprintf(pct, sizeof pct, "%.2f %%", 100.0 * tflops / peak.bf16_tflops);
      char line[256];
      std::snprintf(line, sizeof line, "| %lld | %lld | %.1f | %.0f | %.1f | %s |",
                    static_cast<long long>(c), static_cast<long long>(chunk), ms, tps, tflops, pct);
      prefill_lines.push_back(line);
    }
    if (c == contexts.front()) {  // where a prefill chunk's device time goes (once: it is slow)
      const auto segs = gpu->profile(seq, random_ids(rng, chunk, t.vocab_size));
      std::string line = "profile prefill chunk " + std::to_string(chunk) + " at context " +
                         std::to_string(seq.pos() - chunk) + ":";
      for (const auto& [name, ms] : segs) line += " " + name + " " + std::to_string(ms) + " ms;";
      prefill_lines.push_back(line);
    }
    std::vector<double> host(rows.size());
    for (size_t ri = 0; ri < rows.size(); ++ri) {
      std::vector<double> host_ms;
      for (int i = 0; i < repeats + 2; ++i) {
        const std::vector<int32_t> ids = random_ids(rng, rows[ri], t.vocab_size);
        const auto a = std::chrono::steady_clock::now();
        const std::vector<float> logits = gpu->forward(seq, ids);
        const double ms =
            std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - a).count();
        if (i >= 2) host_ms.push_back(ms);
      }
      host[ri] = median(host_ms);
    }
    for (size_t ri = 0; ri < rows.size(); ++ri) {
      const int64_t R = rows[ri];
      const double graph_ms = graph_step_ms(*gpu, seq, rng, R, t.vocab_size, repeats);
      const double distinct = distinct_experts(R);
      const double bytes =
          dense + distinct * L * rep.expert_bytes + static_cast<double>(R) * engram_row_bytes;
      const double floor_ms = bytes / (peak.gbs * 1e9) * 1e3;
      std::printf("| %lld | %lld | %.3f | %.3f | %.1f | %.2f | %.3f | %.0f %% | %.0f %% |\n",
                  static_cast<long long>(seq.pos()), static_cast<long long>(R), host[ri], graph_ms,
                  graph_ms * 1000.0 / L, bytes / 1e9, floor_ms, 100.0 * floor_ms / graph_ms,
                  100.0 * floor_ms / host[ri]);
      std::fflush(stdout);
    }
    if (capture_rows > 0 && c == contexts.back()) {  // one step for a kernel profiler
      const std::vector<int32_t> ids = random_ids(rng, capture_rows, t.vocab_size);
      gpu->forward(seq, ids);  // warm: the captured step is not the first of its shape
      DSV41_CUDA_CHECK(cudaProfilerStart());
      gpu->forward(seq, random_ids(rng, capture_rows, t.vocab_size));
      DSV41_CUDA_CHECK(cudaProfilerStop());
      std::printf("captured one %lld-row step at context %lld\n",
                  static_cast<long long>(capture_rows), static_cast<long long>(seq.pos()));
    }
    for (int64_t R : rows) {  // where one step's device time goes (after the graph replays)
      const auto segs = gpu->profile(seq, random_ids(rng, R, t.vocab_size));
      std::printf("profile context %lld rows %lld:", static_cast<long long>(seq.pos()),
                  static_cast<long long>(R));
      double routed_ms = 0;
      for (const auto& [name, ms] : segs) {
        std::printf(" %s %.3f ms;", name.c_str(), ms);
        if (name == "moe routed experts") routed_ms += ms;
      }
      // The routed experts' read rate: distinct experts of the step x layers x the mean expert.
      const double distinct = distinct_experts(R);
      std::printf("\n  routed experts %.2f GB in %.3f ms = %.0f GB/s (%.1f %% of %.1f TB/s)\n",
                  distinct * L * rep.expert_bytes / 1e9, routed_ms,
                  distinct * L * rep.expert_bytes / (routed_ms * 1e6),
                  100.0 * distinct * L * rep.expert_bytes / (routed_ms * 1e6) / peak.gbs,
                  peak.gbs / 1000.0);
    }
  }
  std::printf("\nEngram block at released dims (x2 per step: layers 1 and 14), graph replay:\n\n");
  std::printf("| rows | ms/block | wkv bytes MB | %% of floor |\n| --- | --- | --- | --- |\n");
  for (int64_t R : rows) {
    const double ms = engram_block_ms(cpu->config(), R, repeats);
    const double b = 25600.0 * 6144 * (1 + 1.0 / 1024) + R * 24 * 264.0;
    std::printf("| %lld | %.3f | %.1f | %.0f %% |\n", static_cast<long long>(R), ms, b / 1e6,
                100.0 * (b / (peak.gbs * 1e9) * 1e3) / ms);
  }
  std::printf("\nprefill (one chunk, logits of every row computed on the device):\n\n");
  std::printf(
      "| context | chunk | ms | tokens/s | TFLOP/s (2·active params) | %% of bf16 peak |\n");
  std::printf("| --- | --- | --- | --- | --- | --- |\n");
  for (const std::string& l : prefill_lines) std::printf("%s\n", l.c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return dsv41::bench::guarded_main("dsv41_bench_cuda_forward", [&] { return run(argc, argv); });
}
