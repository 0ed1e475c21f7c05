// One GEMV kernel case: upload, poison y, launch, download, compare with gemv_reference().
#pragma once

#include <fmt/format.h>

#include <cstdint>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "backend/cuda/cuda_check.hpp"
#include "backend/cuda/cuda_stream.hpp"
#include "backend/cuda/device_buffer.hpp"
#include "dsv41k/launchers.hpp"
#include "kernel/gemv_reference.hpp"
#include "kernel/kernel_check.hpp"

namespace dsv41::test {

// ~335 fp32 ulps of Σ|w·x| per element: both sides round once per term (summation orders differ),
// while an indexing or decoding error moves an output by ~Σ|w·x| / sqrt(in).
inline constexpr double kGemvTolPerAbsDot = 2e-5;
inline constexpr double kGemvMaxNmse = 1e-9;

using GemvLauncher = cudaError_t (*)(const float*, const uint8_t*, const uint8_t*, float*, int,
                                     int64_t, int64_t, cudaStream_t);

// Runs one case for each row count in `row_counts` on the same weights. x_parts < 3: the kernel
// takes x as that many bf16 parts (GemmX), so the reference runs on bf16_parts(x, x_parts).
inline void check_gemv(bool fp4, GemvLauncher launch, int64_t out, int64_t in,
                       const std::vector<int>& row_counts, const std::vector<uint8_t>& w,
                       const std::vector<uint8_t>& scale, uint64_t seed, int x_parts = 3) {
  std::mt19937_64 rng(seed ^ 0x9E3779B97F4A7C15ull);
  cuda::CudaStream stream;
  cuda::DeviceBuffer dw(w.size()), ds(scale.size());
  dw.upload(std::span<const uint8_t>(w));
  ds.upload(std::span<const uint8_t>(scale));
  for (int rows : row_counts) {
    const std::vector<float> x = random_normal(static_cast<size_t>(rows) * in, rng);
    const GemvReference ref = gemv_reference(fp4, w, scale, bf16_parts(x, x_parts), rows, out, in);
    cuda::DeviceBuffer dx(x.size() * 4), dy(ref.y.size() * 4);
    dx.upload(std::span<const float>(x));
    dy.fill_bytes(0xFF);  // NaN: an unwritten output fails the comparison
    DSV41_CUDA_CHECK(launch(dx.as<float>(), dw.as<uint8_t>(), ds.as<uint8_t>(), dy.as<float>(),
                            rows, out, in, stream.get()));
    stream.synchronize();
    std::vector<float> got(ref.y.size());
    dy.download(std::span<float>(got));
    std::vector<double> tol(ref.abs_dot.size());
    for (size_t i = 0; i < tol.size(); ++i) tol[i] = kGemvTolPerAbsDot * ref.abs_dot[i] + 1e-30;
    require_match(fmt::format("{} out {} in {} rows {} x parts {} seed {:#x}", fp4 ? "fp4" : "fp8",
                              out, in, rows, x_parts, seed),
                  got, ref.y, tol, kGemvMaxNmse);
  }
}

}  // namespace dsv41::test
