// [kernel] rms_norm vs the CPU reference model/rms_norm.hpp (fp64 sum of squares, fp32 rest).
#include <fmt/format.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <span>
#include <vector>

#include "backend/cuda/cuda_check.hpp"
#include "backend/cuda/cuda_stream.hpp"
#include "backend/cuda/device_buffer.hpp"
#include "dsv41k/launchers.hpp"
#include "kernel/kernel_check.hpp"
#include "model/rms_norm.hpp"

namespace dsv41::test {
namespace {

// Same operation order as the reference; only the fp64 sum order differs, which can move the
// fp32 mean by one ulp: a few ulps of the output.
constexpr double kNormRelTol = 5e-7;

void run_norm(int64_t rows, int64_t n, bool with_weight, float eps, bool in_place,
              bool zero_first_row) {
  const uint64_t seed = fresh_seed();
  std::mt19937_64 rng(seed);
  std::vector<float> x = random_normal(static_cast<size_t>(rows * n), rng);
  if (zero_first_row) std::fill(x.begin(), x.begin() + n, 0.0f);
  const std::vector<float> w = random_normal(static_cast<size_t>(n), rng);
  std::vector<float> want(x.size());
  rms_norm(x.data(), with_weight ? w.data() : nullptr, rows, n, eps, want.data());

  cuda::CudaStream stream;
  cuda::DeviceBuffer dx(x.size() * 4), dw(w.size() * 4), dy(x.size() * 4);
  dx.upload(std::span<const float>(x));
  dw.upload(std::span<const float>(w));
  dy.fill_bytes(0xFF);
  float* y = in_place ? dx.as<float>() : dy.as<float>();
  DSV41_CUDA_CHECK(kernels::rms_norm(dx.as<float>(), with_weight ? dw.as<float>() : nullptr, y,
                                     rows, n, eps, stream.get()));
  stream.synchronize();
  std::vector<float> got(x.size());
  (in_place ? dx : dy).download(std::span<float>(got));
  std::vector<double> tol(got.size());
  for (size_t i = 0; i < tol.size(); ++i) tol[i] = kNormRelTol * std::fabs(want[i]) + 1e-37;
  require_match(fmt::format("rms_norm rows {} n {} weight {} eps {} in_place {} seed {:#x}", rows,
                            n, with_weight, eps, in_place, seed),
                got, want, tol, 1e-12);
}

}  // namespace

TEST_CASE("rms_norm matches the CPU reference", "[kernel][norm]") {
  if (skip_without_gpu()) return;
  for (int64_t n : {1, 7, 256, 1031, 5120, 20480}) {
    for (int64_t rows : {1, 3, 16}) {
      CAPTURE(n, rows);
      run_norm(rows, n, true, 1e-20f, false, false);
      run_norm(rows, n, false, 1e-6f, false, false);
    }
  }
  run_norm(4, 5120, true, 1e-20f, true, false);  // x == y
  run_norm(2, 5120, true, 1e-20f, false, true);  // a zero row stays zero with eps 1e-20
}

TEST_CASE("rms_norm rejects unsupported arguments", "[kernel][norm]") {
  if (skip_without_gpu()) return;
  cuda::DeviceBuffer x(64);
  CHECK(kernels::rms_norm(x.as<float>(), nullptr, x.as<float>(), 1, 0, 1e-20f, nullptr) ==
        cudaErrorInvalidValue);
  CHECK(kernels::rms_norm(x.as<float>(), nullptr, x.as<float>(), -1, 4, 1e-20f, nullptr) ==
        cudaErrorInvalidValue);
  CHECK(kernels::rms_norm(nullptr, nullptr, x.as<float>(), 1, 4, 1e-20f, nullptr) ==
        cudaErrorInvalidValue);
  CHECK(kernels::rms_norm(x.as<float>(), nullptr, x.as<float>(), 0, 4, 1e-20f, nullptr) ==
        cudaSuccess);
}

}  // namespace dsv41::test
