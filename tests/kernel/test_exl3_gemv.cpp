// [kernel] exl3_decode (bit-exact vs exl3::decode_inner) and exl3_gemv (vs exl3::matmul, the
// fp32 CPU reference) on random trellis bits and sign/scale vectors, tiny and expert shapes.
#include <fmt/format.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <random>
#include <span>
#include <vector>

#include "backend/cuda/cuda_check.hpp"
#include "backend/cuda/cuda_stream.hpp"
#include "backend/cuda/device_buffer.hpp"
#include "dsv41k/launchers.hpp"
#include "exl3/exl3_linear.hpp"
#include "exl3/hadamard.hpp"
#include "kernel/exl3_case.hpp"
#include "kernel/kernel_check.hpp"
#include "quant/dtype.hpp"

namespace dsv41::test {
namespace {

using exl3::Codebook;

cudaError_t decode_on_gpu(const Matrix& m, std::vector<uint16_t>* out) {
  cuda::DeviceBuffer dt(m.trellis.size()), dw(static_cast<size_t>(m.k * m.n * 2));
  dt.upload(std::span<const uint8_t>(m.trellis));
  dw.fill_bytes(0xFF);
  const cudaError_t e = kernels::exl3_decode(dt.as<uint8_t>(), dw.as<uint16_t>(), m.k, m.n, m.K,
                                             static_cast<kernels::Exl3Codebook>(m.cb), nullptr);
  if (e != cudaSuccess) return e;
  DSV41_CUDA_CHECK(cudaDeviceSynchronize());
  out->resize(static_cast<size_t>(m.k * m.n));
  dw.download(std::span<uint16_t>(*out));
  return cudaSuccess;
}

// One exl3_gemv call over `cases` (same shape) with per-matrix row counts; compares every matrix.
void check_batch(const std::vector<const Case*>& cases, const std::vector<int>& rows, int k_splits,
                 uint64_t seed, std::mt19937_64& rng, int calls = 1) {
  const Matrix& m0 = cases[0]->m;
  const int count = static_cast<int>(cases.size());
  std::vector<DeviceMatrix> dm;
  std::vector<cuda::DeviceBuffer> bufs;  // x and y of matrix i at 2i, 2i + 1
  std::vector<kernels::Exl3GemvMatrix> desc(count);
  std::vector<std::vector<float>> xs(count);
  dm.reserve(count);
  bufs.reserve(2 * count);
  for (int i = 0; i < count; ++i) {
    const Matrix& m = cases[i]->m;
    const DeviceMatrix& d = dm.emplace_back(m);
    xs[i] = random_normal(static_cast<size_t>(std::max(rows[i], 1) * m.k), rng);
    bufs.emplace_back(xs[i].size() * 4);
    bufs.back().upload(std::span<const float>(xs[i]));
    bufs.emplace_back(static_cast<size_t>(std::max(rows[i], 1) * m.n * 4));
    bufs.back().fill_bytes(0xFF);  // NaN: unwritten outputs fail
    desc[i] = {d.trellis.as<uint8_t>(), d.suh.as<uint16_t>(),        d.svh.as<uint16_t>(),
               bufs[2 * i].as<float>(), bufs[2 * i + 1].as<float>(), rows[i]};
  }
  const size_t ws = kernels::exl3_gemv_workspace_bytes(count, m0.k, m0.n, k_splits);
  REQUIRE(ws > 0);
  cuda::DeviceBuffer dws(ws);
  dws.fill_bytes(0);
  cuda::CudaStream stream;
  for (int call = 0; call < calls; ++call) {  // a second call checks the counters were reset
    DSV41_CUDA_CHECK(kernels::exl3_gemv(desc.data(), count, m0.k, m0.n, m0.K,
                                        static_cast<kernels::Exl3Codebook>(m0.cb), k_splits,
                                        dws.data(), ws, stream.get()));
  }
  stream.synchronize();
  for (int i = 0; i < count; ++i) {
    if (rows[i] == 0) continue;
    const Matrix& m = cases[i]->m;
    std::vector<float> want(static_cast<size_t>(rows[i] * m.n)), got(want.size());
    exl3::matmul(m.view(), xs[i].data(), static_cast<size_t>(rows[i]), want.data());
    bufs[2 * i + 1].download(std::span<float>(got));
    require_match(
        fmt::format("exl3 {} K{} k {} n {} rows {} splits {} matrix {}/{} seed {:#x}",
                    exl3::codebook_name(m.cb), m.K, m.k, m.n, rows[i], k_splits, i, count, seed),
        got, want, y_bounds(m, cases[i]->w_hat, xs[i], rows[i]), kMaxNmse);
  }
}

const std::vector<int> kRows = {1, 2, 7, 8, 16};

}  // namespace

TEST_CASE("exl3_decode is bit-exact with exl3::decode_inner", "[kernel][exl3]") {
  if (skip_without_gpu()) return;
  const uint64_t seed = fresh_seed();
  std::mt19937_64 rng(seed);
  for (Codebook cb : {Codebook::kMul1, Codebook::kMcg, Codebook::k3Inst}) {
    for (int K : {2, 3, 4, 5, 6}) {
      for (auto [k, n] : std::vector<std::pair<int64_t, int64_t>>{{16, 16}, {48, 80}, {256, 128}}) {
        const Matrix m = random_matrix(k, n, K, cb, rng);
        std::vector<uint16_t> got;
        REQUIRE(decode_on_gpu(m, &got) == cudaSuccess);
        const std::vector<uint16_t> want = exl3::decode_inner(m.view());
        size_t bad = 0, first = 0;
        for (size_t i = 0; i < want.size(); ++i)
          if (got[i] != want[i] && bad++ == 0) first = i;
        INFO(
            fmt::format("{} K{} k {} n {} seed {:#x}: {} of {} differ, first at {} got {:#06x} "
                        "want {:#06x}",
                        exl3::codebook_name(cb), K, k, n, seed, bad, want.size(), first, got[first],
                        want[first]));
        REQUIRE(bad == 0);
      }
    }
  }
  // Expert shape, the checkpoint's codebook and rates.
  for (int K : {2, 3, 5}) {
    const Matrix m = random_matrix(5120, 2304, K, Codebook::kMul1, rng);
    std::vector<uint16_t> got;
    REQUIRE(decode_on_gpu(m, &got) == cudaSuccess);
    CAPTURE(K, seed);
    REQUIRE(got == exl3::decode_inner(m.view()));
  }
}

TEST_CASE("exl3_gemv matches exl3::matmul at tiny shapes", "[kernel][exl3]") {
  if (skip_without_gpu()) return;
  const uint64_t seed = fresh_seed();
  std::mt19937_64 rng(seed);
  for (Codebook cb : {Codebook::kMul1, Codebook::kMcg, Codebook::k3Inst}) {
    for (int K : {2, 3, 5}) {
      for (auto [k, n] :
           std::vector<std::pair<int64_t, int64_t>>{{128, 128}, {384, 256}, {1024, 128}}) {
        const Case c = make_case(k, n, K, cb, rng);
        for (int r : kRows)
          for (int splits : {0, 1, 2, 8}) {
            if (splits * 8 > k / 16) continue;
            check_batch({&c}, {r}, splits, seed, rng, 2);
          }
      }
    }
  }
}

TEST_CASE("exl3_gemv matches exl3::matmul at routed-expert shapes", "[kernel][exl3]") {
  if (skip_without_gpu()) return;
  const uint64_t seed = fresh_seed();
  std::mt19937_64 rng(seed);
  for (int K : {2, 3, 5}) {
    for (auto [k, n] : std::vector<std::pair<int64_t, int64_t>>{{5120, 2304}, {2304, 5120}}) {
      const Case c = make_case(k, n, K, Codebook::kMul1, rng);
      for (int r : kRows) check_batch({&c}, {r}, 0, seed, rng);
    }
  }
  // MCG at one expert shape, 1 and 16 rows.
  const Case c = make_case(5120, 2304, 3, Codebook::kMcg, rng);
  check_batch({&c}, {1}, 0, seed, rng);
  check_batch({&c}, {16}, 0, seed, rng);
}

TEST_CASE("exl3_gemv batches matrices with their own row counts", "[kernel][exl3]") {
  if (skip_without_gpu()) return;
  const uint64_t seed = fresh_seed();
  std::mt19937_64 rng(seed);
  std::vector<Case> cs;
  for (int i = 0; i < 4; ++i) cs.push_back(make_case(2304, 1024, 2, Codebook::kMul1, rng));
  // An empty expert bucket (0 rows) next to 1, 5 and 9 rows; auto split and forced splits.
  for (int splits : {0, 1, 3})
    check_batch({&cs[0], &cs[1], &cs[2], &cs[3]}, {1, 0, 5, 9}, splits, seed, rng, 2);
}

TEST_CASE("exl3 kernels reject unsupported arguments", "[kernel][exl3]") {
  if (skip_without_gpu()) return;
  using kernels::Exl3Codebook;
  cuda::DeviceBuffer t(256 * 256), s(512), x(256 * 4 * 17), y(256 * 4 * 17);
  const size_t ws = kernels::exl3_gemv_workspace_bytes(1, 256, 256);
  REQUIRE(ws > 0);
  CHECK(kernels::exl3_gemv_workspace_bytes(1, 200, 256) == 0);
  CHECK(kernels::exl3_gemv_workspace_bytes(33, 256, 256) == 0);
  cuda::DeviceBuffer w(ws);
  w.fill_bytes(0);
  kernels::Exl3GemvMatrix m{t.as<uint8_t>(), s.as<uint16_t>(), s.as<uint16_t>(),
                            x.as<float>(),   y.as<float>(),    1};
  const auto call = [&](kernels::Exl3GemvMatrix d, int64_t k, int K, size_t bytes) {
    return kernels::exl3_gemv(&d, 1, k, 256, K, Exl3Codebook::kMul1, 0, w.data(), bytes, nullptr);
  };
  CHECK(call(m, 256, 2, ws) == cudaSuccess);
  CHECK(call(m, 200, 2, ws) == cudaErrorInvalidValue);  // k % 128
  CHECK(call(m, 256, 4, ws) == cudaErrorInvalidValue);  // K not instantiated
  CHECK(call(m, 256, 2, ws - 1) == cudaErrorInvalidValue);
  auto bad = m;
  bad.rows = 17;
  CHECK(call(bad, 256, 2, ws) == cudaErrorInvalidValue);
  bad = m;
  bad.x = x.as<float>() + 1;  // misaligned
  CHECK(call(bad, 256, 2, ws) == cudaErrorInvalidValue);
  bad = m;
  bad.y = const_cast<float*>(m.x);  // aliasing
  CHECK(call(bad, 256, 2, ws) == cudaErrorInvalidValue);
  bad = m;
  bad.trellis = nullptr;
  CHECK(call(bad, 256, 2, ws) == cudaErrorInvalidValue);
  CHECK(kernels::exl3_gemv(&m, 0, 256, 256, 2, Exl3Codebook::kMul1, 0, w.data(), ws, nullptr) ==
        cudaErrorInvalidValue);
  CHECK(kernels::exl3_decode(t.as<uint8_t>(), y.as<uint16_t>(), 24, 16, 2, Exl3Codebook::kMul1,
                             nullptr) == cudaErrorInvalidValue);
  CHECK(kernels::exl3_decode(t.as<uint8_t>(), y.as<uint16_t>(), 16, 16, 7, Exl3Codebook::kMul1,
                             nullptr) == cudaErrorInvalidValue);
  CHECK(cudaDeviceSynchronize() == cudaSuccess);
}

}  // namespace dsv41::test
