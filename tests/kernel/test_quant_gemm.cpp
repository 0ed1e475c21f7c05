// [kernel] fp8_block_gemm / fp4_expert_gemm (tensor-core prefill GEMM) vs Linear, under the same
// per-element bound as the GEMVs (gemv_case.hpp): row counts around the 64-row activation tile
// (1, 17, 63, 64, 65, 130), out around the 128-row weight tile, partial FP8 scale blocks; a grid of
// >= 512 blocks of 128 rows takes the 128-row activation tiles (quant_gemm.cu), partial ones
// included; x as 3 (fp32), 2 or 1 bf16 parts against Linear on the same rounded x.
#include <catch2/catch.hpp>

#include "kernel/gemv_case.hpp"

namespace dsv41::test {
namespace {

using kernels::GemmX;

template <GemmX X>
cudaError_t fp8_gemm(const float* x, const uint8_t* w, const uint8_t* s, float* y, int rows,
                     int64_t out, int64_t in, cudaStream_t st) {
  return kernels::fp8_block_gemm(x, w, s, y, rows, out, in, X, st);
}
template <GemmX X>
cudaError_t fp4_gemm(const float* x, const uint8_t* w, const uint8_t* s, float* y, int rows,
                     int64_t out, int64_t in, cudaStream_t st) {
  return kernels::fp4_expert_gemm(x, w, s, y, rows, out, in, X, st);
}

// big_scales: every 7th FP4 scale byte 241..243 (2^114..2^116), where the decode's factor
// 2^14 · scale is no longer a normal float and takes two products (quant_gemm.cuh GemmFp4Row).
template <GemmX X = GemmX::kFp32>
void run(bool fp4, int64_t out, int64_t in, const std::vector<int>& rows, bool big_scales = false) {
  const uint64_t seed = fresh_seed();
  std::mt19937_64 rng(seed);
  std::vector<uint8_t> w, s;
  if (fp4) {
    std::uniform_int_distribution<int> byte(0, 255);
    w.resize(static_cast<size_t>(out * in / 2));
    for (auto& b : w) b = static_cast<uint8_t>(byte(rng));
    s = random_e8m0(static_cast<size_t>(out * (in / 32)), rng);
    if (big_scales)
      for (size_t i = 3; i < s.size(); i += 7) s[i] = static_cast<uint8_t>(241 + i % 3);
  } else {
    w = random_e4m3(static_cast<size_t>(out * in), rng);
    s = random_e8m0(static_cast<size_t>(((out + 31) / 32) * ((in + 31) / 32)), rng);
  }
  check_gemv(fp4, fp4 ? &fp4_gemm<X> : &fp8_gemm<X>, out, in, rows, w, s, seed,
             static_cast<int>(X));
}

const std::vector<int> kRows = {1, 17, 63, 64, 65, 130};

}  // namespace

TEST_CASE("fp8_block_gemm matches Linear at tiny shapes", "[kernel][linear][gemm]") {
  if (skip_without_gpu()) return;
  for (auto [out, in] : std::vector<std::pair<int64_t, int64_t>>{
           {1, 32}, {37, 96}, {128, 64}, {129, 320}, {200, 4096}}) {
    CAPTURE(out, in);
    run(false, out, in, kRows);
  }
}

TEST_CASE("fp4_expert_gemm matches Linear at tiny shapes", "[kernel][linear][gemm]") {
  if (skip_without_gpu()) return;
  for (auto [out, in] :
       std::vector<std::pair<int64_t, int64_t>>{{1, 32}, {37, 96}, {129, 320}, {130, 2304}}) {
    CAPTURE(out, in);
    run(true, out, in, kRows);
  }
}

TEST_CASE("fp4_expert_gemm matches Linear with scales past 2^113", "[kernel][linear][gemm]") {
  if (skip_without_gpu()) return;
  run(true, 129, 320, kRows, true);
  run<GemmX::kBf16>(true, 129, 320, kRows, true);
}

TEST_CASE("quantised GEMMs match Linear at model shapes", "[kernel][linear][gemm]") {
  if (skip_without_gpu()) return;
  run(false, 1280, 5120, {200});  // attn.wq_a, a prefill piece
  run(false, 32768, 1280, {96});  // attn.wq_b
  run(true, 2304, 5120, {130});   // expert w1 / w3
  run(true, 5120, 2304, {65});    // expert w2
  // 129 weight tiles x 4 tiles of 128 rows = 516 blocks: 128-row tiles, the last one 1 row and
  // the last weight tile 37 rows.
  run(false, 16421, 96, {385});
  run(true, 16421, 64, {385});
}

TEST_CASE("quantised GEMMs with bf16 / bf16x2 inputs match Linear on the rounded x",
          "[kernel][linear][gemm]") {
  if (skip_without_gpu()) return;
  for (bool fp4 : {false, true}) {
    CAPTURE(fp4);
    run<GemmX::kBf16>(fp4, 129, 320, kRows);
    run<GemmX::kBf16x2>(fp4, 129, 320, kRows);
    run<GemmX::kBf16>(fp4, 16421, 96, {385});  // 128-row tiles
    run<GemmX::kBf16x2>(fp4, 16421, 96, {385});
  }
  run<GemmX::kBf16>(false, 32768, 1280, {96});  // attn.wq_b
  run<GemmX::kBf16>(true, 2304, 5120, {130});   // expert w1 / w3
}

TEST_CASE("quantised GEMMs reject unsupported arguments", "[kernel][linear][gemm]") {
  if (skip_without_gpu()) return;
  cuda::DeviceBuffer x(64 * 4 * 4), w(64 * 64), s(64), y(64 * 4 * 4);
  for (auto* f : {&kernels::fp8_block_gemm, &kernels::fp4_expert_gemm}) {
    const auto call = [&](const float* xp, const uint8_t* wp, int64_t rows, int64_t in) {
      return f(xp, wp, s.as<uint8_t>(), y.as<float>(), rows, 16, in, GemmX::kFp32, nullptr);
    };
    CHECK(call(x.as<float>(), w.as<uint8_t>(), -1, 64) == cudaErrorInvalidValue);
    CHECK(call(x.as<float>(), w.as<uint8_t>(), 1, 48) == cudaErrorInvalidValue);  // in % 32
    CHECK(call(x.as<float>(), w.as<uint8_t>(), 1, 0) == cudaErrorInvalidValue);
    CHECK(call(x.as<float>() + 1, w.as<uint8_t>(), 1, 64) == cudaErrorInvalidValue);
    CHECK(call(x.as<float>(), w.as<uint8_t>() + 8, 1, 64) == cudaErrorInvalidValue);
    CHECK(call(nullptr, w.as<uint8_t>(), 1, 64) == cudaErrorInvalidValue);
    CHECK(f(x.as<float>(), w.as<uint8_t>(), s.as<uint8_t>(), x.as<float>(), 1, 16, 64, GemmX::kFp32,
            nullptr) == cudaErrorInvalidValue);  // y aliases x
    CHECK(f(x.as<float>(), w.as<uint8_t>(), nullptr, y.as<float>(), 1, 16, 64, GemmX::kFp32,
            nullptr) == cudaErrorInvalidValue);
    for (int bad : {0, 4, -1})  // not a GemmX
      CHECK(f(x.as<float>(), w.as<uint8_t>(), s.as<uint8_t>(), y.as<float>(), 4, 16, 64,
              static_cast<GemmX>(bad), nullptr) == cudaErrorInvalidValue);
    CHECK(call(x.as<float>(), w.as<uint8_t>(), 0, 64) == cudaSuccess);  // nothing to do
    CHECK(call(x.as<float>(), w.as<uint8_t>(), 4, 64) == cudaSuccess);
  }
  CHECK(cudaDeviceSynchronize() == cudaSuccess);
}

}  // namespace dsv41::test
