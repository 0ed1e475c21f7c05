// The CUDA forward of a tensor-parallel rank (docs/tp.md "CUDA backend"): two ranks of tiny8 in
// two threads on ONE GPU, each a CPU Transformer shard over TpTcp on loopback uploaded to its own
// CudaTransformer, whose collectives (DeviceTp) stage through pinned host memory. This checks
// the sharded device code (local heads/groups, expert range, shared-expert and vocabulary
// slices, the all-reduces and the logits gather) on the lent single H200; two GPUs and NCCL are
// issue 8.
//
// Expectations: both ranks hold bit-identical logits (the sum is formed in rank order on the
// host); against the world-1 CUDA forward the difference is fp32 summation order only (partial
// sums per rank), so the golden tiny8 bound (2e-3, tests/kernel/test_model_forward.cpp) with
// equal argmax on every row, and the same 32 greedy tokens.
#include <fmt/format.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <thread>

#include "backend/cuda/forward/cuda_transformer.hpp"
#include "backend/cuda/forward/device_linear.hpp"
#include "golden/model/golden_case.hpp"
#include "golden/speculative/dspark_fixture.hpp"
#include "kernel_check.hpp"
#include "model/attention/attention_layer.hpp"
#include "model/dspark/dspark_drafter.hpp"
#include "model/transformer.hpp"
#include "parallel/tp_tcp.hpp"
#include "support/fixtures.hpp"
#include "tp/tp_script.hpp"

namespace dsv41::test {
namespace {

constexpr double kTpVsWorld1Tol = 2e-3;
constexpr int kGreedySteps = 32;

struct Run {
  std::string name;
  std::vector<int32_t> ids;
  std::vector<int64_t> chunks;
};

struct RankOut {
  std::string error;
  std::string plan;
  std::vector<float> logits;  // every run's logits, concatenated
  std::vector<int32_t> greedy;
  uint64_t weight_bytes = 0;
};

// max_chunk 16: every step on the GEMV paths (<= 16 rows), prompts cut into device chunks;
// 64: the 37-token prompts in one step on the prefill GEMM paths (tile-64 expert descriptors).
constexpr int kChunks[2] = {16, 64};

cuda::CudaForwardOptions options(int max_chunk) {
  cuda::CudaForwardOptions o;
  o.max_chunk = max_chunk;
  o.max_context = 1024;
  return o;
}

RankOut run_model(const Transformer& cpu, const std::vector<Run>& runs,
                  const std::vector<int32_t>& greedy_prompt, int max_chunk) {
  RankOut r;
  std::unique_ptr<cuda::CudaTransformer> gpu =
      cuda::CudaTransformer::upload(cpu, options(max_chunk));
  r.weight_bytes = gpu->load_report().weight_bytes;
  r.plan = cpu.plan().describe();
  for (const Run& run : runs) {
    cuda::DeviceSequence seq = gpu->new_sequence();
    size_t at = 0;
    for (int64_t c : run.chunks) {
      const std::vector<float> l =
          gpu->forward(seq, std::span<const int32_t>(run.ids.data() + at, c));
      r.logits.insert(r.logits.end(), l.begin(), l.end());
      at += c;
    }
  }
  // Greedy decode with last-row logits only (the head all-gathers one row per step).
  const int64_t V = cpu.config().text.vocab_size;
  cuda::DeviceSequence seq = gpu->new_sequence();
  std::vector<float> l =
      gpu->forward(seq, greedy_prompt, {}, cuda::CudaTransformer::LogitRows::kLast);
  for (int i = 0; i < kGreedySteps; ++i) {
    const int32_t best = argmax(l.data(), V);
    r.greedy.push_back(best);
    const int32_t one[1] = {best};
    l = gpu->forward(seq, one, {}, cuda::CudaTransformer::LogitRows::kLast);
  }
  return r;
}

// One RankOut per kChunks entry; on failure the first carries the error.
std::vector<RankOut> run_rank(const std::string& dir, int rank, uint16_t port,
                              const std::vector<Run>& runs,
                              const std::vector<int32_t>& greedy_prompt) {
  std::vector<RankOut> out(2);
  try {
    Result<std::unique_ptr<parallel::TpComm>> comm =
        parallel::connect_tp_tcp(tp_test::loopback_params(rank, port), tp_test::test_handshake());
    if (!comm) {
      out[0].error = comm.status().to_string();
      return out;
    }
    std::unique_ptr<Transformer> m = Transformer::load(dir, 1, comm->get());
    for (int i = 0; i < 2; ++i) out[i] = run_model(*m, runs, greedy_prompt, kChunks[i]);
  } catch (const std::exception& e) {
    out[0].error = fmt::format("rank {}: {}", rank, e.what());
  }
  return out;
}

}  // namespace

TEST_CASE("cuda tp: tiny8 split over two ranks on one GPU gives the world-1 CUDA logits",
          "[kernel][tp][model]") {
  if (skip_without_gpu()) return;
  GoldenCase g("tiny8");
  const std::string dir = g.dir();
  std::vector<Run> runs;
  for (int p = 0; p < 3; ++p) {
    const std::string n = "prompt" + std::to_string(p);
    std::vector<int32_t> ids = g.i32(n + ".input_ids");
    const auto len = static_cast<int64_t>(ids.size());
    runs.push_back({n, std::move(ids), {len}});
  }
  const std::vector<int32_t> p1 = g.i32("prompt1.input_ids");
  runs.push_back({"chunked 7/13/17", p1, {7, 13, 17}});
  const std::vector<int32_t> dec = g.i32("decode.input_ids");
  std::vector<int64_t> steps{static_cast<int64_t>(p1.size())};
  steps.resize(1 + dec.size() - p1.size(), 1);
  runs.push_back({"prefill + decode steps", dec, steps});

  const Transformer& whole = g.model();
  const uint16_t port = tp_test::free_port();
  std::vector<RankOut> r1;
  std::thread t([&] { r1 = run_rank(dir, 1, port, runs, p1); });
  std::vector<RankOut> r0 = run_rank(dir, 0, port, runs, p1);
  t.join();
  INFO(r0[0].error << " | " << r1[0].error);
  REQUIRE(r0[0].error.empty());
  REQUIRE(r1[0].error.empty());
  const int64_t V = whole.config().text.vocab_size;
  for (int c = 0; c < 2; ++c) {
    const RankOut want = run_model(whole, runs, p1, kChunks[c]);
    const RankOut& a = r0[c];
    const RankOut& b = r1[c];
    std::printf(
        "cuda tp tiny8 max_chunk %d: %s | %s; weights %.1f + %.1f KiB vs %.1f KiB at "
        "world 1\n",
        kChunks[c], a.plan.c_str(), b.plan.c_str(), a.weight_bytes / 1024.0,
        b.weight_bytes / 1024.0, want.weight_bytes / 1024.0);
    INFO("max_chunk " << kChunks[c]);
    // Each rank holds its shard only (the replicated parts are smaller than the split ones).
    REQUIRE(a.weight_bytes < want.weight_bytes);
    REQUIRE(b.weight_bytes < want.weight_bytes);
    REQUIRE(a.logits.size() == want.logits.size());
    REQUIRE(b.logits.size() == want.logits.size());
    REQUIRE(std::memcmp(a.logits.data(), b.logits.data(), want.logits.size() * 4) == 0);
    size_t at = 0;
    for (const Run& run : runs) {
      double worst = 0;
      size_t where = 0;
      for (size_t i = 0; i < run.ids.size() * V; ++i) {
        const double d = std::fabs(double(a.logits[at + i]) - want.logits[at + i]);
        if (!(d <= worst)) {
          worst = d;
          where = i;
        }
      }
      std::printf("cuda tp tiny8 max_chunk %d %s: max |logits TP2 - TP1| %.3g at row %zu col %zu\n",
                  kChunks[c], run.name.c_str(), worst, where / V, where % V);
      INFO(run.name << ": max |TP2 - TP1| " << worst << " at row " << where / V << " col "
                    << where % V << ", tolerance " << kTpVsWorld1Tol);
      REQUIRE(worst <= kTpVsWorld1Tol);
      for (size_t row = 0; row < run.ids.size(); ++row) {
        INFO(run.name << ": argmax of row " << row);
        REQUIRE(argmax(a.logits.data() + at + row * V, V) ==
                argmax(want.logits.data() + at + row * V, V));
      }
      at += run.ids.size() * V;
    }
    REQUIRE(a.greedy == b.greedy);
    for (int i = 0; i < kGreedySteps; ++i) {
      INFO("greedy step " << i << ": TP2 " << a.greedy[i] << ", TP1 " << want.greedy[i]);
      REQUIRE(a.greedy[i] == want.greedy[i]);
    }
  }
}

TEST_CASE("cuda tp: DeviceLinear uploads on-grid and off-grid slices exactly", "[kernel][tp]") {
  if (skip_without_gpu()) return;
  std::unique_ptr<Transformer> m = Transformer::load(fixture("golden/tiny8"), 1);
  // wq_b of layer 0: FP8 [192, 64] with 6 x 2 block scales that differ (a wrong scale row or
  // column offset changes the product).
  const Linear& w = m->weights().layers.at(0).attn.wq_b();
  REQUIRE(w.format() == WeightFormat::kFp8Block);
  REQUIRE(w.out_features() == 192);
  REQUIRE(w.in_features() == 64);
  const int64_t sc = w.scale_row_bytes();
  {
    std::vector<uint8_t> sb(w.scale_bytes(), w.scale_bytes() + w.scale_rows() * sc);
    std::sort(sb.begin(), sb.end());
    INFO("distinct block scales of layers.0.attn.wq_b");
    REQUIRE(std::unique(sb.begin(), sb.end()) - sb.begin() >= 2);
  }
  std::mt19937_64 rng(fresh_seed());
  struct Case {
    const char* what;
    int64_t r0, r1, c0, c1;
    bool on_grid;
  };
  // On the 32x32 scale grid: the FP8 bytes and scales go up as they are (checked byte for byte
  // against the mapping). Off it (a split inside a block): the exact dequantisation.
  for (const Case& c : {Case{"on grid [64,192)x[32,64)", 64, 192, 32, 64, true},
                        Case{"off grid [8,40)x[16,48)", 8, 40, 16, 48, false}}) {
    INFO(c.what);
    const Linear v = w.slice(c.r0, c.r1, c.c0, c.c1, c.what);
    const cuda::DeviceLinear d = cuda::DeviceLinear::upload(v, c.what);
    const int64_t rows = 3, out = v.out_features(), in = v.in_features();
    REQUIRE((d.format() == WeightFormat::kFp8Block) == c.on_grid);
    if (c.on_grid) {
      std::vector<uint8_t> wb(static_cast<size_t>(out * in));
      const int64_t sr = (out + 31) / 32, sw = (in + 31) / 32;
      std::vector<uint8_t> sb(static_cast<size_t>(sr * sw));
      REQUIRE(cudaMemcpy(wb.data(), d.weight(), wb.size(), cudaMemcpyDeviceToHost) == cudaSuccess);
      REQUIRE(cudaMemcpy(sb.data(), d.scale(), sb.size(), cudaMemcpyDeviceToHost) == cudaSuccess);
      for (int64_t r = 0; r < out; ++r) {
        INFO("weight row " << r);
        REQUIRE(std::memcmp(wb.data() + r * in,
                            w.weight_bytes() + (c.r0 + r) * w.weight_row_bytes() + c.c0, in) == 0);
      }
      for (int64_t r = 0; r < sr; ++r)
        for (int64_t k = 0; k < sw; ++k) {
          INFO("scale block " << r << ", " << k);
          REQUIRE(sb[r * sw + k] == w.scale_bytes()[(c.r0 / 32 + r) * sc + c.c0 / 32 + k]);
        }
    }
    const std::vector<float> x = random_normal(static_cast<size_t>(rows * in), rng);
    std::vector<float> want(static_cast<size_t>(rows * out)), got(want.size());
    v.forward(x.data(), rows, want.data(), nullptr);
    cuda::DeviceBuffer dx(x.size() * 4), dy(got.size() * 4);
    dx.upload(x.data(), x.size() * 4);
    d.gemv(dx.as<float>(), rows, dy.as<float>(), nullptr);
    REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
    dy.download(got.data(), got.size() * 4);
    // Same exact products, another fp32 summation order: bound in · 2^-23 · Σ|w·x|.
    std::vector<double> tol(want.size());
    std::vector<float> row(static_cast<size_t>(in));
    for (int64_t o = 0; o < out; ++o) {
      v.dequantize_row(o, row.data());
      for (int64_t t = 0; t < rows; ++t) {
        double mag = 0;
        for (int64_t i = 0; i < in; ++i) mag += std::fabs(double(row[i]) * x[t * in + i]);
        tol[t * out + o] = 1e-30 + mag * in * 0x1p-23;
      }
    }
    require_match(c.what, got, want, tol, 1e-10);
  }
}

}  // namespace dsv41::test

namespace dsv41::test {
namespace {

// One rank's DSpark rounds on the tiny8 DSpark fixture: after prompt1, and after 5 verify rows
// of which 3 are rolled back.
struct DraftOut {
  std::string error;
  std::vector<DsparkProposal> rounds;
};

std::vector<DsparkProposal> draft_rounds(const Transformer& cpu,
                                         const std::vector<int32_t>& prompt) {
  auto gpu = cuda::CudaTransformer::upload(cpu, options(16));
  cuda::DeviceSequence seq = gpu->new_sequence(0, 5);
  (void)gpu->forward(seq, prompt, {}, cuda::CudaTransformer::LogitRows::kLast);
  std::vector<DsparkProposal> out;
  out.push_back(gpu->dspark_draft(seq, 17, true));
  std::vector<int32_t> verify{17};
  verify.insert(verify.end(), out[0].tokens.begin(), out[0].tokens.begin() + 4);
  (void)gpu->forward(seq, verify);
  gpu->rollback(seq, 3);
  out.push_back(gpu->dspark_draft(seq, 9, true));
  return out;
}

DraftOut draft_rank(const std::string& dir, int rank, uint16_t port,
                    const std::vector<int32_t>& prompt) {
  DraftOut out;
  try {
    Result<std::unique_ptr<parallel::TpComm>> comm =
        parallel::connect_tp_tcp(tp_test::loopback_params(rank, port), tp_test::test_handshake());
    if (!comm) {
      out.error = comm.status().to_string();
      return out;
    }
    std::unique_ptr<Transformer> m = Transformer::load(dir, 1, comm->get(), "", true);
    out.rounds = draft_rounds(*m, prompt);
  } catch (const std::exception& e) {
    out.error = fmt::format("rank {}: {}", rank, e.what());
  }
  return out;
}

}  // namespace

TEST_CASE("cuda tp: the tiny8 DSpark module split over two ranks drafts as at world 1",
          "[kernel][tp][model]") {
  if (skip_without_gpu()) return;
  const std::string dir = make_tiny8_dspark();
  const std::vector<int32_t> prompt = GoldenCase("tiny8").i32("prompt1.input_ids");
  const uint16_t port = tp_test::free_port();
  DraftOut r1;
  std::thread t([&] { r1 = draft_rank(dir, 1, port, prompt); });
  DraftOut r0 = draft_rank(dir, 0, port, prompt);
  t.join();
  INFO(r0.error << " | " << r1.error);
  REQUIRE(r0.error.empty());
  REQUIRE(r1.error.empty());
  std::unique_ptr<Transformer> whole = Transformer::load(dir, 1, nullptr, "", true);
  const std::vector<DsparkProposal> want = draft_rounds(*whole, prompt);
  REQUIRE(r0.rounds.size() == want.size());
  REQUIRE(r1.rounds.size() == want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    INFO("round " << i);
    const DsparkProposal& a = r0.rounds[i];
    const DsparkProposal& b = r1.rounds[i];
    // Both ranks hold the same sums (formed in rank order on the host): the same bits.
    REQUIRE(a.tokens == b.tokens);
    REQUIRE(a.base_logits == b.base_logits);
    REQUIRE(a.confidence == b.confidence);
    // Against world 1: partial sums per rank, fp32 order only (as the logits above).
    double worst = 0;
    for (size_t j = 0; j < a.base_logits.size(); ++j)
      worst = std::max(worst, std::fabs(double(a.base_logits[j]) - want[i].base_logits[j]));
    double cworst = 0;
    for (size_t j = 0; j < a.confidence.size(); ++j)
      cworst = std::max(cworst, std::fabs(double(a.confidence[j]) - want[i].confidence[j]));
    std::printf(
        "cuda tp tiny8 dspark round %zu: max |base logits TP2 - TP1| %.3g, confidence %.3g\n", i,
        worst, cworst);
    INFO("max |base logits TP2 - TP1| " << worst << ", confidence " << cworst);
    REQUIRE(worst <= kTpVsWorld1Tol);
    REQUIRE(cworst <= 1e-4);
    REQUIRE(a.tokens == want[i].tokens);
  }
}

}  // namespace dsv41::test
