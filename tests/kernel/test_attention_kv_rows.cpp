// [kernel] kv_norm_rope_quantize (one launch per row: RMSNorm, RoPE, KV quantisation) against
// (a) the CPU reference pipeline model/rms_norm + model/attention/rope + kv_quant + kv::pack
// (spec §2.2, §2.3, §2.7, §2.8): packed entries dequantised within one code step of the
// reference and nearly all bit-equal (the norm's fp64 sum order and fp64 cos/sin may move an
// input by an ulp, which can move a code across a rounding boundary), and (b) the three
// separately CPU-validated launches rms_norm, rope_rotate, kv_quantize, which it must equal bit
// for bit (same operations, same reduction tree). The window ring copy and untouched slots too.
#include <fmt/format.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <span>
#include <vector>

#include "backend/cuda/cuda_check.hpp"
#include "backend/cuda/cuda_stream.hpp"
#include "backend/cuda/device_buffer.hpp"
#include "config/model_config.hpp"
#include "dsv41k/attention.hpp"
#include "dsv41k/launchers.hpp"
#include "kernel/kernel_check.hpp"
#include "kv/packed_formats.hpp"
#include "model/attention/kv_quant.hpp"
#include "model/attention/rope.hpp"
#include "model/rms_norm.hpp"
#include "support/released_rope.hpp"

namespace dsv41::test {
namespace {

using kernels::KvFormat;

kv::EntryFormat cpu_format(KvFormat f) {
  if (f == KvFormat::kWindowFp8) return kv::EntryFormat::kWindowFp8;
  return f == KvFormat::kCompressedFp4 ? kv::EntryFormat::kCompressedFp4
                                       : kv::EntryFormat::kIndexFp4;
}

void cpu_fake_quant(KvFormat f, float* x, int64_t n) {
  if (f == KvFormat::kWindowFp8) fake_quant_window_fp8(x, n);
  if (f == KvFormat::kCompressedFp4) fake_quant_compressed_fp4(x, n);
  if (f == KvFormat::kIndexFp4) fake_quant_index_fp4(x, n);
}

struct Case {
  KvFormat f;
  int64_t rows, dim;
  bool norm, rope;
  int rope_dim;
  int64_t pos0, pos_step;
  int rows_per_position;
  bool values, packed;
  int64_t ring_capacity;  // 0: no ring
};

template <class T>
size_t count_diff(const std::vector<T>& a, const std::vector<T>& b, size_t* first) {
  size_t n = 0;
  for (size_t i = 0; i < a.size(); ++i)
    if (std::memcmp(&a[i], &b[i], sizeof(T)) != 0 && n++ == 0) *first = i;
  return n;
}

void run_rows(const Case& c) {
  const uint64_t seed = fresh_seed();
  std::mt19937_64 rng(seed);
  std::vector<float> x = random_normal(static_cast<size_t>(c.rows * c.dim), rng);
  for (size_t i = 0; i < x.size(); i += 37) x[i] *= 300.0f;  // outliers set block scales
  std::vector<float> w = random_normal(static_cast<size_t>(c.dim), rng);
  const std::vector<float> f = c.rope ? released_rope_table(c.f != KvFormat::kWindowFp8, c.rope_dim)
                                      : std::vector<float>(1, 0.0f);
  const float eps = 1e-6f;
  const int64_t rb = kernels::kv_packed_bytes(c.f, c.dim);
  const std::string ctx = fmt::format(
      "kv_norm_rope_quantize format {} rows {} dim {} norm {} rope {} pos0 {} step {} per-pos {} "
      "ring {} seed {:#x}",
      static_cast<int>(c.f), c.rows, c.dim, c.norm, c.rope, c.pos0, c.pos_step, c.rows_per_position,
      c.ring_capacity, seed);
  INFO(ctx);

  // CPU reference pipeline.
  std::vector<float> want = x;
  if (c.norm) rms_norm(x.data(), w.data(), c.rows, c.dim, eps, want.data());
  for (int64_t r = 0; r < c.rows && c.rope; ++r)
    rope_rotate(want.data() + r * c.dim + c.dim - c.rope_dim, f.data(), c.rope_dim,
                c.pos0 + (r / c.rows_per_position) * c.pos_step, false);
  for (int64_t r = 0; r < c.rows; ++r) cpu_fake_quant(c.f, want.data() + r * c.dim, c.dim);
  std::vector<uint8_t> want_packed(static_cast<size_t>(c.rows * rb));
  for (int64_t r = 0; r < c.rows; ++r)
    kv::pack(cpu_format(c.f), want.data() + r * c.dim, c.dim, want_packed.data() + r * rb);

  cuda::CudaStream stream;
  cuda::DeviceBuffer dx(x.size() * 4), dw(w.size() * 4), df(f.size() * 4), dq(x.size() * 4);
  cuda::DeviceBuffer dp(want_packed.size() + 1), dring(std::max<int64_t>(1, c.ring_capacity) * rb);
  cuda::DeviceBuffer sx(x.size() * 4), sq(x.size() * 4), sp(want_packed.size() + 1);
  dx.upload(std::span<const float>(x));
  sx.upload(std::span<const float>(x));
  dw.upload(std::span<const float>(w));
  df.upload(std::span<const float>(f));
  for (cuda::DeviceBuffer* b : {&dq, &dp, &dring, &sq, &sp}) b->fill_bytes(0xA5);
  kernels::KvRowOps ops;
  if (c.norm) ops.norm_w = dw.as<float>(), ops.eps = eps;
  if (c.rope) ops.inv_freq = df.as<float>(), ops.rope_dim = c.rope_dim;
  ops.pos0 = c.pos0;
  ops.pos_step = c.pos_step;
  ops.rows_per_position = c.rows_per_position;
  if (c.ring_capacity > 0) ops.ring = dring.as<uint8_t>(), ops.ring_capacity = c.ring_capacity;
  DSV41_CUDA_CHECK(kernels::kv_norm_rope_quantize(
      c.f, dx.as<float>(), ops, c.values ? dq.as<float>() : nullptr,
      c.packed ? dp.as<uint8_t>() : nullptr, c.rows, c.dim, stream.get()));
  // The same three steps as separate launches (each CPU-validated in its own test).
  float* s = sx.as<float>();
  if (c.norm)
    DSV41_CUDA_CHECK(kernels::rms_norm(s, dw.as<float>(), s, c.rows, c.dim, eps, stream.get()));
  if (c.rope)
    DSV41_CUDA_CHECK(kernels::rope_rotate(s, df.as<float>(), c.rows / c.rows_per_position,
                                          c.rows_per_position, static_cast<int>(c.dim), c.rope_dim,
                                          c.pos0, c.pos_step, false, stream.get()));
  DSV41_CUDA_CHECK(
      kernels::kv_quantize(c.f, s, sq.as<float>(), sp.as<uint8_t>(), c.rows, c.dim, stream.get()));
  stream.synchronize();

  std::vector<float> sep_q(x.size()), got_x(x.size());
  std::vector<uint8_t> sep_p(want_packed.size());
  sq.download(std::span<float>(sep_q));
  sp.download(std::span<uint8_t>(sep_p.data(), sep_p.size()));
  dx.download(std::span<float>(got_x));
  size_t first = 0;
  CHECK(count_diff(got_x, x, &first) == 0);  // x is not modified
  if (c.values) {
    std::vector<float> got(x.size());
    dq.download(std::span<float>(got));
    const size_t bad = count_diff(got, sep_q, &first);
    INFO(fmt::format("values vs the separate launches: {} of {} differ, first at {}: {} vs {}", bad,
                     got.size(), first, bad ? got[first] : 0.f, bad ? sep_q[first] : 0.f));
    CHECK(bad == 0);
    // vs the CPU pipeline: within one code step, at most 2/3 of the block's amax (e2m1 steps
    // are <= 2 scale units and a power-of-two scale is < amax/3; e4m3 steps are <= 2^-3 of a
    // value <= amax).
    const int block = kernels::kv_block_size(c.f);
    size_t off = 0, equal = 0;
    for (int64_t b = 0; b < c.rows * c.dim / block; ++b) {
      float amax = 0.0f;
      for (int i = 0; i < block; ++i) amax = std::max(amax, std::fabs(want[b * block + i]));
      for (int i = 0; i < block; ++i) {
        const size_t k = static_cast<size_t>(b * block + i);
        equal += got[k] == want[k];
        if (std::fabs(got[k] - want[k]) > 0.67 * amax + 1e-30 && off++ == 0) first = k;
      }
    }
    INFO(fmt::format(
        "values vs the CPU pipeline: {} beyond one code step (first at {}: {} vs {}), "
        "{} of {} bit-equal",
        off, first, off ? got[first] : 0.f, off ? want[first] : 0.f, equal, got.size()));
    CHECK(off == 0);
    CHECK(static_cast<double>(equal) >= 0.99 * static_cast<double>(got.size()));
  }
  if (c.packed) {
    std::vector<uint8_t> got(want_packed.size() + 1);
    dp.download(std::span<uint8_t>(got));
    CHECK(got.back() == 0xA5);  // nothing past the last row
    got.pop_back();
    const size_t bad = count_diff(got, sep_p, &first);
    INFO(fmt::format("packed vs the separate launches: {} of {} bytes differ, first at {} (row {})",
                     bad, got.size(), first, first / rb));
    CHECK(bad == 0);
    size_t equal = 0;
    for (size_t i = 0; i < got.size(); ++i) equal += got[i] == want_packed[i];
    INFO(fmt::format("packed vs kv::pack of the CPU pipeline: {} of {} bytes equal", equal,
                     got.size()));
    CHECK(static_cast<double>(equal) >= 0.99 * static_cast<double>(got.size()));
  }
  if (c.ring_capacity > 0) {
    std::vector<uint8_t> ring(static_cast<size_t>(c.ring_capacity * rb));
    dring.download(std::span<uint8_t>(ring));
    std::vector<int64_t> row_of_slot(static_cast<size_t>(c.ring_capacity), -1);
    for (int64_t r = 0; r < c.rows; ++r)  // later rows win a slot, as later positions do
      row_of_slot[static_cast<size_t>((c.pos0 + (r / c.rows_per_position) * c.pos_step) %
                                      c.ring_capacity)] = r;
    size_t bad = 0;
    for (int64_t slot = 0; slot < c.ring_capacity; ++slot) {
      const int64_t r = row_of_slot[static_cast<size_t>(slot)];
      for (int64_t i = 0; i < rb; ++i) {
        const uint8_t want_byte = r < 0 ? 0xA5 : sep_p[static_cast<size_t>(r * rb + i)];
        if (ring[static_cast<size_t>(slot * rb + i)] != want_byte && bad++ == 0)
          first = static_cast<size_t>(slot * rb + i);
      }
    }
    INFO(fmt::format("ring: {} bytes differ, first at slot {} byte {}", bad, first / rb,
                     first % rb));
    CHECK(bad == 0);
  }
}

}  // namespace

TEST_CASE("kv_norm_rope_quantize equals rms_norm, rope_rotate and kv_quantize",
          "[kernel][attention][kv]") {
  if (skip_without_gpu()) return;
  using F = KvFormat;
  for (int64_t T : {1, 7, 16}) {
    // K=V rows (§2.2 step 2): norm, main RoPE, FP8 into the call's rows and the window ring.
    run_rows({F::kWindowFp8, T, 512, true, true, 64, 4097, 1, 1, false, true, 144});
    // Index queries: RoPE (YaRN) of 32 heads per token, FP4 values in place of packing.
    run_rows({F::kIndexFp4, T * 32, 128, false, true, 64, 777, 1, 32, true, false, 0});
    // Index keys: norm, RoPE at compressed positions (ratio 2), FP4 packed.
    run_rows({F::kIndexFp4, T, 128, true, true, 64, 8192, 2, 1, false, true, 0});
    // Compressed entries: RoPE at ratio-4 positions, FP4 (e4m3 scales) packed.
    run_rows({F::kCompressedFp4, T, 512, false, true, 64, 40, 4, 1, true, true, 0});
  }
  run_rows({F::kWindowFp8, 333, 512, false, false, 0, 0, 1, 1, true, true, 0});  // quantise only
  run_rows({F::kIndexFp4, 5, 64, true, false, 0, 0, 1, 1, true, true, 0});       // norm only
  run_rows(
      {F::kWindowFp8, 3, 2048, true, true, 2048, 6, 1, 1, true, true, 4});  // widest, ring wraps
}

TEST_CASE("kv_norm_rope_quantize rejects unsupported arguments", "[kernel][attention][kv]") {
  float x[64] = {};
  float f[32] = {};
  uint8_t bytes[64] = {};
  using F = KvFormat;
  const cudaError_t inv = cudaErrorInvalidValue;
  const kernels::KvRowOps none;
  auto call = [&](F fmt, const kernels::KvRowOps& ops, int64_t rows, int64_t dim) {
    return kernels::kv_norm_rope_quantize(fmt, x, ops, nullptr, bytes, rows, dim, nullptr);
  };
  CHECK(kernels::kv_norm_rope_quantize(F::kWindowFp8, nullptr, none, nullptr, bytes, 1, 32,
                                       nullptr) == inv);
  CHECK(call(static_cast<F>(9), none, 1, 32) == inv);
  CHECK(call(F::kWindowFp8, none, -1, 32) == inv);
  CHECK(call(F::kWindowFp8, none, int64_t{1} << 32, 32) == inv);
  CHECK(call(F::kCompressedFp4, none, 1, 48) == inv);  // not whole warps
  CHECK(call(F::kWindowFp8, none, 1, 4096) == inv);    // wider than the staged row
  kernels::KvRowOps bad = none;
  bad.rows_per_position = 0;
  CHECK(call(F::kWindowFp8, bad, 1, 32) == inv);
  bad = none;
  bad.pos0 = -1;
  CHECK(call(F::kWindowFp8, bad, 1, 32) == inv);
  bad = none;
  bad.inv_freq = f;
  bad.rope_dim = 3;  // odd
  CHECK(call(F::kWindowFp8, bad, 1, 32) == inv);
  bad.rope_dim = 64;  // wider than the row
  CHECK(call(F::kWindowFp8, bad, 1, 32) == inv);
  bad = none;
  bad.ring = bytes;  // without a capacity
  CHECK(call(F::kWindowFp8, bad, 1, 32) == inv);
  CHECK(call(F::kWindowFp8, none, 0, 32) == cudaSuccess);  // nothing to do
}

}  // namespace dsv41::test
