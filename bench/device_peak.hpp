// The peak figures the CUDA benches report their fractions against, by the card they run on: the
// lent machine is an H200 (4.8 TB/s) or an H100 SXM (3.35 TB/s), and a fraction against the other
// card's peak is off by 1.43x. Datasheet figures for the cards we know; otherwise the bandwidth
// from the memory clock x bus width (DDR: 2 transfers per clock) and no tensor peak.
#pragma once

#include <cstdio>
#include <string>

#include "backend/cuda/cuda_device.hpp"

namespace dsv41::bench {

struct DevicePeak {
  double gbs = 0;          // memory bandwidth, GB/s
  double bf16_tflops = 0;  // dense bf16 tensor peak (no sparsity); 0 = not known
  std::string source;      // where the figures come from, printed with them
};

inline DevicePeak device_peak(const cuda::DeviceInfo& info) {
  const auto has = [&](const char* s) { return info.name.find(s) != std::string::npos; };
  if (has("H200")) return {4800.0, 989.0, "H200 datasheet"};
  if (has("H100") && has("PCIe")) return {2000.0, 756.0, "H100 PCIe datasheet"};
  if (has("H100") && has("NVL")) return {3900.0, 835.0, "H100 NVL datasheet"};
  if (has("H100")) return {3350.0, 989.0, "H100 SXM datasheet"};
  // GB10: 273 GB/s LPDDR5X (spec/performance-anchors.md 2.1); its bf16 peak is not published.
  if (has("GB10")) return {273.0, 0.0, "GB10 spec"};
  const double gbs = 2.0 * info.memory_clock_khz * 1e3 * (info.memory_bus_bits / 8.0) / 1e9;
  return {gbs, 0.0, "memory clock x bus width"};
}

// "4.80 TB/s, bf16 989 TFLOP/s (H200 datasheet)"
inline std::string describe(const DevicePeak& p) {
  char s[160];
  if (p.bf16_tflops > 0)
    std::snprintf(s, sizeof s, "%.2f TB/s, bf16 %.0f TFLOP/s (%s)", p.gbs / 1000.0, p.bf16_tflops,
                  p.source.c_str());
  else
    std::snprintf(s, sizeof s, "%.2f TB/s, bf16 peak unknown (%s)", p.gbs / 1000.0,
                  p.source.c_str());
  return s;
}

}  // namespace dsv41::bench
