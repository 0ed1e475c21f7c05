// [kernel] fp8_block_gemv vs Linear (FP8 e4m3 + 32x32 E8M0 blocks) at tiny and model shapes.
#include <catch2/catch.hpp>

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

}  // namespace

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
