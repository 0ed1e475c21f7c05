// [kernel] rope_rotate vs the CPU reference model/attention/rope.hpp (spec §2.2), with the
// released tables: main (theta 10000) and YaRN compress (theta 160000, factor 16).
#include <fmt/format.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <span>
#include <vector>

#include "backend/cuda/cuda_check.hpp"
#include "backend/cuda/cuda_stream.hpp"
#include "backend/cuda/device_buffer.hpp"
#include "config/model_config.hpp"
#include "dsv41k/attention.hpp"
#include "kernel/kernel_check.hpp"
#include "model/attention/rope.hpp"
#include "support/released_rope.hpp"

namespace dsv41::test {
namespace {

// Same fp32 op sequence as the reference; only cos/sin differ (CUDA fp64 vs glibc, each within
// ~1 fp64 ulp), so c and s round to the same fp32 except within ~2^-29 of a rounding boundary:
// nearly every element is bit-equal (checked: >= 99.9 %). Where c or s moves by one fp32 ulp
// (<= 2^-24 since |c|, |s| <= 1) an output moves by <= 2^-24·(|even| + |odd|) plus one output
// rounding (<= 2^-24·(|even| + |odd|)): bound 2^-22·(|even| + |odd|) with margin.
constexpr double kRopeRelTol = 2.4e-7;

void run_rope(int64_t T, int heads, int head_dim, int rope_dim, int64_t pos0, int64_t step,
              bool compress, bool inverse) {
  const uint64_t seed = fresh_seed();
  std::mt19937_64 rng(seed);
  const std::vector<float> x = random_normal(static_cast<size_t>(T * heads * head_dim), rng);
  const std::vector<float> f = released_rope_table(compress, rope_dim);
  std::vector<float> want = x;
  for (int64_t t = 0; t < T; ++t)
    for (int h = 0; h < heads; ++h)
      rope_rotate(want.data() + (t * heads + h) * head_dim + head_dim - rope_dim, f.data(),
                  rope_dim, pos0 + t * step, inverse);

  cuda::CudaStream stream;
  cuda::DeviceBuffer dx(x.size() * 4), df(f.size() * 4);
  dx.upload(std::span<const float>(x));
  df.upload(std::span<const float>(f));
  DSV41_CUDA_CHECK(kernels::rope_rotate(dx.as<float>(), df.as<float>(), T, heads, head_dim,
                                        rope_dim, pos0, step, inverse, stream.get()));
  stream.synchronize();
  std::vector<float> got(x.size());
  dx.download(std::span<float>(got));
  std::vector<double> tol(x.size(), 0.0);  // outside the rope slice: untouched, exact
  size_t equal = 0, rotated = 0;
  for (int64_t th = 0; th < T * heads; ++th) {
    for (int c = head_dim - rope_dim; c < head_dim; c += 2) {
      const size_t i = static_cast<size_t>(th * head_dim + c);
      const double mag = std::fabs(x[i]) + std::fabs(x[i + 1]);
      tol[i] = tol[i + 1] = kRopeRelTol * mag + 1e-38;
      equal += (got[i] == want[i]) + (got[i + 1] == want[i + 1]);
      rotated += 2;
    }
  }
  for (auto& v : tol) v = v == 0.0 ? 1e-38 : v;
  const std::string ctx = fmt::format(
      "rope T {} heads {} head_dim {} rope_dim {} pos0 {} step {} {} inverse {} seed "
      "{:#x}: {} of {} rotated values bit-equal",
      T, heads, head_dim, rope_dim, pos0, step, compress ? "yarn" : "main", inverse, seed, equal,
      rotated);
  require_match(ctx, got, want, tol, 1e-12);
  INFO(ctx);
  CHECK(static_cast<double>(equal) >= 0.999 * static_cast<double>(rotated));
}

}  // namespace

TEST_CASE("rope_rotate matches the CPU reference", "[kernel][attention][rope]") {
  if (skip_without_gpu()) return;
  for (bool compress : {false, true}) {
    for (bool inverse : {false, true}) {
      run_rope(3, 2, 10, 4, 5, 1, compress, inverse);           // tiny, nope part of 6
      run_rope(1, 1, 2, 2, 0, 1, compress, inverse);            // position 0, one pair
      run_rope(7, 64, 512, 64, 123457, 1, compress, inverse);   // q / o heads, released dims
      run_rope(16, 1, 512, 64, 1048560, 1, compress, inverse);  // window K at 1 M positions
      run_rope(5, 1, 512, 64, 4096, 2, compress, inverse);      // compressed entries, ratio 2
      run_rope(16, 32, 128, 64, 777, 1, compress, inverse);     // index heads
    }
  }
}

TEST_CASE("rope_rotate rejects unsupported arguments", "[kernel][attention][rope]") {
  float dummy[16] = {};
  float* x = dummy;
  const float* f = dummy;
  using kernels::rope_rotate;
  CHECK(rope_rotate(nullptr, f, 1, 1, 8, 4, 0, 1, false, nullptr) == cudaErrorInvalidValue);
  CHECK(rope_rotate(x, nullptr, 1, 1, 8, 4, 0, 1, false, nullptr) == cudaErrorInvalidValue);
  CHECK(rope_rotate(x, f, -1, 1, 8, 4, 0, 1, false, nullptr) == cudaErrorInvalidValue);
  CHECK(rope_rotate(x, f, 1, 0, 8, 4, 0, 1, false, nullptr) == cudaErrorInvalidValue);
  CHECK(rope_rotate(x, f, 1, 1, 8, 3, 0, 1, false, nullptr) == cudaErrorInvalidValue);  // odd
  CHECK(rope_rotate(x, f, 1, 1, 8, 0, 0, 1, false, nullptr) == cudaErrorInvalidValue);
  CHECK(rope_rotate(x, f, 1, 1, 8, 10, 0, 1, false, nullptr) == cudaErrorInvalidValue);  // > D
  CHECK(rope_rotate(x, f, 1, 1, 8, 4, -1, 1, false, nullptr) == cudaErrorInvalidValue);
  CHECK(rope_rotate(x, f, 1, 1, 8, 4, 0, -1, false, nullptr) == cudaErrorInvalidValue);
  CHECK(rope_rotate(x, f, int64_t{1} << 40, 64, 512, 64, 0, 1, false, nullptr) ==
        cudaErrorInvalidValue);
  CHECK(rope_rotate(x, f, 0, 1, 8, 4, 0, 1, false, nullptr) == cudaSuccess);  // nothing to do
}

}  // namespace dsv41::test
