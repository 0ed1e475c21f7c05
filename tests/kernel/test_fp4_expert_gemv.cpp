// [kernel] fp4_expert_gemv vs Linear (packed E2M1, even column = low nibble, E8M0 per row per 32)
// at tiny and routed-expert shapes.
#include <catch2/catch.hpp>

#include "kernel/gemv_case.hpp"

namespace dsv41::test {
namespace {

const std::vector<int> kRows = {1, 2, 7, 8, 16};

void run_fp4(int64_t out, int64_t in) {
  const uint64_t seed = fresh_seed();
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int> byte(0, 255);  // all 16 codes in both nibbles, ±0 included
  std::vector<uint8_t> w(static_cast<size_t>(out * in / 2));
  for (auto& b : w) b = static_cast<uint8_t>(byte(rng));
  const auto s = random_e8m0(static_cast<size_t>(out * (in / 32)), rng);
  check_gemv(true, &kernels::fp4_expert_gemv, out, in, kRows, w, s, seed);
}

}  // namespace

TEST_CASE("fp4_expert_gemv matches Linear at tiny shapes", "[kernel][linear]") {
  if (skip_without_gpu()) return;
  for (auto [out, in] : std::vector<std::pair<int64_t, int64_t>>{
           {1, 32}, {3, 64}, {33, 96}, {100, 320}, {7, 2048}, {130, 4096}}) {
    CAPTURE(out, in);
    run_fp4(out, in);
  }
}

TEST_CASE("fp4_expert_gemv matches Linear at routed-expert shapes", "[kernel][linear]") {
  if (skip_without_gpu()) return;
  run_fp4(2304, 5120);  // ffn.experts.E.w1 / w3
  run_fp4(5120, 2304);  // ffn.experts.E.w2
}

TEST_CASE("fp4_expert_gemv rejects unsupported arguments", "[kernel][linear]") {
  if (skip_without_gpu()) return;
  cuda::DeviceBuffer x(64 * 4 * 17), w(64 * 32), s(64 * 2), y(64 * 4 * 17);
  const auto call = [&](const float* xp, const uint8_t* wp, int rows, int64_t in) {
    return kernels::fp4_expert_gemv(xp, wp, s.as<uint8_t>(), y.as<float>(), rows, 64, in, nullptr);
  };
  CHECK(call(x.as<float>(), w.as<uint8_t>(), 0, 64) == cudaErrorInvalidValue);
  CHECK(call(x.as<float>(), w.as<uint8_t>(), 17, 64) == cudaErrorInvalidValue);
  CHECK(call(x.as<float>(), w.as<uint8_t>(), 1, 48) == cudaErrorInvalidValue);  // in % 32
  CHECK(call(x.as<float>() + 2, w.as<uint8_t>(), 1, 64) == cudaErrorInvalidValue);
  CHECK(call(x.as<float>(), w.as<uint8_t>(), 1, 64) == cudaSuccess);
  CHECK(cudaDeviceSynchronize() == cudaSuccess);
}

}  // namespace dsv41::test
