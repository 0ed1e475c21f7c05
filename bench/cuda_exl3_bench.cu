// Bandwidth of exl3_gemv (fused EXL3 decode GEMV, kernels/exl3/) at routed-expert shapes: one
// matrix per call and the decode MoE batches (gate+up of 6 experts = 12 matrices [5120 -> 2304],
// down of 6 experts = 6 matrices [2304 -> 5120]). Bytes = trellis + suh + svh + x + y (the
// fewest one call must move); GB/s of the trellis bytes alone is printed too. Time = median of
// CUDA-event timings of a CUDA graph of back-to-back calls rotating through >= 256 MB of weight
// copies (no L2 reuse), divided by the calls. Usage: dsv41_bench_cuda_exl3 [repeats=30]
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <vector>

#include "backend/cuda/cuda_device.hpp"
#include "backend/cuda/cuda_stream.hpp"
#include "backend/cuda/device_buffer.hpp"
#include "backend/cuda/event_timer.hpp"
#include "bench_main.hpp"
#include "device_peak.hpp"
#include "dsv41k/launchers.hpp"
#include "graph_timing.hpp"

namespace {

using dsv41::cuda::CudaStream;
using dsv41::cuda::DeviceBuffer;
using dsv41::cuda::EventTimer;
namespace dk = dsv41::kernels;

void check(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return;
  std::fprintf(stderr, "dsv41_bench_cuda_exl3: %s: %s\n", what, cudaGetErrorString(e));
  std::exit(1);
}
#define BENCH_CHECK(expr) check((expr), #expr)

__global__ void fill_u32(uint32_t* p, size_t n, uint32_t seed) {
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n;
       i += size_t{gridDim.x} * blockDim.x) {
    uint32_t z = static_cast<uint32_t>(i) * 0x9E3779B9u + seed;
    z ^= z >> 16;
    z *= 0x85EBCA6Bu;
    z ^= z >> 13;
    p[i] = z;
  }
}
// fp16 ±0.5 .. ±1 sign/scale vectors; x in [-1, 1).
__global__ void fill_scale(uint16_t* p, size_t n) {
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n;
       i += size_t{gridDim.x} * blockDim.x)
    p[i] = static_cast<uint16_t>(((i * 2654435761u >> 7) & 1 ? 0xB800u : 0x3C00u) | (i & 0x1FFu));
}
__global__ void fill_x(float* p, size_t n) {
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n;
       i += size_t{gridDim.x} * blockDim.x)
    p[i] = static_cast<float>((i * 2654435761u >> 9) % 2001) / 1000.0f - 1.0f;
}

struct Result {
  double us, gbs_all, gbs_trellis;
  size_t ws;
};

Result bench(int matrices, int64_t k, int64_t n, int K, int rows, int splits, int repeats,
             cudaStream_t s) {
  const size_t tb = size_t(k) * n * K / 8;
  const int copies =
      static_cast<int>(std::max<size_t>(3, (size_t{256} << 20) / (tb * matrices) + 1));
  std::vector<DeviceBuffer> bufs;
  DeviceBuffer suh(size_t(k) * 2), svh(size_t(n) * 2), x(size_t(rows) * k * 4);
  fill_scale<<<64, 256>>>(suh.as<uint16_t>(), size_t(k));
  fill_scale<<<64, 256>>>(svh.as<uint16_t>(), size_t(n));
  fill_x<<<64, 256>>>(x.as<float>(), size_t(rows) * k);
  std::vector<DeviceBuffer> ys;
  for (int m = 0; m < matrices; ++m) ys.emplace_back(size_t(rows) * n * 4);
  std::vector<std::vector<dk::Exl3GemvMatrix>> desc(copies);
  for (int c = 0; c < copies; ++c) {
    for (int m = 0; m < matrices; ++m) {
      bufs.emplace_back(tb);
      fill_u32<<<1024, 256>>>(bufs.back().as<uint32_t>(), tb / 4, 77u * c + m);
      desc[c].push_back({bufs.back().as<uint8_t>(), suh.as<uint16_t>(), svh.as<uint16_t>(),
                         x.as<float>(), ys[m].as<float>(), rows});
    }
  }
  BENCH_CHECK(cudaGetLastError());
  const size_t wsb = dk::exl3_gemv_workspace_bytes(matrices, k, n, splits);
  DeviceBuffer ws(std::max<size_t>(wsb, 16));
  ws.fill_bytes(0);
  const auto launch = [&](int c) {
    BENCH_CHECK(dk::exl3_gemv(desc[c].data(), matrices, k, n, K, dk::Exl3Codebook::kMul1, splits,
                              ws.data(), wsb, s));
  };
  const float med = dsv41::bench::graph_median_ms(launch, copies, repeats, s);
  Result res;
  res.us = med * 1e3;
  const double all = double(matrices) * (tb + 2.0 * (k + n) + 4.0 * rows * (k + n));
  res.gbs_all = all / (res.us * 1e-6) / 1e9;
  res.gbs_trellis = double(matrices) * tb / (res.us * 1e-6) / 1e9;
  res.ws = wsb;
  return res;
}

int run(int repeats) {
  if (dsv41::cuda::device_count() == 0) {
    std::fprintf(stderr, "dsv41_bench_cuda_exl3: no CUDA device\n");
    return 2;
  }
  const auto info = dsv41::cuda::device_info(0);
  const dsv41::bench::DevicePeak peak = dsv41::bench::device_peak(info);
  std::printf("device: %s; peak %s\n", dsv41::cuda::describe(info).c_str(),
              dsv41::bench::describe(peak).c_str());
  std::printf("%-34s %2s %4s %6s %9s %9s %9s %8s\n", "case (mul1)", "K", "rows", "splits",
              "us(graph)", "GB/s all", "GB/s trel", "%peak");
  CudaStream stream;
  struct Shape {
    const char* name;
    int matrices;
    int64_t k, n;
  };
  const Shape shapes[] = {{"1 x expert w1 [5120->2304]", 1, 5120, 2304},
                          {"1 x expert w2 [2304->5120]", 1, 2304, 5120},
                          {"12 x gate+up [5120->2304]", 12, 5120, 2304},
                          {"6 x down [2304->5120]", 6, 2304, 5120}};
  for (const Shape& sh : shapes) {
    for (int K : {2, 3, 5}) {
      for (int rows : {1, 2, 8, 16}) {
        for (int splits : {0, 1, 2, 4}) {
          if (splits != 0 && sh.matrices == 1) continue;
          if (splits != 0 && rows != 1) continue;
          const Result r = bench(sh.matrices, sh.k, sh.n, K, rows, splits, repeats, stream.get());
          std::printf("%-34s %2d %4d %6d %9.2f %9.0f %9.0f %7.1f%%\n", sh.name, K, rows, splits,
                      r.us, r.gbs_all, r.gbs_trellis, 100.0 * r.gbs_all / peak.gbs);
        }
      }
    }
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const int repeats = argc > 1 ? std::max(3, std::atoi(argv[1])) : 30;
  return dsv41::bench::guarded_main("dsv41_bench_cuda_exl3", [&] { return run(repeats); });
}
