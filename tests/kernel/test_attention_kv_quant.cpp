// [kernel] kv_quantize vs the CPU reference (spec §2.7/§2.8): the fake-quantised values must be
// bit-equal to model/attention/kv_quant.cpp and the packed bytes byte-equal to kv::pack() of
// those values. Both are deterministic roundings of exact fp32 operations: no tolerance.
#include <fmt/format.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <span>
#include <vector>

#include "backend/cuda/cuda_check.hpp"
#include "backend/cuda/cuda_stream.hpp"
#include "backend/cuda/device_buffer.hpp"
#include "dsv41k/attention.hpp"
#include "kernel/kernel_check.hpp"
#include "kv/packed_formats.hpp"
#include "model/attention/kv_quant.hpp"

namespace dsv41::test {
namespace {

using kernels::KvFormat;

kv::EntryFormat cpu_format(KvFormat f) {
  switch (f) {
    case KvFormat::kWindowFp8:
      return kv::EntryFormat::kWindowFp8;
    case KvFormat::kCompressedFp4:
      return kv::EntryFormat::kCompressedFp4;
    default:
      return kv::EntryFormat::kIndexFp4;
  }
}

void cpu_fake_quant(KvFormat f, float* x, int64_t n) {
  if (f == KvFormat::kWindowFp8) fake_quant_window_fp8(x, n);
  if (f == KvFormat::kCompressedFp4) fake_quant_compressed_fp4(x, n);
  if (f == KvFormat::kIndexFp4) fake_quant_index_fp4(x, n);
}

// Blocks of very different magnitudes (2^-40 .. 2^12: below the 1e-4 and 6·2^-9 floors, e4m3
// subnormal codes, saturation-free large values), all-zero blocks, signed zeros, and blocks of
// exact e2m1 / e4m3 tie midpoints (amax 6·2^k makes the scale 2^k, so k·midpoint is a tie).
std::vector<float> kv_inputs(int64_t rows, int64_t dim, int block, std::mt19937_64& rng) {
  std::vector<float> x(static_cast<size_t>(rows * dim));
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::uniform_int_distribution<int> kind(0, 9), ex(-40, 12);
  static constexpr float kTies[] = {0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f, 0.125f};
  for (int64_t b = 0; b < rows * dim / block; ++b) {
    float* xb = x.data() + b * block;
    const int k = kind(rng);
    const float mag = std::ldexp(1.0f, ex(rng));
    for (int i = 0; i < block; ++i) {
      if (k == 0) {
        xb[i] = (i & 1) ? -0.0f : 0.0f;
      } else if (k == 1) {
        xb[i] = i == 0 ? 6.0f * mag : kTies[i % 8] * mag * ((i & 2) ? -1.0f : 1.0f);
      } else if (k == 2) {
        xb[i] = i == 0 ? 448.0f * mag : std::ldexp(static_cast<float>(17 + 2 * (i % 7)), -1) * mag;
      } else {
        xb[i] = nd(rng) * mag;
        if (i % 11 == 5) xb[i] = -0.0f;
      }
    }
  }
  return x;
}

void run_kv(KvFormat f, int64_t rows, int64_t dim, bool in_place, bool with_values,
            bool with_packed) {
  const uint64_t seed = fresh_seed();
  std::mt19937_64 rng(seed);
  const int block = kernels::kv_block_size(f);
  const std::vector<float> x = kv_inputs(rows, dim, block, rng);
  std::vector<float> want = x;
  for (int64_t r = 0; r < rows; ++r) cpu_fake_quant(f, want.data() + r * dim, dim);
  const int64_t row_bytes = kernels::kv_packed_bytes(f, dim);
  REQUIRE(row_bytes == kv::packed_bytes(cpu_format(f), dim));
  std::vector<uint8_t> want_packed(static_cast<size_t>(rows * row_bytes));
  for (int64_t r = 0; r < rows; ++r)
    kv::pack(cpu_format(f), want.data() + r * dim, dim, want_packed.data() + r * row_bytes);

  cuda::CudaStream stream;
  cuda::DeviceBuffer dx(x.size() * 4), dq(x.size() * 4), dp(want_packed.size());
  dx.upload(std::span<const float>(x));
  dq.fill_bytes(0xFF);
  dp.fill_bytes(0xA5);
  float* xq = with_values ? (in_place ? dx.as<float>() : dq.as<float>()) : nullptr;
  DSV41_CUDA_CHECK(kernels::kv_quantize(
      f, dx.as<float>(), xq, with_packed ? dp.as<uint8_t>() : nullptr, rows, dim, stream.get()));
  stream.synchronize();
  const std::string ctx = fmt::format("kv_quantize format {} rows {} dim {} in_place {} seed {:#x}",
                                      static_cast<int>(f), rows, dim, in_place, seed);
  INFO(ctx);
  if (with_values) {
    std::vector<float> got(x.size());
    (in_place ? dx : dq).download(std::span<float>(got));
    size_t bad = 0, first = 0;
    for (size_t i = 0; i < got.size(); ++i) {
      uint32_t g, w;
      std::memcpy(&g, &got[i], 4);
      std::memcpy(&w, &want[i], 4);
      if (g != w && bad++ == 0) first = i;
    }
    INFO(fmt::format("{} of {} values differ; first at {}: input {} got {} want {}", bad,
                     got.size(), first, x[first], got[first], want[first]));
    CHECK(bad == 0);
  }
  if (with_packed) {
    std::vector<uint8_t> got(want_packed.size());
    dp.download(std::span<uint8_t>(got));
    size_t bad = 0, first = 0;
    for (size_t i = 0; i < got.size(); ++i)
      if (got[i] != want_packed[i] && bad++ == 0) first = i;
    INFO(
        fmt::format("{} of {} packed bytes differ; first at {} (row {}, byte {}): got {:#04x} "
                    "want {:#04x}",
                    bad, got.size(), first, first / row_bytes, first % row_bytes, got[first],
                    want_packed[first]));
    CHECK(bad == 0);
  }
}

}  // namespace

TEST_CASE("kv_quantize matches kv_quant.cpp and kv::pack bit for bit", "[kernel][attention][kv]") {
  if (skip_without_gpu()) return;
  for (KvFormat f : {KvFormat::kWindowFp8, KvFormat::kCompressedFp4, KvFormat::kIndexFp4}) {
    const int64_t dim = f == KvFormat::kIndexFp4 ? 128 : 512;  // released widths
    for (int64_t rows : {1, 16, 333}) run_kv(f, rows, dim, false, true, true);
    run_kv(f, 3, kernels::kv_block_size(f), false, true, true);  // one block per row
    run_kv(f, 5, 3 * kernels::kv_block_size(f), false, true, true);
    run_kv(f, 16, dim, true, true, true);    // xq == x
    run_kv(f, 16, dim, false, false, true);  // packed only
    run_kv(f, 16, dim, false, true, false);  // values only
  }
}

TEST_CASE("kv_quantize rejects unsupported arguments", "[kernel][attention][kv]") {
  float dummy[64] = {};
  uint8_t bytes[64] = {};
  using kernels::kv_quantize;
  CHECK(kv_quantize(KvFormat::kWindowFp8, nullptr, dummy, bytes, 1, 32, nullptr) ==
        cudaErrorInvalidValue);
  CHECK(kv_quantize(KvFormat::kWindowFp8, dummy, dummy, bytes, -1, 32, nullptr) ==
        cudaErrorInvalidValue);
  CHECK(kv_quantize(KvFormat::kWindowFp8, dummy, dummy, bytes, 1, 16, nullptr) ==
        cudaErrorInvalidValue);  // not a block of 32
  CHECK(kv_quantize(KvFormat::kCompressedFp4, dummy, dummy, bytes, 1, 24, nullptr) ==
        cudaErrorInvalidValue);
  CHECK(kv_quantize(KvFormat::kIndexFp4, dummy, dummy, bytes, 1, 0, nullptr) ==
        cudaErrorInvalidValue);
  CHECK(kv_quantize(static_cast<KvFormat>(7), dummy, dummy, bytes, 1, 32, nullptr) ==
        cudaErrorInvalidValue);
  CHECK(kv_quantize(KvFormat::kWindowFp8, dummy, dummy, bytes, int64_t{1} << 50, 512, nullptr) ==
        cudaErrorInvalidValue);
  CHECK(kv_quantize(KvFormat::kWindowFp8, dummy, dummy, bytes, 0, 32, nullptr) == cudaSuccess);
  CHECK(kernels::kv_packed_bytes(KvFormat::kWindowFp8, 512) == 528);
  CHECK(kernels::kv_packed_bytes(KvFormat::kCompressedFp4, 512) == 288);
  CHECK(kernels::kv_packed_bytes(KvFormat::kIndexFp4, 128) == 68);
  CHECK(kernels::kv_packed_bytes(KvFormat::kIndexFp4, 100) == -1);
}

}  // namespace dsv41::test
