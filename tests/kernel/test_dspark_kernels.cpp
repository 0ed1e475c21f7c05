// [kernel] The DSpark draft module's own kernels (dsv41k/dspark.hpp) vs their CPU references in
// model/dspark/dspark_ops.hpp (spec §6): the target-feature mean (bit-equal), the block attention
// core on packed FP8 context / block rows (bounded rounding), the Markov step (the same token,
// bounded confidence), and the rejected arguments.
#include <fmt/format.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <random>
#include <span>
#include <vector>

#include "backend/cuda/cuda_check.hpp"
#include "backend/cuda/cuda_stream.hpp"
#include "backend/cuda/device_buffer.hpp"
#include "dsv41k/dspark.hpp"
#include "kernel/kernel_check.hpp"
#include "kv/packed_formats.hpp"
#include "model/attention/kv_quant.hpp"
#include "model/attention/rope.hpp"
#include "model/dspark/dspark_ops.hpp"

namespace dsv41::test {
namespace {

template <typename T>
cuda::DeviceBuffer to_device(const std::vector<T>& v) {
  cuda::DeviceBuffer b(std::max<size_t>(v.size() * sizeof(T), 16));
  if (!v.empty()) b.upload(v.data(), v.size() * sizeof(T));
  return b;
}

template <typename T>
std::vector<T> from_device(const cuda::DeviceBuffer& b, size_t n) {
  std::vector<T> v(n);
  b.download(v.data(), n * sizeof(T));
  return v;
}

// FP8-rounded K=V rows [n, D] (fake_quant_window_fp8) and their packed form.
struct PackedRows {
  std::vector<float> values;
  std::vector<uint8_t> packed;
};

PackedRows fp8_rows(int64_t n, int64_t D, std::mt19937_64& rng) {
  PackedRows r;
  r.values = random_normal(static_cast<size_t>(n * D), rng);
  const int64_t bytes = kv::packed_bytes(kv::EntryFormat::kWindowFp8, D);
  r.packed.resize(static_cast<size_t>(n * bytes));
  for (int64_t i = 0; i < n; ++i) {
    fake_quant_window_fp8(r.values.data() + i * D, D);
    kv::pack(kv::EntryFormat::kWindowFp8, r.values.data() + i * D, D, r.packed.data() + i * bytes);
  }
  return r;
}

struct AttendCase {
  int64_t K;
  int H, D, R, W, capacity;
  int64_t pos0;
};

void run_attend(const AttendCase& c) {
  const uint64_t seed = fresh_seed();
  std::mt19937_64 rng(seed);
  const int64_t K = c.K, D = c.D;
  const int64_t first = std::max<int64_t>(0, c.pos0 - c.W), n_ctx = c.pos0 - first;
  // The ring: every slot filled (stale slots must not be read), position p in slot p % capacity.
  const PackedRows ring = fp8_rows(c.capacity, D, rng);
  const PackedRows block = fp8_rows(K, D, rng);
  std::vector<float> q = random_normal(static_cast<size_t>(K * c.H * D), rng);
  std::vector<float> sink = random_normal(static_cast<size_t>(c.H), rng);
  const std::vector<float> inv_freq = rope_inv_freq_default(10000.0, c.R);
  std::vector<const float*> ctx;
  for (int64_t p = first; p < c.pos0; ++p) ctx.push_back(ring.values.data() + (p % c.capacity) * D);
  std::vector<float> want(q.size());
  dspark_attend(q.data(), ctx.data(), n_ctx, block.values.data(), sink.data(), inv_freq.data(), K,
                c.H, D, c.R, c.pos0, want.data());

  cuda::CudaStream stream;
  auto dq = to_device(q);
  auto dring = to_device(ring.packed);
  auto dblock = to_device(block.packed);
  auto dsink = to_device(sink);
  auto dfreq = to_device(inv_freq);
  cuda::DeviceBuffer dout(q.size() * 4);
  dout.fill_bytes(0xFF);
  const float scale = 1.0f / std::sqrt(static_cast<float>(D));
  REQUIRE(kernels::dspark_block_attention(
              dq.as<float>(), n_ctx > 0 ? dring.as<uint8_t>() : nullptr, c.capacity, first, n_ctx,
              dblock.as<uint8_t>(), dsink.as<float>(), dfreq.as<float>(), dout.as<float>(), K, c.H,
              c.D, c.R, c.pos0, scale, stream.get()) == cudaSuccess);
  stream.synchronize();
  const std::vector<float> got = from_device<float>(dout, q.size());

  // Bound (u = 2^-24, Kmax = max |key|, B = scale·Kmax·max Σ|q|): the scores' two summation
  // orders differ by <= delta = 2·D·u·B; each weight p_j then by <= 2·delta + (n + 8)·u relative
  // (expf vs exp, the denominator's sum, the division); o sums n terms of p_j·k, so it differs by
  // that times Kmax plus n·u·Kmax; the inverse rotation doubles it and adds its cos/sin ulp.
  const int64_t n = n_ctx + K;
  double kmax = 0, qsum = 0;
  for (const float* r : ctx)
    for (int64_t i = 0; i < D; ++i) kmax = std::max(kmax, double(std::fabs(r[i])));
  for (float v : block.values) kmax = std::max(kmax, double(std::fabs(v)));
  for (int64_t r = 0; r < K * c.H; ++r) {
    double s = 0;
    for (int64_t i = 0; i < D; ++i) s += std::fabs(q[r * D + i]);
    qsum = std::max(qsum, s);
  }
  const double u = std::ldexp(1.0, -24), delta = 2.0 * D * u * scale * kmax * qsum;
  const double rel = 2 * delta + (n + 8) * u;
  const double bound = 2 * (rel * kmax + n * u * kmax) + std::ldexp(1.0, -21) * kmax;
  INFO(fmt::format("seed {:#x} K {} H {} D {} R {} W {} capacity {} pos0 {} (context rows {})",
                   seed, K, c.H, D, c.R, c.W, c.capacity, c.pos0, n_ctx));
  require_match("dspark_block_attention", got, want, std::vector<double>(got.size(), bound), 1e-9);
}

}  // namespace

TEST_CASE("dspark kernels: hc_stream_mean is bit-equal to the CPU mean, strided into the taps",
          "[kernel]") {
  if (skip_without_gpu()) return;
  const uint64_t seed = fresh_seed();
  std::mt19937_64 rng(seed);
  for (const auto& [T, hc, D] :
       {std::tuple<int64_t, int, int64_t>{1, 4, 64}, {7, 4, 5120}, {3, 1, 33}, {2, 8, 100}}) {
    const int64_t taps = 3, k = 1, stride = taps * D;
    const std::vector<float> H = random_normal(static_cast<size_t>(T * hc * D), rng);
    std::vector<float> want(static_cast<size_t>(T * stride), -7.0f);
    hc_stream_mean(H.data(), T, hc, D, want.data() + k * D, stride);
    cuda::CudaStream stream;
    auto dH = to_device(H);
    auto dout = to_device(std::vector<float>(want.size(), -7.0f));
    REQUIRE(kernels::hc_stream_mean(dH.as<float>(), T, hc, D, dout.as<float>() + k * D, stride,
                                    stream.get()) == cudaSuccess);
    stream.synchronize();
    const std::vector<float> got = from_device<float>(dout, want.size());
    INFO(fmt::format("seed {:#x} T {} hc {} D {}", seed, T, hc, D));
    size_t bad = 0, at = 0;
    for (size_t i = 0; i < got.size(); ++i)
      if (std::memcmp(&got[i], &want[i], 4) != 0 && bad++ == 0) at = i;
    INFO(
        fmt::format("{} differing values; first at {} got {} want {}", bad, at, got[at], want[at]));
    REQUIRE(bad == 0);
  }
}

TEST_CASE("dspark kernels: block attention matches dspark_attend (context ring, no causal mask)",
          "[kernel]") {
  if (skip_without_gpu()) return;
  SECTION("tiny, the ring wraps") { run_attend({5, 2, 64, 16, 8, 10, 20}); }
  SECTION("no context yet (pos0 0)") { run_attend({5, 3, 64, 16, 8, 10, 0}); }
  SECTION("shorter context than the window") { run_attend({4, 2, 32, 2, 8, 9, 3}); }
  SECTION("one block row, head_dim 1024") { run_attend({1, 2, 1024, 64, 4, 6, 11}); }
  SECTION("released sizes: 5 rows, 64 heads of 512, window 128") {
    run_attend({5, 64, 512, 64, 128, 133, 1000});
  }
}

TEST_CASE("dspark kernels: the Markov step picks the reference's token and confidence",
          "[kernel]") {
  if (skip_without_gpu()) return;
  const uint64_t seed = fresh_seed();
  std::mt19937_64 rng(seed);
  struct Case {
    int64_t V, D, R;
    const char* what;
  };
  for (const Case& c : {Case{129280, 5120, 256, "released sizes"}, Case{1000, 64, 16, "tiny"},
                        Case{1000, 64, 16, "tie"}, Case{1000, 64, 16, "NaN and -inf"},
                        Case{50, 8, 4, "nothing beats -inf"}}) {
    std::vector<float> u = random_normal(static_cast<size_t>(c.V), rng);
    std::vector<float> m = random_normal(static_cast<size_t>(c.V), rng);
    const std::string what = c.what;
    if (what == "tie") {  // the same maximal sum at 700 and 300: the first one wins
      u[700] = u[300] = 40.0f;
      m[700] = m[300] = 1.0f;
    } else if (what == "NaN and -inf") {
      u[5] = NAN;
      m[6] = -INFINITY;
      u[7] = INFINITY;
      m[7] = -INFINITY;  // inf + -inf = NaN
      m[8] = 100.0f;     // the winner
    } else if (what == "nothing beats -inf") {
      for (int64_t v = 0; v < c.V; ++v) u[v] = v % 2 ? NAN : -INFINITY;
    }
    const std::vector<float> h = random_normal(static_cast<size_t>(c.D), rng);
    const std::vector<float> e = random_normal(static_cast<size_t>(c.R), rng);
    std::vector<float> w = random_normal(static_cast<size_t>(c.D + c.R), rng);
    for (float& x : w) x *= 0.02f;
    const int32_t want_id = dspark_markov_pick(u.data(), m.data(), c.V);
    const float want_c = dspark_confidence(w.data(), h.data(), c.D, e.data(), c.R);
    cuda::CudaStream stream;
    auto du = to_device(u);
    auto dm = to_device(m);
    auto dh = to_device(h);
    auto de = to_device(e);
    auto dw = to_device(w);
    const int k = 2;
    auto ids = to_device(std::vector<int32_t>(k + 2, -5));
    auto conf = to_device(std::vector<float>(k + 1, -5.0f));
    REQUIRE(kernels::dspark_markov_step(
                du.as<float>(), dm.as<float>(), dh.as<float>(), de.as<float>(), dw.as<float>(), c.V,
                c.D, c.R, k, ids.as<int32_t>(), conf.as<float>(), stream.get()) == cudaSuccess);
    stream.synchronize();
    const std::vector<int32_t> got_ids = from_device<int32_t>(ids, k + 2);
    const std::vector<float> got_c = from_device<float>(conf, k + 1);
    // z's two summation orders differ by <= 2·(D + R)·u·Σ|w·x|; sigmoid' <= 1/4; expf 2 ulp.
    double zabs = 0;
    for (int64_t i = 0; i < c.D + c.R; ++i) zabs += std::fabs(w[i] * (i < c.D ? h[i] : e[i - c.D]));
    const double tol = 0.5 * (c.D + c.R) * std::ldexp(1.0, -24) * zabs + 4 * std::ldexp(1.0, -24);
    INFO(fmt::format("{}: seed {:#x} V {} id got {} want {}; confidence got {} want {} (bound {})",
                     c.what, seed, c.V, got_ids[k + 1], want_id, got_c[k], want_c, tol));
    REQUIRE(got_ids[k + 1] == want_id);
    REQUIRE(got_ids[0] == -5);  // only ids[k + 1] and conf[k] are written
    REQUIRE(got_c[0] == -5.0f);
    REQUIRE(std::fabs(double(got_c[k]) - want_c) <= tol);
  }
}

TEST_CASE("dspark kernels: arguments outside the preconditions are refused before any launch",
          "[kernel]") {
  if (skip_without_gpu()) return;
  cuda::CudaStream stream;
  cuda::DeviceBuffer a(1 << 20), b(1 << 20), o(1 << 20);
  const float* f = a.as<float>();
  const uint8_t* u8 = b.as<uint8_t>();
  float* out = o.as<float>();
  cudaStream_t s = stream.get();
  using kernels::dspark_block_attention;
  // head_dim not a multiple of 32; odd rope_dim; context longer than the ring; no ring; too many
  // keys; a null block; K = 0.
  CHECK(dspark_block_attention(f, u8, 8, 0, 4, u8, f, f, out, 5, 2, 48, 16, 4, 1, s) ==
        cudaErrorInvalidValue);
  CHECK(dspark_block_attention(f, u8, 8, 0, 4, u8, f, f, out, 5, 2, 64, 15, 4, 1, s) ==
        cudaErrorInvalidValue);
  CHECK(dspark_block_attention(f, u8, 3, 0, 4, u8, f, f, out, 5, 2, 64, 16, 4, 1, s) ==
        cudaErrorInvalidValue);
  CHECK(dspark_block_attention(f, nullptr, 8, 0, 4, u8, f, f, out, 5, 2, 64, 16, 4, 1, s) ==
        cudaErrorInvalidValue);
  CHECK(dspark_block_attention(f, u8, 9000, 0, kernels::kDsparkMaxKeys, u8, f, f, out, 5, 2, 64, 16,
                               9000, 1, s) == cudaErrorInvalidValue);
  CHECK(dspark_block_attention(f, u8, 8, 0, 4, nullptr, f, f, out, 5, 2, 64, 16, 4, 1, s) ==
        cudaErrorInvalidValue);
  CHECK(dspark_block_attention(f, u8, 8, 0, 4, u8, f, f, out, 0, 2, 64, 16, 4, 1, s) ==
        cudaErrorInvalidValue);
  int32_t* ids = reinterpret_cast<int32_t*>(out);
  CHECK(kernels::dspark_markov_step(f, f, f, f, f, 0, 4, 4, 0, ids, out, s) ==
        cudaErrorInvalidValue);
  CHECK(kernels::dspark_markov_step(f, f, f, f, f, 10, 4, 0, 0, ids, out, s) ==
        cudaErrorInvalidValue);
  CHECK(kernels::dspark_markov_step(f, f, f, f, f, 10, 4, 4, -1, ids, out, s) ==
        cudaErrorInvalidValue);
  CHECK(kernels::dspark_markov_step(f, nullptr, f, f, f, 10, 4, 4, 0, ids, out, s) ==
        cudaErrorInvalidValue);
  CHECK(kernels::hc_stream_mean(f, 2, 4, 8, out, 7, s) == cudaErrorInvalidValue);
  CHECK(kernels::hc_stream_mean(f, 2, 9, 8, out, 8, s) == cudaErrorInvalidValue);
  CHECK(kernels::hc_stream_mean(nullptr, 2, 4, 8, out, 8, s) == cudaErrorInvalidValue);
}

}  // namespace dsv41::test
