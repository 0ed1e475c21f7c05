// Shared pieces of the [kernel] tests: the no-GPU skip, seeded random inputs, and the comparison
// of a device result with the CPU reference (NMSE plus a per-element bound, both printed).
#pragma once

#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "backend/cuda/cuda_device.hpp"

namespace dsv41::test {

// True (after a visible WARN) when this host has no CUDA device: the caller returns.
inline bool skip_without_gpu() {
  if (cuda::device_count() > 0) return false;
  WARN("SKIP: no CUDA device visible; [kernel] tests need a GPU (scripts/gpu-test.sh)");
  return true;
}

// Fresh seed per run (printed by the checks), so repeated runs draw different inputs;
// DSV41_TEST_SEED (decimal or 0x hex) replays a printed one.
inline uint64_t fresh_seed() {
  if (const char* env = std::getenv("DSV41_TEST_SEED"); env != nullptr && *env != '\0')
    return std::strtoull(env, nullptr, 0);
  std::random_device rd;
  return (static_cast<uint64_t>(rd()) << 32) | rd();
}

inline std::vector<float> random_normal(size_t n, std::mt19937_64& rng) {
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

// E8M0 scales drawn from 2^-20 .. 2^12: products stay normal fp32, so the kernel's
// (Σ w·x)·s and the reference's Σ (w·s)·x differ only by summation order.
inline std::vector<uint8_t> random_e8m0(size_t n, std::mt19937_64& rng) {
  std::uniform_int_distribution<int> d(127 - 20, 127 + 12);
  std::vector<uint8_t> v(n);
  for (auto& b : v) b = static_cast<uint8_t>(d(rng));
  return v;
}

// e4m3 bytes over the 254 finite codes, or all 256 when `nan` (0x7F / 0xFF are NaN and would
// poison whole rows of a GEMV).
inline std::vector<uint8_t> random_e4m3(size_t n, std::mt19937_64& rng, bool nan = false) {
  std::uniform_int_distribution<int> d(0, 255);
  std::vector<uint8_t> v(n);
  for (auto& b : v) {
    do b = static_cast<uint8_t>(d(rng));
    while (!nan && (b & 0x7F) == 0x7F);
  }
  return v;
}

// got vs want[i] with per-element bound tol[i]; NMSE = Σ(g-w)² / Σw² must stay <= max_nmse.
// Prints shape context, seed, NMSE, the worst element and the first values on failure.
inline void require_match(const std::string& what, const std::vector<float>& got,
                          const std::vector<float>& want, const std::vector<double>& tol,
                          double max_nmse) {
  REQUIRE(got.size() == want.size());
  double err2 = 0, ref2 = 0, worst_ratio = 0;
  size_t worst = 0, bad = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double g = got[i], w = want[i], d = std::fabs(g - w);
    err2 += (g - w) * (g - w);
    ref2 += w * w;
    const double ratio = std::isfinite(d) ? d / tol[i] : INFINITY;
    if (!(ratio <= 1.0)) ++bad;
    if (!(ratio <= worst_ratio)) {
      worst_ratio = ratio;
      worst = i;
    }
  }
  const double nmse = ref2 > 0 ? err2 / ref2 : err2;
  std::ostringstream msg;
  msg << what << ": NMSE " << nmse << " (max " << max_nmse << "), " << bad << " of " << got.size()
      << " elements over their bound; worst index " << worst << " got " << got[worst] << " want "
      << want[worst] << " |diff| " << std::fabs(double(got[worst]) - want[worst]) << " bound "
      << tol[worst] << "; first got/want:";
  for (size_t i = 0; i < std::min<size_t>(4, got.size()); ++i)
    msg << ' ' << got[i] << '/' << want[i];
  INFO(msg.str());
  REQUIRE(bad == 0);
  REQUIRE(nmse <= max_nmse);
}

}  // namespace dsv41::test
