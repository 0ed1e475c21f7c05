// [kernel] moe_grouped_exl3_gemv and moe_grouped_exl3_gemm vs exl3::matmul (the fp32 CPU
// reference) per descriptor: mixed K 2..5 in one launch, rows 1..16 (both GEMV row instances) and
// 1..64 (GEMM tiles), the EXL3 padding (x zero-extended from x_cols, y cut to y_cols), null-w and
// rows-0 descriptors that must leave their rows untouched, the released expert shapes, and the
// rejected arguments.
#include <fmt/format.h>

#include <catch2/catch.hpp>
#include <cstdint>
#include <cstring>
#include <random>
#include <span>
#include <vector>

#include "backend/cuda/cuda_check.hpp"
#include "backend/cuda/cuda_stream.hpp"
#include "backend/cuda/device_buffer.hpp"
#include "dsv41k/moe.hpp"
#include "kernel/exl3_case.hpp"
#include "kernel/kernel_check.hpp"

namespace dsv41::test {
namespace {

struct Shape {
  int64_t k, n, x_cols, y_cols;
};

// One launch over descriptors d = 0..rows.size()-1 of expert Ks[d % Ks.size()], then one null-w
// and one rows-0 descriptor; every descriptor's y rows checked against the CPU, the two skipped
// descriptors' rows checked still poisoned.
void check_grouped(const Shape& s, const std::vector<int>& Ks, const std::vector<int>& rows,
                   uint64_t seed, bool gemm = false) {
  std::mt19937_64 rng(seed);
  const int E = static_cast<int>(Ks.size());
  std::vector<Case> cases;
  std::vector<DeviceMatrix> dm;
  std::vector<kernels::Exl3MoeMatrix> rec(E);
  for (int e = 0; e < E; ++e) {
    cases.push_back(make_case(s.k, s.n, Ks[e], Codebook::kMul1, rng));
    const DeviceMatrix& m = dm.emplace_back(cases.back().m);
    rec[e] = {m.trellis.as<uint8_t>(), m.suh.as<uint16_t>(), m.svh.as<uint16_t>(), Ks[e], 0};
  }
  cuda::DeviceBuffer drec(rec.size() * sizeof(rec[0]));
  drec.upload(std::span<const kernels::Exl3MoeMatrix>(rec));
  const auto* rec_d = drec.as<const kernels::Exl3MoeMatrix>();
  // x rows of descriptor d at x_row[d]; y rows at x_row[d] + 3 (y_row != x_row on purpose).
  std::vector<kernels::MoeGemvDesc> desc;
  int32_t at = 0;
  for (size_t d = 0; d < rows.size(); ++d) {
    desc.push_back({reinterpret_cast<const uint8_t*>(rec_d + d % E), nullptr, at, at + 3, rows[d]});
    at += rows[d];
  }
  const int32_t skipped_at = at;  // 5 rows of a null-w descriptor, then 4 of a rows-0 one
  desc.push_back({nullptr, nullptr, skipped_at, skipped_at + 3, 5});
  desc.push_back(
      {reinterpret_cast<const uint8_t*>(rec_d), nullptr, skipped_at + 5, skipped_at + 8, 0});
  const int64_t x_rows = skipped_at + 9, y_rows = x_rows + 3;
  const std::vector<float> x = random_normal(static_cast<size_t>(x_rows * s.x_cols), rng);
  cuda::DeviceBuffer dx(x.size() * 4), dy(static_cast<size_t>(y_rows * s.y_cols) * 4);
  cuda::DeviceBuffer ddesc(desc.size() * sizeof(desc[0]));
  dx.upload(std::span<const float>(x));
  dy.fill_bytes(0xFF);  // NaN: unwritten outputs fail
  ddesc.upload(std::span<const kernels::MoeGemvDesc>(desc));
  const int max_rows = *std::max_element(rows.begin(), rows.end());
  const int max_k = *std::max_element(Ks.begin(), Ks.end());
  cuda::CudaStream stream;
  if (gemm) {
    DSV41_CUDA_CHECK(kernels::moe_grouped_exl3_gemm(
        ddesc.as<kernels::MoeGemvDesc>(), static_cast<int>(desc.size()), max_k, dx.as<float>(),
        s.x_cols, dy.as<float>(), s.y_cols, s.k, s.n, stream.get()));
  } else {
    DSV41_CUDA_CHECK(kernels::moe_grouped_exl3_gemv(
        ddesc.as<kernels::MoeGemvDesc>(), static_cast<int>(desc.size()), max_rows, max_k,
        dx.as<float>(), s.x_cols, dy.as<float>(), s.y_cols, s.k, s.n, stream.get()));
  }
  stream.synchronize();
  std::vector<float> y(static_cast<size_t>(y_rows * s.y_cols));
  dy.download(std::span<float>(y));
  for (size_t d = 0; d < rows.size(); ++d) {
    const Case& c = cases[d % E];
    const int r = rows[d];
    std::vector<float> xz(static_cast<size_t>(r * s.k), 0.0f);  // zero-extended to k
    for (int i = 0; i < r; ++i)
      std::memcpy(&xz[i * s.k], &x[(desc[d].x_row + i) * s.x_cols], s.x_cols * 4);
    std::vector<float> full(static_cast<size_t>(r * s.n));
    exl3::matmul(c.m.view(), xz.data(), static_cast<size_t>(r), full.data());
    const std::vector<double> full_tol = y_bounds(c.m, c.w_hat, xz, r);
    std::vector<float> want, got;
    std::vector<double> tol;
    for (int i = 0; i < r; ++i)
      for (int64_t j = 0; j < s.y_cols; ++j) {
        want.push_back(full[i * s.n + j]);
        tol.push_back(full_tol[i * s.n + j]);
        got.push_back(y[(desc[d].y_row + i) * s.y_cols + j]);
      }
    require_match(fmt::format("grouped exl3 {} k {} n {} x_cols {} y_cols {}: desc {} K{} rows {} "
                              "(max_rows {}) seed {:#x}",
                              gemm ? "gemm" : "gemv", s.k, s.n, s.x_cols, s.y_cols, d, c.m.K, r,
                              max_rows, seed),
                  got, want, tol, kMaxNmse);
  }
  size_t touched = 0;
  for (int64_t i = (skipped_at + 3) * s.y_cols; i < y_rows * s.y_cols; ++i) {
    uint32_t bits;
    std::memcpy(&bits, &y[i], 4);
    touched += bits != 0xFFFFFFFFu;
  }
  INFO(fmt::format("{} outputs of the null-w / rows-0 descriptors were written", touched));
  REQUIRE(touched == 0);
}

}  // namespace

TEST_CASE("moe_grouped_exl3_gemv matches exl3::matmul per descriptor", "[kernel][moe][exl3]") {
  if (skip_without_gpu()) return;
  const uint64_t seed = fresh_seed();
  // The tiny model's padded experts: gate/up (in 96 -> 128, out 64 of 128), down (64 of 128 ->
  // 96 of 128); 16-row and 8-row instances; every K of the plan in one launch.
  check_grouped({128, 128, 96, 64}, {2, 3, 4, 5}, {1, 2, 7, 8, 16, 3, 11, 5}, seed);
  check_grouped({128, 128, 64, 96}, {5, 4, 3, 2}, {1, 8, 2, 7}, seed + 1);
  check_grouped({256, 384, 256, 384}, {5, 2, 3}, {16, 1, 9, 4, 16}, seed + 2);
  // Released shapes (hidden 5120, inter 2304): a decode step's six experts at 1 row, a verify
  // batch, and the down projection.
  check_grouped({5120, 2304, 5120, 2304}, {2, 3, 5, 2, 3, 2}, {1, 1, 1, 1, 1, 1}, seed + 3);
  check_grouped({5120, 2304, 5120, 2304}, {5, 2}, {16, 3}, seed + 4);
  check_grouped({2304, 5120, 2304, 5120}, {3, 5, 2}, {1, 2, 6}, seed + 5);
}

TEST_CASE("moe_grouped_exl3_gemm matches exl3::matmul per descriptor", "[kernel][moe][exl3]") {
  if (skip_without_gpu()) return;
  const uint64_t seed = fresh_seed();
  // Prefill tiles: full 64-row tiles, partial ones (1, 37, 63), every K in one launch, padded
  // tiny shapes, a several-chunk k and the released shapes.
  check_grouped({128, 128, 96, 64}, {2, 3, 4, 5}, {64, 1, 37, 63, 8, 64}, seed, true);
  check_grouped({128, 128, 64, 96}, {5, 2}, {17, 64, 3}, seed + 1, true);
  check_grouped({512, 384, 500, 384}, {3, 5, 2}, {64, 40, 1, 64}, seed + 2, true);
  check_grouped({5120, 2304, 5120, 2304}, {2, 3, 5}, {64, 23, 64}, seed + 3, true);
  check_grouped({2304, 5120, 2304, 5120}, {5, 2}, {64, 9}, seed + 4, true);
}

TEST_CASE("moe_grouped_exl3_gemm rejects unsupported arguments", "[kernel][moe][exl3]") {
  if (skip_without_gpu()) return;
  cuda::DeviceBuffer dx(4096), dy(4096), dd(sizeof(kernels::MoeGemvDesc));
  dd.fill_bytes(0);
  const auto* d = dd.as<kernels::MoeGemvDesc>();
  const float* x = dx.as<float>();
  float* y = dy.as<float>();
  const auto call = [&](const kernels::MoeGemvDesc* dp, int n_desc, int max_k, const float* xp,
                        int64_t x_cols, float* yp, int64_t y_cols, int64_t k, int64_t n) {
    return kernels::moe_grouped_exl3_gemm(dp, n_desc, max_k, xp, x_cols, yp, y_cols, k, n, nullptr);
  };
  CHECK(call(d, 1, 5, x, 128, y, 128, 128, 128) == cudaSuccess);
  DSV41_CUDA_CHECK(cudaDeviceSynchronize());
  CHECK(call(nullptr, 1, 2, x, 128, y, 128, 128, 128) == cudaErrorInvalidValue);
  CHECK(call(d, 0, 2, x, 128, y, 128, 128, 128) == cudaErrorInvalidValue);
  CHECK(call(d, 1, 1, x, 128, y, 128, 128, 128) == cudaErrorInvalidValue);
  CHECK(call(d, 1, 6, x, 128, y, 128, 128, 128) == cudaErrorInvalidValue);
  CHECK(call(d, 1, 2, x, 128, y, 128, 64, 128) == cudaErrorInvalidValue);
  CHECK(call(d, 1, 2, x, 130, y, 128, 128, 128) == cudaErrorInvalidValue);
  CHECK(call(d, 1, 2, x, 128, y, 126, 128, 128) == cudaErrorInvalidValue);
  CHECK(call(d, 1, 2, x, 128, const_cast<float*>(x), 128, 128, 128) == cudaErrorInvalidValue);
}

TEST_CASE("moe_grouped_exl3_gemv rejects unsupported arguments", "[kernel][moe][exl3]") {
  if (skip_without_gpu()) return;
  cuda::DeviceBuffer dx(4096), dy(4096), dd(sizeof(kernels::MoeGemvDesc));
  dd.fill_bytes(0);  // one rows-0 descriptor: a valid call launches and skips it
  const auto* d = dd.as<kernels::MoeGemvDesc>();
  const float* x = dx.as<float>();
  float* y = dy.as<float>();
  using kernels::moe_grouped_exl3_gemv;
  const auto call = [&](const kernels::MoeGemvDesc* dp, int n_desc, int max_rows, int max_k,
                        const float* xp, int64_t x_cols, float* yp, int64_t y_cols, int64_t k,
                        int64_t n) {
    return moe_grouped_exl3_gemv(dp, n_desc, max_rows, max_k, xp, x_cols, yp, y_cols, k, n,
                                 nullptr);
  };
  CHECK(call(d, 1, 1, 2, x, 128, y, 128, 128, 128) == cudaSuccess);
  DSV41_CUDA_CHECK(cudaDeviceSynchronize());
  CHECK(call(nullptr, 1, 1, 2, x, 128, y, 128, 128, 128) == cudaErrorInvalidValue);
  CHECK(call(d, 0, 1, 2, x, 128, y, 128, 128, 128) == cudaErrorInvalidValue);
  CHECK(call(d, 65536, 1, 2, x, 128, y, 128, 128, 128) == cudaErrorInvalidValue);
  CHECK(call(d, 1, 0, 2, x, 128, y, 128, 128, 128) == cudaErrorInvalidValue);
  CHECK(call(d, 1, 17, 2, x, 128, y, 128, 128, 128) == cudaErrorInvalidValue);
  CHECK(call(d, 1, 1, 1, x, 128, y, 128, 128, 128) == cudaErrorInvalidValue);  // K 1
  CHECK(call(d, 1, 1, 6, x, 128, y, 128, 128, 128) == cudaErrorInvalidValue);  // K 6
  CHECK(call(d, 1, 1, 2, x, 128, y, 128, 96, 128) == cudaErrorInvalidValue);   // k % 128
  CHECK(call(d, 1, 1, 2, x, 128, y, 128, 128, 200) == cudaErrorInvalidValue);  // n % 128
  CHECK(call(d, 1, 1, 2, x, 256, y, 128, 128, 128) == cudaErrorInvalidValue);  // x_cols > k
  CHECK(call(d, 1, 1, 2, x, 94, y, 128, 128, 128) == cudaErrorInvalidValue);   // x_cols % 4
  CHECK(call(d, 1, 1, 2, x, 128, y, 0, 128, 128) == cudaErrorInvalidValue);    // y_cols 0
  CHECK(call(d, 1, 1, 2, x, 128, y, 132, 128, 128) == cudaErrorInvalidValue);  // y_cols > n
  CHECK(call(d, 1, 1, 2, nullptr, 128, y, 128, 128, 128) == cudaErrorInvalidValue);
  CHECK(call(d, 1, 1, 2, x, 128, nullptr, 128, 128, 128) == cudaErrorInvalidValue);
  CHECK(call(d, 1, 1, 2, x + 1, 128, y, 128, 128, 128) == cudaErrorInvalidValue);  // alignment
  CHECK(call(d, 1, 1, 2, x, 128, const_cast<float*>(x), 128, 128, 128) ==
        cudaErrorInvalidValue);  // aliasing
}

}  // namespace dsv41::test
