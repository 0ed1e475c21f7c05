// Which CUDA devices this process can use, without throwing where there is no GPU or driver
// (kernel-tier tests skip on such hosts).
#pragma once

#include <string>

namespace dsv41::cuda {

// Number of usable devices; 0 when the driver is missing, too old, or sees no device.
int device_count();

struct DeviceInfo {
  std::string name;       // "NVIDIA H200"
  int compute_major = 0;  // 9 (H200), 12 (GB10)
  int compute_minor = 0;  // 0 (H200), 1 (GB10)
  int sm_count = 0;       // 132 (H200), 48 (GB10)
  size_t global_mem_bytes = 0;
  int memory_clock_khz = 0;
  int memory_bus_bits = 0;
};

// Properties of device `index`; throws Failure(kInvalidArgument) for an index out of range.
DeviceInfo device_info(int index);

// "NVIDIA H200, sm_90, 132 SMs, 139.8 GiB"
std::string describe(const DeviceInfo& info);

}  // namespace dsv41::cuda
