// Random routed-expert weights in the release format (packed E2M1 [out, in/2] + E8M0 [out, in/32])
// for the grouped-GEMV kernel tests: `sets` weight sets on the host and the device, local expert e
// using set e % sets (fewer uploads than one per expert).
#pragma once

#include <cstdint>
#include <random>
#include <span>
#include <utility>
#include <vector>

#include "backend/cuda/device_buffer.hpp"
#include "kernel/kernel_check.hpp"

namespace dsv41::test {

struct Fp4ExpertSets {
  std::vector<std::vector<uint8_t>> w, s;  // [set] host bytes
  std::vector<cuda::DeviceBuffer> dw, ds;  // [set] device copies
  std::vector<const uint8_t*> wt, st;      // [local expert] device pointers of its set

  // Draws every set's weight bytes, then its scales (random_e8m0), set by set; scale_bytes:
  // (index, byte) forced into every set's scales after the draw.
  Fp4ExpertSets(int sets, int n_local, int64_t out, int64_t in, std::mt19937_64& rng,
                const std::vector<std::pair<size_t, uint8_t>>& scale_bytes = {})
      : w(sets), s(sets), wt(n_local), st(n_local) {
    std::uniform_int_distribution<int> byte(0, 255);
    for (int i = 0; i < sets; ++i) {
      w[i].resize(size_t(out * in / 2));
      for (auto& b : w[i]) b = static_cast<uint8_t>(byte(rng));
      s[i] = random_e8m0(size_t(out * (in / 32)), rng);
      for (const auto& [at, v] : scale_bytes) s[i].at(at) = v;
      dw.emplace_back(w[i].size());
      ds.emplace_back(s[i].size());
      dw.back().upload(std::span<const uint8_t>(w[i]));
      ds.back().upload(std::span<const uint8_t>(s[i]));
    }
    for (int e = 0; e < n_local; ++e) {
      wt[e] = dw[e % sets].as<uint8_t>();
      st[e] = ds[e % sets].as<uint8_t>();
    }
  }
  const std::vector<uint8_t>& weights(int e) const { return w[e % w.size()]; }
  const std::vector<uint8_t>& scales(int e) const { return s[e % s.size()]; }
};

}  // namespace dsv41::test
