// [kernel] Programmatic dependent launch (kernels/common/launch.cuh): a chain of dependent kernels
// on one stream, each step reading a buffer the previous kernel rewrote, gives the CPU
// reference's values and the same bits with the switch on and off, launched directly and from a
// captured CUDA graph (the decode path). A kernel that read its input before pdl_wait() would see
// the previous step's xn (the buffer is reused) and miss the reference by O(1).
#include <catch2/catch.hpp>
#include <cstring>

#include "kernel/gemv_case.hpp"
#include "model/rms_norm.hpp"

namespace dsv41::test {
namespace {

constexpr int kSteps = 24;
constexpr int64_t kN = 4096;  // square weight: y of step i is x of step i + 1
constexpr int kRows = 2;

struct Chain {
  std::vector<uint8_t> w, s;
  std::vector<float> x0;
};

// x_{i+1} = W · rms_norm(x_i), all steps queued on `stream` (or captured into a graph and
// replayed), xn reused by every step; returns x_1 .. x_kSteps.
std::vector<std::vector<float>> run_chain(const Chain& c, bool pdl, bool graph) {
  // The switch is process-wide: back to the default however this returns.
  struct Restore {
    ~Restore() { kernels::set_programmatic_launch(true); }
  } restore;
  kernels::set_programmatic_launch(pdl);
  cuda::CudaStream stream;
  cuda::DeviceBuffer dw(c.w.size()), ds(c.s.size()), dxn(c.x0.size() * 4);
  dw.upload(std::span<const uint8_t>(c.w));
  ds.upload(std::span<const uint8_t>(c.s));
  std::vector<cuda::DeviceBuffer> xs;
  for (int i = 0; i <= kSteps; ++i) {
    xs.emplace_back(c.x0.size() * 4);
    xs.back().fill_bytes(0xFF);
  }
  xs[0].upload(std::span<const float>(c.x0));
  const auto queue = [&] {
    for (int i = 0; i < kSteps; ++i) {
      DSV41_CUDA_CHECK(kernels::rms_norm(xs[i].as<float>(), nullptr, dxn.as<float>(), kRows, kN,
                                         1e-20f, stream.get()));
      DSV41_CUDA_CHECK(kernels::fp8_block_gemv(dxn.as<float>(), dw.as<uint8_t>(), ds.as<uint8_t>(),
                                               xs[i + 1].as<float>(), kRows, kN, kN, stream.get()));
    }
  };
  if (graph) {
    cudaGraph_t g = nullptr;
    cudaGraphExec_t exec = nullptr;
    DSV41_CUDA_CHECK(cudaStreamBeginCapture(stream.get(), cudaStreamCaptureModeThreadLocal));
    queue();
    DSV41_CUDA_CHECK(cudaStreamEndCapture(stream.get(), &g));
    DSV41_CUDA_CHECK(cudaGraphInstantiate(&exec, g, 0));
    DSV41_CUDA_CHECK(cudaGraphLaunch(exec, stream.get()));
    stream.synchronize();
    DSV41_CUDA_CHECK(cudaGraphExecDestroy(exec));
    DSV41_CUDA_CHECK(cudaGraphDestroy(g));
  } else {
    queue();
    stream.synchronize();
  }
  std::vector<std::vector<float>> out;
  for (int i = 1; i <= kSteps; ++i) {
    out.emplace_back(c.x0.size());
    xs[i].download(std::span<float>(out.back()));
  }
  return out;
}

TEST_CASE("dependent launch keeps stream order and changes no bits", "[kernel][launch]") {
  if (skip_without_gpu()) return;
  REQUIRE(kernels::programmatic_launch());  // the default
  const uint64_t seed = fresh_seed();
  std::mt19937_64 rng(seed);
  Chain c;
  c.w = random_e4m3(static_cast<size_t>(kN * kN), rng);
  c.s = random_e8m0(static_cast<size_t>((kN / 32) * (kN / 32)), rng);
  c.x0 = random_normal(static_cast<size_t>(kRows * kN), rng);

  const std::vector<std::vector<float>> plain = run_chain(c, false, false);
  // Each step against the reference applied to the GPU's previous step (no error growth).
  std::vector<float> x = c.x0, xn(x.size());
  for (int i = 0; i < kSteps; ++i) {
    rms_norm(x.data(), nullptr, kRows, kN, 1e-20f, xn.data());
    const GemvReference ref = gemv_reference(false, c.w, c.s, xn, kRows, kN, kN);
    std::vector<double> tol(ref.abs_dot.size());
    for (size_t j = 0; j < tol.size(); ++j) tol[j] = kGemvTolPerAbsDot * ref.abs_dot[j] + 1e-30;
    require_match(fmt::format("chain step {} of {}, plain launch, seed {:#x}", i + 1, kSteps, seed),
                  plain[i], ref.y, tol, kGemvMaxNmse);
    x = plain[i];
  }
  for (const bool graph : {false, true}) {
    const std::vector<std::vector<float>> dep = run_chain(c, true, graph);
    for (int i = 0; i < kSteps; ++i) {
      INFO("step " << i + 1 << " of " << kSteps << (graph ? ", graph" : ", stream") << ", seed "
                   << seed);
      REQUIRE(std::memcmp(dep[i].data(), plain[i].data(), plain[i].size() * 4) == 0);
    }
  }
}

}  // namespace
}  // namespace dsv41::test
