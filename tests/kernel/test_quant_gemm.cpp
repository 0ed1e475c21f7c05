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
  return kernels::fp8_block_gemm(x, w, s, y, rows, out, in, X, nullptr, 0, st);
}
template <GemmX X>
cudaError_t fp4_gemm(const float* x, const uint8_t* w, const uint8_t* s, float* y, int rows,
                     int64_t out, int64_t in, cudaStream_t st) {
  return kernels::fp4_expert_gemm(x, w, s, y, rows, out, in, X, nullptr, 0, st);
}

// The same GEMMs with a workspace for every split gemm_k_splits asks for at a 64 MiB budget
// (exactly that many partial slices, so the launch splits the same way).
constexpr size_t kSplitBudget = size_t{64} << 20;
template <bool kFp4, GemmX X>
cudaError_t split_gemm(const float* x, const uint8_t* w, const uint8_t* s, float* y, int rows,
                       int64_t out, int64_t in, cudaStream_t st) {
  const int splits = kernels::gemm_k_splits(rows, out, in, kSplitBudget);
  cuda::DeviceBuffer ws(splits > 1 ? static_cast<size_t>(splits) * rows * out * 4 : 16);
  const cudaError_t e =
      kFp4 ? kernels::fp4_expert_gemm(x, w, s, y, rows, out, in, X, ws.data(), ws.bytes(), st)
           : kernels::fp8_block_gemm(x, w, s, y, rows, out, in, X, ws.data(), ws.bytes(), st);
  const cudaError_t se = cudaStreamSynchronize(st);  // before ws is freed
  return e != cudaSuccess ? e : se;
}

// big_scales: every 7th FP4 scale byte 241..243 (2^114..2^116), where the decode's factor
// 2^14 · scale is no longer a normal float and takes two products (quant_gemm.cuh GemmFp4Row).
template <GemmX X = GemmX::kFp32>
void run(bool fp4, int64_t out, int64_t in, const std::vector<int>& rows, bool big_scales = false,
         bool split = false) {
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
  const GemvLauncher f = split ? (fp4 ? &split_gemm<true, X> : &split_gemm<false, X>)
                               : (fp4 ? &fp4_gemm<X> : &fp8_gemm<X>);
  check_gemv(fp4, f, out, in, rows, w, s, seed, static_cast<int>(X));
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

TEST_CASE("gemm_k_splits splits only small grids with long k", "[kernel][linear][gemm]") {
  // No GPU needed: host arithmetic of quant_gemm.cu.
  CHECK(kernels::gemm_k_splits(64, 5120, 8192, kSplitBudget) == 7);       // wo_b, 40 blocks
  CHECK(kernels::gemm_k_splits(2048, 384, 5120, kSplitBudget) == 3);      // router gate, 96 blocks
  CHECK(kernels::gemm_k_splits(64, 129, 4096, kSplitBudget) == 16);       // 2 blocks, 128 / 8 steps
  CHECK(kernels::gemm_k_splits(2048, 32768, 1280, kSplitBudget) == 1);    // wq_b: 4096 blocks
  CHECK(kernels::gemm_k_splits(64, 129, 256, kSplitBudget) == 1);         // 8 k steps: one range
  CHECK(kernels::gemm_k_splits(64, 5120, 8192, 3 * 64 * 5120 * 4) == 3);  // bytes for 3
  CHECK(kernels::gemm_k_splits(64, 5120, 8192, 0) == 1);
  CHECK(kernels::gemm_k_splits(1, 1, 1 << 20, kSplitBudget) == 64);  // capped
  // 16 blocks ask for 17 ranges, but 17 of ceil(160 / 17) = 10 steps would leave the last one
  // empty (its prologue would load past the end of k): 16.
  CHECK(kernels::gemm_k_splits(64, 2048, 5120, kSplitBudget) == 16);
  // Every range of the kernel's partition (per = ceil(steps / s)) holds >= 8 steps.
  for (int64_t rows : {1, 17, 64, 65, 200, 2048})
    for (int64_t out : {1, 129, 1000, 2048, 5120})
      for (int64_t in = 32; in <= 8192; in += 32) {
        const int s = kernels::gemm_k_splits(rows, out, in, kSplitBudget);
        const int64_t steps = in / 32, per = (steps + s - 1) / s;
        INFO("rows " << rows << " out " << out << " in " << in << ": " << s << " ranges");
        REQUIRE(s >= 1);
        if (s > 1) REQUIRE((s - 1) * per < steps);
        if (s > 1) REQUIRE(per >= 8);
      }
}

TEST_CASE("quantised GEMMs split over k match Linear", "[kernel][linear][gemm]") {
  if (skip_without_gpu()) return;
  // 2-6 blocks of 128 k steps: 16 ranges of 8; partial k tiles of FP8 scale blocks; rows around
  // the 64-row activation tile.
  run(false, 129, 4096, kRows, false, true);
  run(true, 129, 4096, kRows, false, true);
  run<GemmX::kBf16>(false, 129, 4096, {17, 65}, false, true);
  run<GemmX::kBf16x2>(true, 129, 4096, {17, 65}, false, true);
  run(false, 5120, 8192, {64}, false, true);       // attn.wo_b at a 64-token chunk: 7 ranges
  run(false, 1024, 4096, {17, 100}, false, true);  // one wo_a group: 8 / 16 blocks
  run(true, 2304, 5120, {40}, false, true);        // an expert w1 at 40 rows: 18 blocks
}

TEST_CASE("quantised GEMMs reject a bad split-K workspace", "[kernel][linear][gemm]") {
  if (skip_without_gpu()) return;
  const int64_t rows = 17, out = 129, in = 4096;
  cuda::DeviceBuffer x(rows * in * 4), w(out * in), s(((out + 31) / 32) * (in / 32));
  cuda::DeviceBuffer y(rows * out * 4), ws(size_t{16} * rows * out * 4 + 16);
  REQUIRE(kernels::gemm_k_splits(rows, out, in, ws.bytes()) == 16);
  const auto call = [&](float* yp, void* wsp, size_t bytes) {
    return kernels::fp8_block_gemm(x.as<float>(), w.as<uint8_t>(), s.as<uint8_t>(), yp, rows, out,
                                   in, GemmX::kFp32, wsp, bytes, nullptr);
  };
  CHECK(call(y.as<float>(), nullptr, 64) == cudaErrorInvalidValue);  // bytes without a buffer
  CHECK(call(y.as<float>(), ws.as<uint8_t>() + 4, ws.bytes() - 16) == cudaErrorInvalidValue);
  CHECK(call(ws.as<float>(), ws.data(), ws.bytes()) == cudaErrorInvalidValue);  // y inside it
  CHECK(kernels::fp8_block_gemm(ws.as<float>(), w.as<uint8_t>(), s.as<uint8_t>(), y.as<float>(),
                                rows, out, in, GemmX::kFp32, ws.data(), ws.bytes(),
                                nullptr) == cudaErrorInvalidValue);  // x inside it
  CHECK(call(y.as<float>(), ws.data(), ws.bytes()) == cudaSuccess);
  CHECK(cudaDeviceSynchronize() == cudaSuccess);
}

TEST_CASE("quantised GEMMs reject unsupported arguments", "[kernel][linear][gemm]") {
  if (skip_without_gpu()) return;
  cuda::DeviceBuffer x(64 * 4 * 4), w(64 * 64), s(64), y(64 * 4 * 4);
  for (auto* f : {&kernels::fp8_block_gemm, &kernels::fp4_expert_gemm}) {
    const auto call = [&](const float* xp, const uint8_t* wp, int64_t rows, int64_t in) {
      return f(xp, wp, s.as<uint8_t>(), y.as<float>(), rows, 16, in, GemmX::kFp32, nullptr, 0,
               nullptr);
    };
    CHECK(call(x.as<float>(), w.as<uint8_t>(), -1, 64) == cudaErrorInvalidValue);
    CHECK(call(x.as<float>(), w.as<uint8_t>(), 1, 48) == cudaErrorInvalidValue);  // in % 32
    CHECK(call(x.as<float>(), w.as<uint8_t>(), 1, 0) == cudaErrorInvalidValue);
    CHECK(call(x.as<float>() + 1, w.as<uint8_t>(), 1, 64) == cudaErrorInvalidValue);
    CHECK(call(x.as<float>(), w.as<uint8_t>() + 8, 1, 64) == cudaErrorInvalidValue);
    CHECK(call(nullptr, w.as<uint8_t>(), 1, 64) == cudaErrorInvalidValue);
    CHECK(f(x.as<float>(), w.as<uint8_t>(), s.as<uint8_t>(), x.as<float>(), 1, 16, 64, GemmX::kFp32,
            nullptr, 0, nullptr) == cudaErrorInvalidValue);  // y aliases x
    CHECK(f(x.as<float>(), w.as<uint8_t>(), nullptr, y.as<float>(), 1, 16, 64, GemmX::kFp32,
            nullptr, 0, nullptr) == cudaErrorInvalidValue);
    for (int bad : {0, 4, -1})  // not a GemmX
      CHECK(f(x.as<float>(), w.as<uint8_t>(), s.as<uint8_t>(), y.as<float>(), 4, 16, 64,
              static_cast<GemmX>(bad), nullptr, 0, nullptr) == cudaErrorInvalidValue);
    CHECK(call(x.as<float>(), w.as<uint8_t>(), 0, 64) == cudaSuccess);  // nothing to do
    CHECK(call(x.as<float>(), w.as<uint8_t>(), 4, 64) == cudaSuccess);
  }
  CHECK(cudaDeviceSynchronize() == cudaSuccess);
}

}  // namespace dsv41::test
