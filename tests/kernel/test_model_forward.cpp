// The whole tiny golden models on the CUDA backend (backend/cuda/forward/) vs the CPU reference
// forward (model/transformer.hpp) and the oracle (tests/fixtures/golden/tiny8/README.md):
// logits of one-shot prefill, chunked prefill and decode steps, and a 32-token greedy
// continuation that must be identical token for token.
//
// Tolerances (tests/fixtures/golden/tiny40/README.md, "GPU fp32 vs CPU"). The CUDA path differs
// from the CPU path in fp32 summation order only (GEMVs: per-lane partials and a warp tree; the
// router gate in fp32 instead of fp64), the same kind of difference as the oracle's own GPU fp32
// run vs its CPU run, which the README measures as 1.0e-3 on tiny8 (argmax equal) and 2.12 on
// tiny40 (argmax differs: a ~1e-7 difference crosses an FP8/FP4 rounding boundary and a later
// top-k choice flips). Measured here on the H200: 3.8e-6 on tiny8 prompts 0/1 and 1.03e-3 on
// prompt2 row 34 (the oracle's spread), 2.12 on tiny40 prompt1. So tiny8 uses the README's abs
// 2e-3 with argmax equal on every row against both the CPU and the oracle, plus 32 identical
// greedy tokens; tiny40 uses the README's abs 1e-4 on the 5-token prompt0 (no knife edge
// reached) and, on the longer prompts, only the oracle's own GPU-vs-CPU bound.
#include <fmt/format.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "backend/cuda/cuda_check.hpp"
#include "backend/cuda/forward/cuda_transformer.hpp"
#include "core/check.hpp"
#include "golden/exl3/tiny_exl3_model.hpp"
#include "kernel_check.hpp"
#include "loader/safetensors.hpp"
#include "logits_check.hpp"
#include "model/transformer.hpp"
#include "support/fixtures.hpp"

namespace dsv41::test {
namespace {

constexpr double kCudaVsCpuTol = 2e-3;
constexpr double kTiny40StableTol = 1e-4;
constexpr double kTiny40OracleGpuSpread = 2.2;  // README: 2.12
constexpr double kOracleTol = 2e-3;
constexpr int kGreedySteps = 32;

struct Golden {
  std::unique_ptr<SafetensorsFile> file;
  std::vector<float> f32(const std::string& name) const {
    const TensorInfo* info = file->find_info(name);
    if (info == nullptr) throw std::runtime_error("golden tensor missing: " + name);
    return tensor_to_f32(file->view(*info));
  }
  std::vector<int32_t> i32(const std::string& name) const {
    const std::vector<float> v = f32(name);
    return std::vector<int32_t>(v.begin(), v.end());
  }
};

std::vector<float> run_cpu(const Transformer& m, const std::vector<int32_t>& ids,
                           const std::vector<int64_t>& chunks) {
  SequenceState st = m.new_sequence();
  std::vector<float> out;
  size_t at = 0;
  for (int64_t c : chunks) {
    const std::vector<float> l = m.forward(st, std::span<const int32_t>(ids.data() + at, c));
    out.insert(out.end(), l.begin(), l.end());
    at += c;
  }
  return out;
}

std::vector<float> run_cuda(const cuda::CudaTransformer& m, const std::vector<int32_t>& ids,
                            const std::vector<int64_t>& chunks) {
  cuda::DeviceSequence seq = m.new_sequence();
  std::vector<float> out;
  size_t at = 0;
  for (int64_t c : chunks) {
    const std::vector<float> l = m.forward(seq, std::span<const int32_t>(ids.data() + at, c));
    out.insert(out.end(), l.begin(), l.end());
    at += c;
  }
  REQUIRE(seq.pos() == static_cast<int64_t>(ids.size()));
  return out;
}

// Greedy continuation of `prompt` for kGreedySteps tokens.
std::vector<int32_t> greedy(const std::vector<float>& first_logits, int64_t V,
                            const std::function<std::vector<float>(int32_t)>& step) {
  std::vector<int32_t> out;
  std::vector<float> logits = first_logits;
  for (int i = 0; i < kGreedySteps; ++i) {
    const int32_t next = argmax_row(logits.data() + logits.size() - V, V);
    out.push_back(next);
    logits = step(next);
  }
  return out;
}

// kGreedySteps greedy tokens after `prompt`, decoded one at a time on both backends from fresh
// sequences; the prefill logits must agree within kCudaVsCpuTol. Returns {cuda, cpu} tokens.
std::pair<std::vector<int32_t>, std::vector<int32_t>> greedy_both(
    const Transformer& cpu, const cuda::CudaTransformer& gpu, const std::vector<int32_t>& prompt,
    int64_t V, const std::string& what) {
  SequenceState st = cpu.new_sequence();
  cuda::DeviceSequence seq = gpu.new_sequence();
  const std::vector<float> cpu0 = cpu.forward(st, prompt);
  const std::vector<float> gpu0 = gpu.forward(seq, prompt);
  require_logits(what + " greedy prefill cuda vs cpu", gpu0, cpu0, V, kCudaVsCpuTol);
  std::vector<int32_t> want = greedy(cpu0, V, [&](int32_t t) {
    const int32_t one[1] = {t};
    return cpu.forward(st, one);
  });
  std::vector<int32_t> got = greedy(gpu0, V, [&](int32_t t) {
    const int32_t one[1] = {t};
    return gpu.forward(seq, one);
  });
  return {std::move(got), std::move(want)};
}

// tiny8's prompts 0-2 in one call each and prompt 1 in 7 + 13 + 17 tokens, against the CPU
// forward and the oracle; `label` prefixes the failure messages (the options under test).
void check_tiny8_prompts(const Transformer& cpu, const cuda::CudaTransformer& gpu, const Golden& g,
                         int64_t V, const std::string& label) {
  for (int p = 0; p < 3; ++p) {
    const std::string n = label + "prompt" + std::to_string(p);
    const std::vector<int32_t> ids = g.i32("prompt" + std::to_string(p) + ".input_ids");
    const std::vector<int64_t> one{static_cast<int64_t>(ids.size())};
    const std::vector<float> got = run_cuda(gpu, ids, one);
    require_logits(n + " cuda vs cpu", got, run_cpu(cpu, ids, one), V, kCudaVsCpuTol);
    require_logits(n + " cuda vs oracle", got, g.f32("prompt" + std::to_string(p) + ".logits"), V,
                   kOracleTol);
  }
  const std::vector<int32_t> prompt1 = g.i32("prompt1.input_ids");
  require_logits(label + "chunked 7+13+17 cuda vs oracle", run_cuda(gpu, prompt1, {7, 13, 17}),
                 g.f32("chunked.plan1.logits"), V, kOracleTol);
}

}  // namespace

TEST_CASE("cuda forward: tiny8 logits and greedy continuation match the CPU and the oracle",
          "[kernel][model]") {
  if (skip_without_gpu()) return;
  const std::string dir = fixture("golden/tiny8");
  Golden g{SafetensorsFile::open(dir + "/golden.safetensors")};
  std::unique_ptr<Transformer> cpu = Transformer::load(dir, 0);
  const int64_t V = cpu->config().text.vocab_size;
  // max_chunk 16 < the 37-token prompt: one-shot prefill is cut into device chunks too.
  cuda::CudaForwardOptions opts;
  opts.max_chunk = 16;
  opts.max_context = 1024;
  std::unique_ptr<cuda::CudaTransformer> gpu = cuda::CudaTransformer::upload(*cpu, opts);
  const cuda::CudaLoadReport& rep = gpu->load_report();
  std::printf(
      "tiny8 upload: weights %.2f MiB, workspace %.2f MiB, device used %.1f MiB, host "
      "peak RSS %.1f MiB, %.3f s\n",
      rep.weight_bytes / 1048576.0, rep.workspace_bytes / 1048576.0,
      rep.device_used_bytes / 1048576.0, rep.host_peak_rss_bytes / 1048576.0, rep.seconds);
  REQUIRE(rep.weight_bytes > 0);
  // tiny8's Engram tables: 990 + 1172 rows of 32 E4M3 codes + 1 E8M0 scale.
  REQUIRE(rep.engram_table_bytes == (990u + 1172u) * 33u);
  REQUIRE(rep.engram_table_bytes < rep.weight_bytes);

  check_tiny8_prompts(*cpu, *gpu, g, V, "");
  const std::vector<int32_t> prompt1 = g.i32("prompt1.input_ids");
  const std::vector<int32_t> dec = g.i32("decode.input_ids");
  std::vector<int64_t> steps{37};
  steps.resize(13, 1);
  const std::vector<float> stepped = run_cuda(*gpu, dec, steps);
  require_logits("decode steps cuda vs oracle",
                 std::vector<float>(stepped.begin() + 37 * V, stepped.end()),
                 g.f32("decode.step_logits"), V, kOracleTol);

  // 32 greedy tokens, decode one at a time on both backends.
  const auto [got, want] = greedy_both(*cpu, *gpu, prompt1, V, "tiny8");
  const std::vector<int32_t> oracle = g.i32("greedy.tokens");
  for (int i = 0; i < kGreedySteps; ++i) {
    INFO("greedy step " << i << ": cuda " << got[i] << ", cpu " << want[i]);
    REQUIRE(got[i] == want[i]);
  }
  for (size_t i = 0; i < oracle.size(); ++i) {
    INFO("greedy step " << i << " vs the oracle");
    REQUIRE(got[i] == oracle[i]);
  }
}

// CudaForwardOptions::gemm_min_rows / moe_gemm_min_rows at 4097: steps of 17+ rows run every
// projection and the routed experts on the GEMVs 16 rows at a time (the grouped wo_a in pieces,
// routed descriptors of 16-row tiles) instead of the GEMMs.
TEST_CASE("cuda forward: prompts on the GEMVs in 16-row pieces match the oracle",
          "[kernel][model]") {
  if (skip_without_gpu()) return;
  const std::string dir = fixture("golden/tiny8");
  Golden g{SafetensorsFile::open(dir + "/golden.safetensors")};
  std::unique_ptr<Transformer> cpu = Transformer::load(dir, 0);
  const int64_t V = cpu->config().text.vocab_size;
  cuda::CudaForwardOptions opts;
  opts.max_chunk = 64;
  opts.max_context = 1024;
  opts.gemm_min_rows = 4097;
  opts.moe_gemm_min_rows = 4097;
  // Routed descriptors of 16, 8, 4, 2 and 1 rows at the 37-token step (moe_gemv_tile_rows): the
  // 16-row GEMV instances, 2-8-row tiles on the decode tensor-core GEMV, 1-row tiles on the
  // CUDA-core GEMV with the gather folded in.
  for (int tile : {16, 8, 4, 2, 1}) {
    opts.moe_gemv_tile_rows = tile;
    std::unique_ptr<cuda::CudaTransformer> gpu = cuda::CudaTransformer::upload(*cpu, opts);
    check_tiny8_prompts(*cpu, *gpu, g, V, fmt::format("GEMV pieces, {}-row expert tiles, ", tile));
  }
}

// CudaForwardOptions::moe_verify_tile_rows: the 7-, 13- and 16-row steps (16-token device chunks)
// with each expert's rows in 2-row descriptors (the decode tensor-core GEMV's 2-row form) and in
// 1-row ones (the CUDA-core GEMV with the gather folded in), against the CPU and the oracle.
TEST_CASE("cuda forward: verify-size steps in 2- and 1-row expert tiles match the oracle",
          "[kernel][model]") {
  if (skip_without_gpu()) return;
  const std::string dir = fixture("golden/tiny8");
  Golden g{SafetensorsFile::open(dir + "/golden.safetensors")};
  std::unique_ptr<Transformer> cpu = Transformer::load(dir, 0);
  const int64_t V = cpu->config().text.vocab_size;
  cuda::CudaForwardOptions opts;
  opts.max_chunk = 16;
  opts.max_context = 1024;
  for (int tile : {2, 1}) {
    opts.moe_verify_tile_rows = tile;
    std::unique_ptr<cuda::CudaTransformer> gpu = cuda::CudaTransformer::upload(*cpu, opts);
    check_tiny8_prompts(*cpu, *gpu, g, V, fmt::format("{}-row verify tiles, ", tile));
  }
}

TEST_CASE("cuda forward: tiny40 logits vs the CPU backend", "[kernel][model]") {
  if (skip_without_gpu()) return;
  const std::string dir = fixture("golden/tiny40");
  Golden g{SafetensorsFile::open(dir + "/golden.safetensors")};
  std::unique_ptr<Transformer> cpu = Transformer::load(dir, 0);
  const int64_t V = cpu->config().text.vocab_size;
  cuda::CudaForwardOptions opts;
  opts.max_context = 1024;
  std::unique_ptr<cuda::CudaTransformer> gpu = cuda::CudaTransformer::upload(*cpu, opts);
  const std::vector<int32_t> p0 = g.i32("prompt0.input_ids");
  const std::vector<int64_t> one0{static_cast<int64_t>(p0.size())};
  require_logits("tiny40 prompt0 cuda vs cpu", run_cuda(*gpu, p0, one0), run_cpu(*cpu, p0, one0), V,
                 kTiny40StableTol);
  for (const char* name : {"prompt1", "prompt2"}) {
    const std::vector<int32_t> ids = g.i32(std::string(name) + ".input_ids");
    const std::vector<int64_t> one{static_cast<int64_t>(ids.size())};
    const std::vector<float> got = run_cuda(*gpu, ids, one), want = run_cpu(*cpu, ids, one);
    double worst = 0;
    int64_t first_row = -1;
    for (size_t i = 0; i < got.size(); ++i) {
      REQUIRE(std::isfinite(got[i]));
      const double d = std::fabs(static_cast<double>(got[i]) - want[i]);
      worst = std::max(worst, d);
      if (d > kTiny40StableTol && first_row < 0) first_row = static_cast<int64_t>(i) / V;
    }
    std::printf("tiny40 %s cuda vs cpu: max |diff| %.3g, first row beyond 1e-4: %lld of %zu\n",
                name, worst, static_cast<long long>(first_row), ids.size());
    INFO("tiny40 " << name << ": max |diff| " << worst << " exceeds the oracle's own GPU-vs-CPU "
                   << "spread " << kTiny40OracleGpuSpread);
    REQUIRE(worst <= kTiny40OracleGpuSpread);
  }
}

// CudaForwardOptions::side_streams runs each mHC site's mixes (hc_site_mixes) and each shared
// expert on side streams: the same kernels on the same inputs, so the logits must be the same bits
// as with everything on one stream, for an 80-token prefill (the tiled mixes at T >= 64; the
// shared expert's GEMMs beside the routed ones), decode steps, and a decode step captured into a
// CUDA graph (the forks and joins become graph edges).
TEST_CASE("cuda forward: side streams change no bits", "[kernel][model]") {
  if (skip_without_gpu()) return;
  std::unique_ptr<Transformer> cpu = Transformer::load(fixture("golden/tiny8"), 0);
  const int64_t V = cpu->config().text.vocab_size;
  cuda::CudaForwardOptions opts;
  opts.max_chunk = 96;
  opts.max_context = 1024;
  opts.side_streams = false;
  std::unique_ptr<cuda::CudaTransformer> single = cuda::CudaTransformer::upload(*cpu, opts);
  opts.side_streams = true;
  std::unique_ptr<cuda::CudaTransformer> sides = cuda::CudaTransformer::upload(*cpu, opts);
  std::vector<int32_t> ids(90);
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>((i * 37 + 11) % V);
  const auto same = [&](const std::string& what, const std::vector<float>& got,
                        const std::vector<float>& want) {
    REQUIRE(got.size() == want.size());
    size_t bad = 0, first = 0;
    for (size_t i = 0; i < got.size(); ++i)
      if (std::memcmp(&got[i], &want[i], 4) != 0 && bad++ == 0) first = i;
    INFO(what << ": " << bad << " of " << got.size() << " logits differ; first at row " << first / V
              << " col " << first % V << ": " << (bad ? got[first] : 0.f) << " vs "
              << (bad ? want[first] : 0.f));
    CHECK(bad == 0);
  };
  // An 80-token prefill, 4 decode steps and a 6-row verify step (tensor-core GEMVs: the shared
  // expert's x split in its own scratch while the routed experts use theirs).
  const std::vector<int64_t> plan{80, 1, 1, 1, 1, 6};
  same("80 + 4 x 1 + 6 tokens, side streams vs one stream", run_cuda(*sides, ids, plan),
       run_cuda(*single, ids, plan));

  // A decode step after the prefill, the side-stream one captured into a graph and replayed.
  cuda::DeviceSequence a = sides->new_sequence(), b = single->new_sequence();
  const std::span<const int32_t> prompt(ids.data(), 80), next(ids.data() + 80, 1);
  (void)sides->forward(a, prompt);
  (void)single->forward(b, prompt);
  const std::vector<float> want = single->forward(b, next);
  cudaStream_t s = sides->stream();
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  DSV41_CUDA_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  sides->enqueue(a, next);
  DSV41_CUDA_CHECK(cudaStreamEndCapture(s, &graph));
  DSV41_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
  DSV41_CUDA_CHECK(cudaGraphLaunch(exec, s));
  DSV41_CUDA_CHECK(cudaStreamSynchronize(s));
  std::vector<float> got(static_cast<size_t>(V));
  DSV41_CUDA_CHECK(
      cudaMemcpy(got.data(), sides->device_logits(), got.size() * 4, cudaMemcpyDeviceToHost));
  DSV41_CUDA_CHECK(cudaGraphExecDestroy(exec));
  DSV41_CUDA_CHECK(cudaGraphDestroy(graph));
  same("a captured decode step, side streams vs one stream", got, want);
}

TEST_CASE("cuda forward: bad inputs are rejected naming what is wrong", "[kernel][model]") {
  if (skip_without_gpu()) return;
  std::unique_ptr<Transformer> cpu = Transformer::load(fixture("golden/tiny8"), 0);
  // upload refuses what CudaForwardOptions::validate refuses (every option:
  // test_cuda_forward_options.cpp), before any device work.
  const std::vector<std::pair<std::function<void(cuda::CudaForwardOptions&)>, const char*>> bad{
      {[](auto& o) { o.max_chunk = 0; }, "CudaForwardOptions.max_chunk = 0"},
      {[](auto& o) { o.moe_gemm_min_rows = 4098; },
       "CudaForwardOptions.moe_gemm_min_rows = 4098 is outside [17, 4097]"},
  };
  for (const auto& [set, message] : bad) {
    cuda::CudaForwardOptions o;
    set(o);
    REQUIRE_THROWS_WITH(cuda::CudaTransformer::upload(*cpu, o), Catch::Contains(message));
  }
  cuda::CudaForwardOptions opts;
  opts.max_chunk = 4;
  opts.max_context = 8;
  std::unique_ptr<cuda::CudaTransformer> gpu = cuda::CudaTransformer::upload(*cpu, opts);
  cuda::DeviceSequence seq = gpu->new_sequence();
  const std::vector<int32_t> out_of_vocab{5, 600};
  REQUIRE_THROWS_WITH(gpu->forward(seq, out_of_vocab),
                      Catch::Contains("token id 600 at position 1"));
  const std::vector<int32_t> two{5, 6};
  const std::vector<uint8_t> three_flags{0, 0, 0};
  REQUIRE_THROWS_WITH(gpu->forward(seq, two, three_flags), Catch::Contains("3 image flags"));
  REQUIRE(seq.pos() == 0);  // rejected before anything ran
  const std::vector<int32_t> nine(9, 5);
  REQUIRE_THROWS_WITH(gpu->forward(seq, nine), Catch::Contains("max_context 8"));
  REQUIRE(gpu->forward(seq, two).size() == 2 * 600u);  // the state is still usable
  REQUIRE(seq.pos() == 2);
}

// The tiny Spark-layout model (tests/golden/exl3/tiny_exl3_model.hpp): tiny8 with the routed
// experts of layers 0, 2, 5, 7 from EXL3 banks at K 2..5 (mixed within layers, with keep_native
// and "native" FP4 experts beside them), hidden 96 / inter 64 padded to 128 in the banks. The CUDA
// MoE runs them through moe_grouped_exl3_gemv; the CPU through exl3::matmul. Same tolerance and
// greedy rule as tiny8 (the EXL3 product differs from the CPU's in fp32 summation order only).
TEST_CASE("cuda forward: the tiny EXL3 (Spark layout) model matches the CPU backend",
          "[kernel][model][exl3]") {
  if (skip_without_gpu()) return;
  const TinyExl3Model tiny;
  std::unique_ptr<Transformer> cpu = Transformer::load(tiny.exl3_dir, 0);
  REQUIRE(cpu->expert_bank() != nullptr);
  const int64_t V = cpu->config().text.vocab_size;
  // max_chunk 32: the 37-token prompt runs as 32 + 5; the 32-row step's routed experts take the
  // grouped GEMMs with both thresholds at 17 (FP4 and EXL3 of the EXL3 layers, FP4 of the others)
  // and the grouped GEMVs with the defaults (layers with EXL3 experts: 16-row tiles below
  // moe_exl3_gemm_min_rows 97; FP4-only layers: 8-row tiles below moe_gemm_min_rows 1409).
  Golden g{SafetensorsFile::open(fixture("golden/tiny8") + "/golden.safetensors")};
  const std::vector<int32_t> prompt1 = g.i32("prompt1.input_ids");
  cuda::CudaForwardOptions opts;
  opts.max_chunk = 32;
  opts.max_context = 1024;
  for (const bool gemm : {true, false}) {
    cuda::CudaForwardOptions o = opts;
    if (gemm) o.moe_gemm_min_rows = o.moe_exl3_gemm_min_rows = 17;
    std::unique_ptr<cuda::CudaTransformer> gpu = cuda::CudaTransformer::upload(*cpu, o);
    REQUIRE(gpu->load_report().exl3_experts == static_cast<int>(tiny.bank_k.size()));
    for (const std::vector<int64_t>& plan :
         {std::vector<int64_t>{37}, std::vector<int64_t>{7, 13, 17}, std::vector<int64_t>(37, 1)}) {
      const std::string what = fmt::format(
          "tiny exl3 prompt1 in {} calls, moe_gemm_min_rows {}, moe_exl3_gemm_min_rows {}, cuda "
          "vs cpu",
          plan.size(), o.moe_gemm_min_rows, o.moe_exl3_gemm_min_rows);
      require_logits(what, run_cuda(*gpu, prompt1, plan), run_cpu(*cpu, prompt1, plan), V,
                     kCudaVsCpuTol);
    }
  }
  std::unique_ptr<cuda::CudaTransformer> gpu = cuda::CudaTransformer::upload(*cpu, opts);
  const auto [got, want] = greedy_both(*cpu, *gpu, prompt1, V, "tiny exl3");
  for (int i = 0; i < kGreedySteps; ++i) {
    INFO("tiny exl3 greedy step " << i << ": cuda " << got[i] << ", cpu " << want[i]);
    REQUIRE(got[i] == want[i]);
  }
}

TEST_CASE("cuda forward: EXL3 experts the kernels do not run are rejected at upload",
          "[kernel][model][exl3]") {
  if (skip_without_gpu()) return;
  const TinyExl3Model tiny;
  // Layer 3 (absent from the plan) from a K6 bank: valid for the CPU reference (K 1..8), not for
  // moe_grouped_exl3_gemv (K 2..5).
  TensorSet set;
  for (int e = 0; e < TinyExl3Model::kExperts; ++e) add_expert(set, 3, e, 128, 128, 6, 900 + e);
  set.write(tiny.exl3_dir + "/exl3/qa/K6/L03.part.safetensors");
  std::string plan = kTinyPlan;
  plan.replace(plan.find(R"("7": "K5")"), 9, R"("7": "K5", "3": "K6")");
  write_text(std::filesystem::path(tiny.exl3_dir) / "exl3/plan/plan.json", plan);
  std::unique_ptr<Transformer> cpu = Transformer::load(tiny.exl3_dir, 0);
  REQUIRE(cpu->expert_bank()->find(3, 0) != nullptr);
  try {
    (void)cuda::CudaTransformer::upload(*cpu, {});
    FAIL("a K6 bank expert was uploaded");
  } catch (const detail::Failure& f) {
    CHECK(f.code() == ErrorCode::kUnsupported);
    CHECK_THAT(std::string(f.what()),
               Catch::Contains("layers.3.ffn.experts.0.w1") && Catch::Contains("K = 6"));
  }
}

}  // namespace dsv41::test
