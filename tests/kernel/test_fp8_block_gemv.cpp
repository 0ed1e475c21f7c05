// [kernel] fp8_block_gemv vs Linear (FP8 e4m3 + 32x32 E8M0 blocks) at tiny and model shapes.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>

#include "kernel/gemv_case.hpp"

namespace dsv41::test {
namespace {

const std::vector<int> kRows = {1, 2, 7, 8, 16};

void run_fp8(int64_t out, int64_t in) {
  const uint64_t seed = fresh_seed();
  std::mt19937_64 rng(seed);
  const auto w = random_e4m3(static_cast<size_t>(out * in), rng);
  const auto s = random_e8m0(static_cast<size_t>(((out + 31) / 32) * ((in + 31) / 32)), rng);
  check_gemv(false, &kernels::fp8_block_gemv, out, in, kRows, w, s, seed);
}

// fp8_block_gemv_grouped (tc: fp8_block_gemv_tc) against one Linear per group (the group's
// 32-row-aligned slice of the weight and of its scale rows, times the group's slice of x).
void run_fp8_grouped(int groups, int64_t out, int64_t in, const std::vector<int>& row_counts,
                     bool tc = false) {
  const uint64_t seed = fresh_seed();
  std::mt19937_64 rng(seed);
  const int64_t scale_cols = (in + 31) / 32;
  const auto w = random_e4m3(static_cast<size_t>(groups * out * in), rng);
  const auto s = random_e8m0(static_cast<size_t>(((groups * out + 31) / 32) * scale_cols), rng);
  cuda::CudaStream stream;
  cuda::DeviceBuffer dw(w.size()), ds(s.size());
  const size_t ws_bytes = kernels::fp8_gemv_tc_workspace_bytes(groups * in);
  cuda::DeviceBuffer dws(ws_bytes);
  dws.fill_bytes(0xFF);  // the split must write every byte the product reads
  dw.upload(std::span<const uint8_t>(w));
  ds.upload(std::span<const uint8_t>(s));
  for (int rows : row_counts) {
    const std::vector<float> x = random_normal(static_cast<size_t>(rows) * groups * in, rng);
    cuda::DeviceBuffer dx(x.size() * 4), dy(static_cast<size_t>(rows) * groups * out * 4);
    dx.upload(std::span<const float>(x));
    dy.fill_bytes(0xFF);  // NaN: an unwritten output fails the comparison
    if (tc)
      DSV41_CUDA_CHECK(kernels::fp8_block_gemv_tc(dx.as<float>(), dw.as<uint8_t>(),
                                                  ds.as<uint8_t>(), dy.as<float>(), rows, groups,
                                                  out, in, dws.data(), ws_bytes, stream.get()));
    else
      DSV41_CUDA_CHECK(kernels::fp8_block_gemv_grouped(dx.as<float>(), dw.as<uint8_t>(),
                                                       ds.as<uint8_t>(), dy.as<float>(), rows,
                                                       groups, out, in, stream.get()));
    stream.synchronize();
    std::vector<float> got_all(static_cast<size_t>(rows) * groups * out);
    dy.download(std::span<float>(got_all));
    for (int g = 0; g < groups; ++g) {
      const std::vector<uint8_t> wg(w.begin() + g * out * in, w.begin() + (g + 1) * out * in);
      const int64_t s0 = (g * out / 32) * scale_cols, s1 = s0 + ((out + 31) / 32) * scale_cols;
      const std::vector<uint8_t> sg(s.begin() + s0, s.begin() + s1);
      std::vector<float> xg(static_cast<size_t>(rows) * in), got(static_cast<size_t>(rows) * out);
      for (int t = 0; t < rows; ++t) {
        std::copy_n(x.begin() + (t * groups + g) * in, in, xg.begin() + t * in);
        std::copy_n(got_all.begin() + (t * groups + g) * out, out, got.begin() + t * out);
      }
      const GemvReference ref = gemv_reference(false, wg, sg, xg, rows, out, in);
      std::vector<double> tol(ref.abs_dot.size());
      for (size_t i = 0; i < tol.size(); ++i) tol[i] = kGemvTolPerAbsDot * ref.abs_dot[i] + 1e-30;
      require_match(fmt::format("fp8 {}: group {} of {}, out {} in {} rows {} seed {:#x}",
                                tc ? "tc" : "grouped", g, groups, out, in, rows, seed),
                    got, ref.y, tol, kGemvMaxNmse);
    }
  }
}

}  // namespace

TEST_CASE("fp8_block_gemv_grouped matches one Linear per group", "[kernel][linear]") {
  if (skip_without_gpu()) return;
  run_fp8_grouped(1, 37, 96, kRows);  // groups 1 = fp8_block_gemv (any out)
  run_fp8_grouped(3, 32, 48, kRows);
  run_fp8_grouped(2, 64, 1040, kRows);
  run_fp8_grouped(8, 1024, 4096, {1, 2, 7, 16});  // attn.wo_a: 8 groups of 1024 x 4096
}

TEST_CASE("fp8_block_gemv_tc matches Linear, plain and grouped", "[kernel][linear]") {
  if (skip_without_gpu()) return;
  // Rows on both sides of the MMA's 8 columns; out not a multiple of the 16-row tile; partial
  // 32-row scale blocks; in from one 32-column block to many per k slice.
  const std::vector<int> rows = {1, 2, 7, 8, 9, 15, 16};
  run_fp8_grouped(1, 1, 32, rows, true);
  run_fp8_grouped(1, 37, 96, rows, true);
  run_fp8_grouped(1, 130, 4096, rows, true);
  run_fp8_grouped(3, 32, 64, rows, true);
  run_fp8_grouped(2, 64, 1056, rows, true);
  run_fp8_grouped(8, 1024, 4096, {1, 2, 7, 16}, true);  // attn.wo_a
  run_fp8_grouped(1, 32768, 1280, {1, 6, 16}, true);    // attn.wq_b
  run_fp8_grouped(1, 5120, 8192, {1, 6, 16}, true);     // attn.wo_b
  run_fp8_grouped(1, 1280, 5120, {1, 6, 16}, true);     // attn.wq_a
}

TEST_CASE("fp8_block_gemv_tc: x blocks of very different magnitudes, zeros and NaN",
          "[kernel][linear]") {
  if (skip_without_gpu()) return;
  // Each 32-column block of x gets its own power-of-two factor: blocks scaled by 2^-60 .. 2^60
  // next to each other, an all-zero block, and one NaN (which must reach its row's outputs only).
  const int64_t out = 64, in = 256;
  const int rows = 3;
  std::mt19937_64 rng(fresh_seed());
  const auto w = random_e4m3(static_cast<size_t>(out * in), rng);
  const auto s = random_e8m0(static_cast<size_t>((out / 32) * (in / 32)), rng);
  std::vector<float> x = random_normal(static_cast<size_t>(rows) * in, rng);
  for (int r = 0; r < rows; ++r)
    for (int64_t k = 0; k < in; ++k) {
      const int b = static_cast<int>(k / 32);
      x[r * in + k] = b == 3 ? 0.0f : std::ldexp(x[r * in + k], (b - 4) * 15 + r);
    }
  std::vector<float> x_nan = x;
  x_nan[2 * in + 77] = std::nanf("");
  cuda::CudaStream stream;
  cuda::DeviceBuffer dw(w.size()), ds(s.size()), dx(x.size() * 4), dy(rows * out * 4);
  const size_t ws_bytes = kernels::fp8_gemv_tc_workspace_bytes(in);
  cuda::DeviceBuffer dws(ws_bytes);
  dw.upload(std::span<const uint8_t>(w));
  ds.upload(std::span<const uint8_t>(s));
  for (bool with_nan : {false, true}) {
    const std::vector<float>& xs = with_nan ? x_nan : x;
    dx.upload(std::span<const float>(xs));
    dy.fill_bytes(0xFF);
    DSV41_CUDA_CHECK(kernels::fp8_block_gemv_tc(dx.as<float>(), dw.as<uint8_t>(), ds.as<uint8_t>(),
                                                dy.as<float>(), rows, 1, out, in, dws.data(),
                                                ws_bytes, stream.get()));
    stream.synchronize();
    std::vector<float> got(rows * out);
    dy.download(std::span<float>(got));
    const GemvReference ref = gemv_reference(false, w, s, x, rows, out, in);
    for (int r = 0; r < rows; ++r) {
      if (with_nan && r == 2) {
        for (int64_t o = 0; o < out; ++o)
          if (!std::isnan(got[r * out + o]))
            FAIL(fmt::format("row 2 out {}: {} not NaN", o, got[r * out + o]));
        continue;
      }
      const std::vector<float> g(got.begin() + r * out, got.begin() + (r + 1) * out),
          want(ref.y.begin() + r * out, ref.y.begin() + (r + 1) * out);
      std::vector<double> tol(out);
      for (int64_t o = 0; o < out; ++o)
        tol[o] = kGemvTolPerAbsDot * ref.abs_dot[r * out + o] + 1e-30;
      require_match(fmt::format("tc magnitudes row {} nan {}", r, with_nan), g, want, tol,
                    kGemvMaxNmse);
    }
  }
}

TEST_CASE("fp8_block_gemv_tc rejects unsupported arguments", "[kernel][linear]") {
  if (skip_without_gpu()) return;
  cuda::DeviceBuffer x(16 * 128 * 4), w(128 * 128), s(64), y(16 * 128 * 4);
  const size_t need = kernels::fp8_gemv_tc_workspace_bytes(128);
  cuda::DeviceBuffer ws(need + 16);
  const auto call = [&](int rows, int groups, int64_t out, int64_t in, void* wsp = nullptr,
                        size_t bytes = 0) {
    return kernels::fp8_block_gemv_tc(x.as<float>(), w.as<uint8_t>(), s.as<uint8_t>(),
                                      y.as<float>(), rows, groups, out, in, wsp ? wsp : ws.data(),
                                      bytes ? bytes : need, nullptr);
  };
  CHECK(call(0, 1, 32, 64) == cudaErrorInvalidValue);   // rows
  CHECK(call(17, 1, 32, 64) == cudaErrorInvalidValue);  // rows > 16
  CHECK(call(1, 1, 32, 48) == cudaErrorInvalidValue);   // in % 32
  CHECK(call(1, 2, 48, 64) == cudaErrorInvalidValue);   // a group would start mid scale block
  CHECK(call(1, 0, 32, 64) == cudaErrorInvalidValue);   // no groups
  CHECK(call(1, 1, 32, 128, nullptr, need - 1) == cudaErrorInvalidValue);    // workspace too small
  CHECK(call(1, 1, 32, 64, ws.as<uint8_t>() + 8) == cudaErrorInvalidValue);  // unaligned
  CHECK(kernels::fp8_block_gemv_tc(x.as<float>(), w.as<uint8_t>(), s.as<uint8_t>(), y.as<float>(),
                                   1, 1, 32, 64, nullptr, need, nullptr) == cudaErrorInvalidValue);
  CHECK(kernels::fp8_block_gemv_tc(x.as<float>(), w.as<uint8_t>(), s.as<uint8_t>(), x.as<float>(),
                                   1, 1, 32, 64, ws.data(), need,
                                   nullptr) == cudaErrorInvalidValue);  // y aliases x
  CHECK(call(16, 1, 40, 128) == cudaSuccess);
  CHECK(call(3, 2, 32, 64) == cudaSuccess);
  CHECK(cudaDeviceSynchronize() == cudaSuccess);
}

TEST_CASE("fp8_block_gemv_grouped rejects unsupported arguments", "[kernel][linear]") {
  if (skip_without_gpu()) return;
  cuda::DeviceBuffer x(2 * 128 * 4), w(128 * 64), s(8), y(2 * 128 * 4);
  const auto call = [&](int rows, int groups, int64_t out, int64_t in) {
    return kernels::fp8_block_gemv_grouped(x.as<float>(), w.as<uint8_t>(), s.as<uint8_t>(),
                                           y.as<float>(), rows, groups, out, in, nullptr);
  };
  CHECK(call(1, 0, 32, 64) == cudaErrorInvalidValue);   // no groups
  CHECK(call(1, 2, 40, 64) == cudaErrorInvalidValue);   // a group would start mid scale block
  CHECK(call(1, 2, 32, 40) == cudaErrorInvalidValue);   // in % 16
  CHECK(call(17, 2, 32, 64) == cudaErrorInvalidValue);  // rows
  CHECK(call(1, 1 << 20, 32, 1 << 10) == cudaErrorInvalidValue);  // groups · in > 2^28
  CHECK(call(1, 1, 40, 64) == cudaSuccess);                       // one group: any out
  CHECK(call(2, 2, 32, 64) == cudaSuccess);
  CHECK(cudaDeviceSynchronize() == cudaSuccess);
}

TEST_CASE("fp8_block_gemv matches Linear at tiny shapes", "[kernel][linear]") {
  if (skip_without_gpu()) return;
  // Partial 32-row and 32-column scale blocks, out not a multiple of the 4 rows per warp, and
  // in >= 1024 with few rows (several warps split one row group).
  for (auto [out, in] : std::vector<std::pair<int64_t, int64_t>>{
           {1, 16}, {3, 48}, {37, 96}, {40, 272}, {5, 2048}, {130, 4096}, {64, 1040}}) {
    CAPTURE(out, in);
    run_fp8(out, in);
  }
}

TEST_CASE("fp8_block_gemv matches Linear at model shapes", "[kernel][linear]") {
  if (skip_without_gpu()) return;
  run_fp8(32768, 1280);  // attn.wq_b
  run_fp8(5120, 8192);   // attn.wo_b
  run_fp8(1280, 5120);   // attn.wq_a
}

TEST_CASE("fp8_block_gemv rejects unsupported arguments", "[kernel][linear]") {
  if (skip_without_gpu()) return;
  cuda::DeviceBuffer x(64 * 4 * 17), w(64 * 64), s(4), y(64 * 4 * 17);
  const auto call = [&](const float* xp, const uint8_t* wp, int rows, int64_t in) {
    return kernels::fp8_block_gemv(xp, wp, s.as<uint8_t>(), y.as<float>(), rows, 64, in, nullptr);
  };
  CHECK(call(x.as<float>(), w.as<uint8_t>(), 0, 64) == cudaErrorInvalidValue);
  CHECK(call(x.as<float>(), w.as<uint8_t>(), 17, 64) == cudaErrorInvalidValue);
  CHECK(call(x.as<float>(), w.as<uint8_t>(), 1, 40) == cudaErrorInvalidValue);  // in % 16
  CHECK(call(x.as<float>() + 1, w.as<uint8_t>(), 1, 64) == cudaErrorInvalidValue);
  CHECK(call(x.as<float>(), w.as<uint8_t>() + 8, 1, 64) == cudaErrorInvalidValue);
  CHECK(kernels::fp8_block_gemv(x.as<float>(), w.as<uint8_t>(), s.as<uint8_t>(), x.as<float>(), 1,
                                64, 64, nullptr) == cudaErrorInvalidValue);  // y aliases x
  CHECK(call(x.as<float>(), w.as<uint8_t>(), 1, 64) == cudaSuccess);
  CHECK(cudaDeviceSynchronize() == cudaSuccess);
}

}  // namespace dsv41::test
