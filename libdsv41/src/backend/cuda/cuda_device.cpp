#include "backend/cuda/cuda_device.hpp"

#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include "backend/cuda/cuda_check.hpp"

namespace dsv41::cuda {

int device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    (void)cudaGetLastError();  // clear the non-sticky error so later calls start clean
    return 0;
  }
  return n;
}

DeviceInfo device_info(int index) {
  const int n = device_count();
  DSV41_CHECK(index >= 0 && index < n, kInvalidArgument, "CUDA device {} requested, {} present",
              index, n);
  DeviceInfo d;
  cudaDeviceProp p{};
  DSV41_CUDA_CHECK(cudaGetDeviceProperties(&p, index));
  d.name = p.name;
  d.compute_major = p.major;
  d.compute_minor = p.minor;
  d.sm_count = p.multiProcessorCount;
  d.global_mem_bytes = p.totalGlobalMem;
  DSV41_CUDA_CHECK(cudaDeviceGetAttribute(&d.memory_clock_khz, cudaDevAttrMemoryClockRate, index));
  DSV41_CUDA_CHECK(
      cudaDeviceGetAttribute(&d.memory_bus_bits, cudaDevAttrGlobalMemoryBusWidth, index));
  return d;
}

std::string describe(const DeviceInfo& info) {
  return fmt::format("{}, sm_{}{}, {} SMs, {:.1f} GiB", info.name, info.compute_major,
                     info.compute_minor, info.sm_count,
                     static_cast<double>(info.global_mem_bytes) / (1u << 30));
}

}  // namespace dsv41::cuda
