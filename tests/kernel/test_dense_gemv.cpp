// [kernel] dense_gemv (BF16 / F32 weights, 1-16 rows) and bf16_gemm (BF16, prefill rows) vs Linear
// at tiny and model shapes.
#include <fmt/format.h>

#include <catch2/catch.hpp>
#include <cstring>

#include "backend/cuda/cuda_check.hpp"
#include "backend/cuda/cuda_stream.hpp"
#include "backend/cuda/device_buffer.hpp"
#include "core/thread_pool.hpp"
#include "dsv41k/launchers.hpp"
#include "kernel/gemv_case.hpp"
#include "loader/checkpoint.hpp"
#include "loader/safetensors.hpp"
#include "model/linear.hpp"
#include "quant/dtype.hpp"
#include "unit/base/temp_dir.hpp"

namespace dsv41::test {
namespace {

using kernels::DenseWeight;

const std::vector<int> kGemvRows = {1, 2, 7, 8, 16};
// Around the GEMM's 64-row activation tile.
const std::vector<int> kGemmRows = {17, 63, 64, 65, 130};

// gemm: bf16_gemm (f must be kBF16) instead of dense_gemv, x entering as `xp` (the reference runs
// on the same rounded x: gemv_reference.hpp bf16_parts); split: with a workspace for every k range
// gemm_k_splits asks for (64 MiB budget).
void run_dense(DenseWeight f, int64_t out, int64_t in,
               const std::vector<int>& row_counts = kGemvRows, bool gemm = false,
               kernels::GemmX xp = kernels::GemmX::kFp32, bool split = false) {
  const uint64_t seed = fresh_seed();
  std::mt19937_64 rng(seed);
  const std::vector<float> wf = random_normal(static_cast<size_t>(out * in), rng);
  std::vector<uint8_t> bytes;
  if (f == DenseWeight::kBF16) {
    bytes.resize(wf.size() * 2);
    for (size_t i = 0; i < wf.size(); ++i) {
      const uint16_t b = f32_to_bf16(wf[i]);
      std::memcpy(bytes.data() + 2 * i, &b, 2);
    }
  } else {
    bytes.resize(wf.size() * 4);
    std::memcpy(bytes.data(), wf.data(), bytes.size());
  }
  // Reference: the project's Linear bound from a one-tensor checkpoint of the same bytes.
  TempDir dir;
  write_safetensors(
      dir.file("model.safetensors"),
      {{"l.weight", f == DenseWeight::kBF16 ? DType::kBF16 : DType::kF32, {out, in}, bytes}});
  const std::unique_ptr<Checkpoint> ck = Checkpoint::open(dir.path());
  const Linear lin = Linear::bind(*ck, "l", out, in, QuantizationConfig{});
  static ThreadPool pool;

  cuda::CudaStream stream;
  cuda::DeviceBuffer dw(bytes.size());
  dw.upload(std::span<const uint8_t>(bytes));
  std::vector<float> row(static_cast<size_t>(in));
  for (int rows : row_counts) {
    const std::vector<float> x =
        bf16_parts(random_normal(static_cast<size_t>(rows) * in, rng), static_cast<int>(xp));
    std::vector<float> want(static_cast<size_t>(rows) * out);
    lin.forward(x.data(), rows, want.data(), &pool);
    std::vector<double> tol(want.size());
    for (int64_t o = 0; o < out; ++o) {
      lin.dequantize_row(o, row.data());
      for (int t = 0; t < rows; ++t) {
        double s = 0;
        for (int64_t k = 0; k < in; ++k) s += std::fabs(double(row[k]) * x[t * in + k]);
        tol[t * out + o] = kGemvTolPerAbsDot * s + 1e-30;
      }
    }
    cuda::DeviceBuffer dx(x.size() * 4), dy(want.size() * 4);
    dx.upload(std::span<const float>(x));
    dy.fill_bytes(0xFF);  // NaN: an unwritten output fails the comparison
    const int splits = split ? kernels::gemm_k_splits(rows, out, in, size_t{64} << 20) : 1;
    cuda::DeviceBuffer ws(splits > 1 ? static_cast<size_t>(splits) * rows * out * 4 : 16);
    if (gemm)
      DSV41_CUDA_CHECK(kernels::bf16_gemm(dx.as<float>(), dw.data(), dy.as<float>(), rows, out, in,
                                          xp, split ? ws.data() : nullptr, split ? ws.bytes() : 0,
                                          stream.get()));
    else
      DSV41_CUDA_CHECK(kernels::dense_gemv(dx.as<float>(), dw.data(), f, dy.as<float>(), rows, out,
                                           in, stream.get()));
    stream.synchronize();
    std::vector<float> got(want.size());
    dy.download(std::span<float>(got));
    require_match(fmt::format("dense {} {} out {} in {} rows {} x parts {} k splits {} seed {:#x}",
                              gemm ? "gemm" : "gemv", f == DenseWeight::kBF16 ? "bf16" : "f32", out,
                              in, rows, static_cast<int>(xp), splits, seed),
                  got, want, tol, kGemvMaxNmse);
  }
}

}  // namespace

TEST_CASE("dense_gemv matches Linear at tiny shapes", "[kernel][linear]") {
  if (skip_without_gpu()) return;
  // out not a multiple of the 8 warps per block; in below, at and above one 256-element lane
  // sweep, and not a multiple of 256; 1, 2, 4 and 8 warps per output row ({40, 264}: 2 sweeps,
  // 2 warps; {3, 1024}: 4; {130, 4096} and {5, 2056}: 8, the last sweep short for some).
  for (DenseWeight f : {DenseWeight::kBF16, DenseWeight::kF32})
    for (auto [out, in] : std::vector<std::pair<int64_t, int64_t>>{
             {1, 8}, {3, 24}, {37, 96}, {9, 256}, {40, 264}, {3, 1024}, {130, 4096}, {5, 2056}}) {
      CAPTURE(out, in);
      run_dense(f, out, in);
    }
}

TEST_CASE("dense_gemv matches Linear at model shapes", "[kernel][linear]") {
  if (skip_without_gpu()) return;
  run_dense(DenseWeight::kF32, 384, 5120);     // ffn.gate (fp32 after load)
  run_dense(DenseWeight::kBF16, 16384, 5120);  // a 16k-row slice of the BF16 head
  run_dense(DenseWeight::kBF16, 32, 5120);     // indexer.weights_proj
  run_dense(DenseWeight::kBF16, 512, 5120);    // compressor.wkv / wgate
  run_dense(DenseWeight::kBF16, 128, 512);     // indexer.wk
}

TEST_CASE("bf16_gemm matches Linear at tiny and model shapes", "[kernel][linear][gemm]") {
  if (skip_without_gpu()) return;
  // out around the 128-row weight tile; in one or many 32-wide k steps.
  for (auto [out, in] : std::vector<std::pair<int64_t, int64_t>>{
           {1, 32}, {37, 96}, {128, 64}, {129, 320}, {200, 4096}}) {
    CAPTURE(out, in);
    run_dense(DenseWeight::kBF16, out, in, kGemmRows, true);
  }
  run_dense(DenseWeight::kBF16, 384, 5120, {17, 130}, true);  // ffn.gate (BF16 in the release)
  run_dense(DenseWeight::kBF16, 4096, 5120, {65}, true);      // a 4k-row slice of the head
  // 129 weight tiles x 4 tiles of 128 rows: the 128-row activation tiles, partial ones included.
  run_dense(DenseWeight::kBF16, 16421, 64, {385}, true);
  for (kernels::GemmX xp : {kernels::GemmX::kBf16, kernels::GemmX::kBf16x2}) {
    CAPTURE(static_cast<int>(xp));
    run_dense(DenseWeight::kBF16, 129, 320, kGemmRows, true, xp);
    run_dense(DenseWeight::kBF16, 16421, 64, {385}, true, xp);
  }
}

TEST_CASE("bf16_gemm split over k matches Linear", "[kernel][linear][gemm]") {
  if (skip_without_gpu()) return;
  const auto fp32 = kernels::GemmX::kFp32;
  // ffn.gate: 3 blocks at 17 and 64 rows (20 ranges: its 160 k steps / 8), 27 at 520 rows (10).
  run_dense(DenseWeight::kBF16, 384, 5120, {17, 64, 520}, true, fp32, true);
  run_dense(DenseWeight::kBF16, 512, 5120, {130}, true, fp32, true);  // compressor.wkv
  run_dense(DenseWeight::kBF16, 129, 4096, kGemmRows, true, kernels::GemmX::kBf16, true);
}

TEST_CASE("bf16_gemm rejects unsupported arguments", "[kernel][linear][gemm]") {
  if (skip_without_gpu()) return;
  cuda::DeviceBuffer x(64 * 4 * 70), w(64 * 64 * 2), y(64 * 4 * 70);
  const auto call = [&](const float* xp, const void* wp, int64_t rows, int64_t in) {
    return kernels::bf16_gemm(xp, wp, y.as<float>(), rows, 64, in, kernels::GemmX::kFp32, nullptr,
                              0, nullptr);
  };
  CHECK(call(x.as<float>(), w.data(), 17, 48) == cudaErrorInvalidValue);  // in % 32
  CHECK(call(x.as<float>(), w.data(), 17, 0) == cudaErrorInvalidValue);
  CHECK(call(x.as<float>() + 1, w.data(), 17, 64) == cudaErrorInvalidValue);
  CHECK(call(x.as<float>(), w.as<uint8_t>() + 8, 17, 64) == cudaErrorInvalidValue);
  CHECK(call(x.as<float>(), nullptr, 17, 64) == cudaErrorInvalidValue);
  CHECK(call(x.as<float>(), w.data(), -1, 64) == cudaErrorInvalidValue);
  CHECK(kernels::bf16_gemm(x.as<float>(), w.data(), x.as<float>(), 17, 64, 64,
                           kernels::GemmX::kFp32, nullptr, 0,
                           nullptr) == cudaErrorInvalidValue);  // aliasing
  CHECK(kernels::bf16_gemm(x.as<float>(), w.data(), y.as<float>(), 17, 64, 64,
                           static_cast<kernels::GemmX>(0), nullptr, 0,
                           nullptr) == cudaErrorInvalidValue);
  CHECK(kernels::bf16_gemm(x.as<float>(), w.data(), y.as<float>(), 17, 64, 64,
                           kernels::GemmX::kFp32, nullptr, 64,
                           nullptr) == cudaErrorInvalidValue);  // workspace bytes, no buffer
  CHECK(call(x.as<float>(), w.data(), 0, 64) == cudaSuccess);   // nothing to do
  CHECK(call(x.as<float>(), w.data(), 70, 64) == cudaSuccess);
  CHECK(cudaDeviceSynchronize() == cudaSuccess);
}

TEST_CASE("dense_gemv rejects unsupported arguments", "[kernel][linear]") {
  if (skip_without_gpu()) return;
  cuda::DeviceBuffer x(64 * 4 * 17), w(64 * 64 * 4), y(64 * 4 * 17);
  const auto call = [&](const float* xp, const void* wp, DenseWeight f, int rows, int64_t in) {
    return kernels::dense_gemv(xp, wp, f, y.as<float>(), rows, 64, in, nullptr);
  };
  const DenseWeight bf = DenseWeight::kBF16;
  CHECK(call(x.as<float>(), w.data(), bf, 0, 64) == cudaErrorInvalidValue);
  CHECK(call(x.as<float>(), w.data(), bf, 17, 64) == cudaErrorInvalidValue);
  CHECK(call(x.as<float>(), w.data(), bf, 1, 60) == cudaErrorInvalidValue);  // in % 8
  CHECK(call(x.as<float>(), w.data(), bf, 1, 0) == cudaErrorInvalidValue);
  CHECK(call(x.as<float>() + 1, w.data(), bf, 1, 64) == cudaErrorInvalidValue);
  CHECK(call(x.as<float>(), w.as<uint8_t>() + 8, bf, 1, 64) == cudaErrorInvalidValue);
  CHECK(call(x.as<float>(), nullptr, bf, 1, 64) == cudaErrorInvalidValue);
  CHECK(call(x.as<float>(), w.data(), static_cast<DenseWeight>(5), 1, 64) == cudaErrorInvalidValue);
  CHECK(kernels::dense_gemv(x.as<float>(), w.data(), bf, x.as<float>(), 1, 64, 64, nullptr) ==
        cudaErrorInvalidValue);  // y aliases x
  CHECK(call(x.as<float>(), w.data(), bf, 1, 64) == cudaSuccess);
  CHECK(call(x.as<float>(), w.data(), DenseWeight::kF32, 16, 64) == cudaSuccess);
  CHECK(cudaDeviceSynchronize() == cudaSuccess);
}

}  // namespace dsv41::test
