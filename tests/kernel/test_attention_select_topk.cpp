// [kernel] select_topk vs the CPU reference dsv41::select_topk (indexer.hpp, spec §2.4): ids must
// be exact, ties included (scores drawn from a few values so exact ties are common).
#include <fmt/format.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <span>
#include <vector>

#include "backend/cuda/cuda_check.hpp"
#include "backend/cuda/cuda_stream.hpp"
#include "backend/cuda/device_buffer.hpp"
#include "dsv41k/attention.hpp"
#include "kernel/kernel_check.hpp"
#include "model/attention/indexer.hpp"

namespace dsv41::test {
namespace {

// levels > 0: scores from `levels` distinct values (many exact ties); levels < 0: scores from
// {-0, +0, 1} (signed zeros compare equal: ties by index); neg_inf: fraction of -inf.
void run_topk(int64_t T, int64_t n, int k, int levels, double neg_inf) {
  const uint64_t seed = fresh_seed();
  std::mt19937_64 rng(seed);
  std::vector<float> s = random_normal(static_cast<size_t>(T * n), rng);
  std::uniform_int_distribution<int> lv(0, levels > 0 ? levels - 1 : 0);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  for (auto& v : s) {
    if (levels > 0) v = 0.25f * static_cast<float>(lv(rng));
    if (levels < 0) {
      const double r = u(rng);
      v = r < 0.4 ? -0.0f : r < 0.8 ? 0.0f : 1.0f;
    }
    if (u(rng) < neg_inf) v = -INFINITY;
  }
  std::vector<int32_t> want(static_cast<size_t>(T * k), -1);
  if (n > 0) select_topk(s.data(), T, n, k, want.data());
  cuda::CudaStream stream;
  cuda::DeviceBuffer ds(std::max<size_t>(16, s.size() * 4));
  if (!s.empty()) ds.upload(std::span<const float>(s));
  std::vector<int32_t> got(want.size(), 0x5A5A5A5A);  // poisoned
  cuda::DeviceBuffer dout(got.size() * 4);
  dout.upload(std::span<const int32_t>(got));
  DSV41_CUDA_CHECK(kernels::select_topk(ds.as<float>(), T, n, k, dout.as<int32_t>(), stream.get()));
  stream.synchronize();
  dout.download(std::span<int32_t>(got));
  size_t first_bad = got.size();
  for (size_t i = 0; i < got.size() && first_bad == got.size(); ++i)
    if (got[i] != want[i]) first_bad = i;
  INFO(fmt::format(
      "select_topk T {} n {} k {} levels {} -inf {} seed {:#x}: first mismatch at {} "
      "(row {}, slot {}): got {} want {}",
      T, n, k, levels, neg_inf, seed, first_bad, first_bad / k, first_bad % k,
      first_bad < got.size() ? got[first_bad] : 0, first_bad < got.size() ? want[first_bad] : 0));
  REQUIRE(first_bad == got.size());
}

}  // namespace

TEST_CASE("select_topk matches the CPU reference exactly", "[kernel][attention][topk]") {
  if (skip_without_gpu()) return;
  for (int64_t T : {1, 2, 7, 8, 16}) {
    run_topk(T, 5, 8, 0, 0.0);       // fewer candidates than k
    run_topk(T, 0, 4, 0, 0.0);       // no entries: all -1
    run_topk(T, 300, 16, 3, 0.1);    // heavy ties, some -inf
    run_topk(T, 40, 16, 0, 0.9);     // mostly invisible: fewer finite than k
    run_topk(T, 5000, 512, 0, 0.2);  // released index_topk, several score tiles
    run_topk(T, 5000, 512, 7, 0.0);  // released k with exact ties across the cut
  }
  run_topk(2048, 1024, 512, 0, 0.5);  // prefill chunk
  run_topk(3, 300, 16, -1, 0.1);      // signed zeros across the cut
  run_topk(2, 32768, 512, 0, 0.0);    // released: 32k entries (ratio 1 at 32k context)
  run_topk(2, 32768, 512, 5, 0.3);    // same with exact ties and invisible entries
  run_topk(1, 100, 1, 0, 0.0);        // k = 1
  // Register-held rows (n <= 512 threads x 4 or x 16 entries) at their edges, and the first row
  // length past them (strided passes over global memory).
  for (int64_t n : {511, 512, 513, 2048, 2049, 8192, 8193}) {
    run_topk(1, n, 512, 0, 0.0);
    run_topk(3, n, 512, 4, 0.25);
  }
  run_topk(1, 8192, 8192, 0, 0.1);  // k = n: every finite entry kept
  run_topk(2, 4096, 512, 3, 0.1);   // three values: the cut inside a huge tie
  run_topk(2, 2048, 512, 0, 1.0);   // all -inf: nothing kept
}

TEST_CASE("select_topk rejects unsupported arguments", "[kernel][attention][topk]") {
  float s[4] = {};
  int32_t o[4] = {};
  const cudaError_t inv = cudaErrorInvalidValue;
  using kernels::select_topk;
  CHECK(select_topk(s, -1, 4, 1, o, nullptr) == inv);
  CHECK(select_topk(s, int64_t{1} << 31, 4, 1, o, nullptr) == inv);
  CHECK(select_topk(s, 1, -1, 1, o, nullptr) == inv);
  CHECK(select_topk(s, 1, int64_t{1} << 31, 1, o, nullptr) == inv);
  CHECK(select_topk(s, 1, 4, 0, o, nullptr) == inv);
  CHECK(select_topk(s, 1, 4, 1, nullptr, nullptr) == inv);
  CHECK(select_topk(nullptr, 1, 4, 1, o, nullptr) == inv);
  CHECK(select_topk(s, 0, 4, 1, o, nullptr) == cudaSuccess);  // nothing to do
}

}  // namespace dsv41::test
