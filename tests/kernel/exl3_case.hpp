// Random EXL3 matrices and the error bound of the fused GEMV against exl3::matmul, shared by the
// exl3_gemv and moe_grouped_exl3_gemv kernel tests.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <span>
#include <vector>

#include "backend/cuda/device_buffer.hpp"
#include "exl3/exl3_linear.hpp"
#include "exl3/hadamard.hpp"
#include "quant/dtype.hpp"

namespace dsv41::test {

using exl3::Codebook;

// Host copy of one random EXL3 matrix and its Exl3Tensor view (no file: the CPU functions only
// read the fields).
struct Matrix {
  int64_t k, n;
  int K;
  Codebook cb;
  std::vector<uint8_t> trellis;
  std::vector<uint16_t> suh, svh;  // fp16 bits
  exl3::Exl3Tensor view() const {
    exl3::Exl3Tensor t;
    t.k = k, t.n = n, t.K = K, t.codebook = cb;
    t.trellis = trellis.data();
    t.suh = {reinterpret_cast<const uint8_t*>(suh.data()), false, k};
    t.svh = {reinterpret_cast<const uint8_t*>(svh.data()), false, n};
    return t;
  }
};

// Uniform random bits (every state reachable); signs ±, magnitudes 2^-3 .. 2^1 like folded
// channel scales.
inline Matrix random_matrix(int64_t k, int64_t n, int K, Codebook cb, std::mt19937_64& rng) {
  Matrix m{k, n, K, cb, {}, {}, {}};
  m.trellis.resize(static_cast<size_t>(k * n * K / 8));
  for (auto& b : m.trellis) b = static_cast<uint8_t>(rng());
  std::uniform_real_distribution<float> mag(-3.0f, 1.0f);
  auto sv = [&](int64_t len) {
    std::vector<uint16_t> v(static_cast<size_t>(len));
    for (auto& h : v) h = f32_to_f16(((rng() & 1) ? -1.0f : 1.0f) * std::exp2(mag(rng)));
    return v;
  };
  m.suh = sv(k);
  m.svh = sv(n);
  return m;
}

// Per-element bound of |y_gpu - y_cpu| for one row: B[c] = |svh_c|/sqrt(128) · Σ_{j in c's
// 128-block} Σ_i |xh_i · Ŵ_ij| bounds |y| and every rounding scale. ε sums: the f16 hi+lo split
// of xh (2^-21 relative), worst-case linear accumulation error of the tensor cores' fp32 adds
// (one 2^-23 per k16 step) and of the CPU's fp32 loop (k/16 tile sums + 16 adds, 2^-24 each), and
// the 7 output butterflies + 2 products on both sides (16 · 2^-24). An index or decode error
// moves an output by ~|x·w| ≈ B/sqrt(k) ≥ 1.4e-2 · B at k = 5120, far above ε ≤ 6e-5.
inline std::vector<double> y_bounds(const Matrix& m, const std::vector<float>& w_hat,
                                    const std::vector<float>& x, int rows) {
  const size_t k = static_cast<size_t>(m.k), n = static_cast<size_t>(m.n);
  const double eps = std::ldexp(1.0, -21) + static_cast<double>(k / 16) * std::ldexp(1.0, -23) +
                     static_cast<double>(k / 16 + 16) * std::ldexp(1.0, -24) +
                     16 * std::ldexp(1.0, -24);
  std::vector<double> tol(rows * n);
  std::vector<float> xh(k);
  std::vector<double> a(n);
  for (int r = 0; r < rows; ++r) {
    for (size_t i = 0; i < k; ++i) xh[i] = x[r * k + i] * f16_to_f32(m.suh[i]);
    exl3::hadamard128_blocks(xh.data(), k);
    std::fill(a.begin(), a.end(), 0.0);
    for (size_t i = 0; i < k; ++i) {
      const double xa = std::fabs(xh[i]);
      const float* wr = &w_hat[i * n];
      for (size_t j = 0; j < n; ++j) a[j] += xa * std::fabs(wr[j]);
    }
    for (size_t b = 0; b < n; b += 128) {
      double s = 0;
      for (size_t j = b; j < b + 128; ++j) s += a[j];
      for (size_t j = b; j < b + 128; ++j)
        tol[r * n + j] = eps * s * std::fabs(f16_to_f32(m.svh[j])) / std::sqrt(128.0) + 1e-30;
    }
  }
  return tol;
}

// NMSE bound: the expected error is ~sqrt(k/16) · 2^-24 relative (random rounding), NMSE ~1e-13;
// 1e-9 leaves four orders of margin, while one wrong tile gives > 1e-4.
constexpr double kMaxNmse = 1e-9;

struct Case {
  Matrix m;
  std::vector<float> w_hat;  // f32 of exl3::decode_inner
};

inline Case make_case(int64_t k, int64_t n, int K, Codebook cb, std::mt19937_64& rng) {
  Case c{random_matrix(k, n, K, cb, rng), {}};
  const std::vector<uint16_t> inner = exl3::decode_inner(c.m.view());
  c.w_hat.resize(inner.size());
  for (size_t i = 0; i < inner.size(); ++i) c.w_hat[i] = f16_to_f32(inner[i]);
  return c;
}

// A Matrix's trellis and sign·scale vectors in device memory.
struct DeviceMatrix {
  cuda::DeviceBuffer trellis, suh, svh;
  explicit DeviceMatrix(const Matrix& m)
      : trellis(m.trellis.size()), suh(m.suh.size() * 2), svh(m.svh.size() * 2) {
    trellis.upload(std::span<const uint8_t>(m.trellis));
    suh.upload(std::span<const uint16_t>(m.suh));
    svh.upload(std::span<const uint16_t>(m.svh));
  }
};

}  // namespace dsv41::test
