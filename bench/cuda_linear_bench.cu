// Bandwidth of the decode GEMV kernels (fp8_block_gemv, fp8_block_gemv_tc, fp4_expert_gemv) at
// model shapes.
// Counts the fewest bytes one call must move (weights + scales + x + y), times with CUDA events
// over a CUDA graph of back-to-back calls that rotate through enough weight copies to defeat L2
// (>= 4x its size), and reports the median over repeats against the card's datasheet bandwidth
// (device_peak.hpp) and the device-to-device copy rate measured in the same process (read + write
// bytes). Usage: dsv41_bench_cuda_linear [repeats=30] No fmt here (nor core/check.hpp, which
// includes it): fmt 9's headers do not compile under nvcc.
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

void check(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return;
  std::fprintf(stderr, "dsv41_bench_cuda_linear: %s: %s\n", what, cudaGetErrorString(e));
  std::exit(1);
}
#define BENCH_CHECK(expr) check((expr), #expr)

constexpr double kGb10MeasuredGBs = 232.0;  // saturating read kernel, performance-anchors.md §2.1

// Pseudo-random bytes offset + (splitmix64(index) & mask): mask 0x77 keeps e4m3 codes finite,
// mask 0x07 with offset 124 gives E8M0 scales 2^-3 .. 2^4.
__global__ void fill_bytes_kernel(uint8_t* p, size_t n, uint64_t seed, uint8_t mask,
                                  uint8_t offset) {
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n;
       i += size_t{gridDim.x} * blockDim.x) {
    uint64_t z = seed + i * 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    p[i] = static_cast<uint8_t>(offset + ((z ^ (z >> 31)) & mask));
  }
}

__global__ void fill_floats_kernel(float* p, size_t n, uint64_t seed) {
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n;
       i += size_t{gridDim.x} * blockDim.x) {
    const uint32_t h = static_cast<uint32_t>((seed + i) * 2654435761ull >> 7);
    p[i] = static_cast<float>(h % 2001) / 1000.0f - 1.0f;
  }
}

void fill(DeviceBuffer& b, uint64_t seed, uint8_t mask, uint8_t offset = 0) {
  fill_bytes_kernel<<<1024, 256>>>(b.as<uint8_t>(), b.bytes(), seed, mask, offset);
  BENCH_CHECK(cudaGetLastError());
}

using dsv41::bench::median;

// Device-to-device copy of 2 GiB, median of 10: the achievable read+write ceiling.
double copy_ceiling_gbs(cudaStream_t s) {
  const size_t bytes = size_t{2} << 30;
  DeviceBuffer a(bytes), b(bytes);
  fill(a, 1, 0xFF);
  EventTimer t;
  std::vector<float> ms;
  for (int i = 0; i < 12; ++i) {
    t.start(s);
    BENCH_CHECK(cudaMemcpyAsync(b.data(), a.data(), bytes, cudaMemcpyDeviceToDevice, s));
    t.stop(s);
    if (i >= 2) ms.push_back(t.elapsed_ms());
  }
  return 2.0 * bytes / (median(ms) * 1e-3) / 1e9;
}

struct Shape {
  const char* name;
  bool fp4;
  int64_t out, in;
  bool tc = false;  // FP8 on fp8_block_gemv_tc (x split + tensor-core product, both timed)
};

struct Result {
  double us_graph, us_stream, gbs;
};

Result bench_one(const Shape& sh, int rows, int repeats, cudaStream_t s) {
  const size_t w_bytes = sh.fp4 ? size_t(sh.out * sh.in / 2) : size_t(sh.out * sh.in);
  const size_t s_bytes =
      sh.fp4 ? size_t(sh.out * (sh.in / 32)) : size_t(((sh.out + 31) / 32) * ((sh.in + 31) / 32));
  const size_t min_rotation = size_t{256} << 20;  // > 4x the H200's 60 MB L2
  const int copies = static_cast<int>(std::max<size_t>(4, min_rotation / (w_bytes + s_bytes) + 1));
  std::vector<DeviceBuffer> ws, ss;
  for (int c = 0; c < copies; ++c) {
    ws.emplace_back(w_bytes);
    ss.emplace_back(s_bytes);
    fill(ws.back(), 100 + c, sh.fp4 ? 0xFF : 0x77);
    fill(ss.back(), 200 + c, 0x07, 124);
  }
  DeviceBuffer x(size_t(rows) * sh.in * 4), y(size_t(rows) * sh.out * 4);
  const size_t split_bytes = dsv41::kernels::fp8_gemv_tc_workspace_bytes(sh.in);
  DeviceBuffer split(split_bytes);
  fill_floats_kernel<<<256, 256>>>(x.as<float>(), size_t(rows) * sh.in, 3);
  BENCH_CHECK(cudaGetLastError());
  const auto launch = [&](int c) {
    if (sh.tc) {
      BENCH_CHECK(dsv41::kernels::fp8_block_gemv_tc(x.as<float>(), ws[c].as<uint8_t>(),
                                                    ss[c].as<uint8_t>(), y.as<float>(), rows, 1,
                                                    sh.out, sh.in, split.data(), split_bytes, s));
      return;
    }
    const auto fn = sh.fp4 ? &dsv41::kernels::fp4_expert_gemv : &dsv41::kernels::fp8_block_gemv;
    BENCH_CHECK(fn(x.as<float>(), ws[c].as<uint8_t>(), ss[c].as<uint8_t>(), y.as<float>(), rows,
                   sh.out, sh.in, s));
  };
  for (int c = 0; c < copies; ++c) launch(c);  // warm-up: module load, first touch
  BENCH_CHECK(cudaStreamSynchronize(s));

  EventTimer t;
  std::vector<float> stream_ms;
  for (int r = 0; r < repeats; ++r) {
    t.start(s);
    for (int c = 0; c < copies; ++c) launch(c);
    t.stop(s);
    stream_ms.push_back(t.elapsed_ms() / copies);
  }
  const float graph_med = dsv41::bench::graph_median_ms(launch, copies, repeats, s);
  const double bytes = double(w_bytes + s_bytes) + 4.0 * rows * (sh.in + sh.out);
  Result res;
  res.us_graph = graph_med * 1e3;
  res.us_stream = median(stream_ms) * 1e3;
  res.gbs = bytes / (res.us_graph * 1e-6) / 1e9;
  return res;
}

int run(int repeats) {
  if (dsv41::cuda::device_count() == 0) {
    std::fprintf(stderr, "dsv41_bench_cuda_linear: no CUDA device\n");
    return 2;
  }
  const auto info = dsv41::cuda::device_info(0);
  CudaStream stream;
  const double ceiling = copy_ceiling_gbs(stream.get());
  const dsv41::bench::DevicePeak peak = dsv41::bench::device_peak(info);
  std::printf("device: %s; peak %s\n", dsv41::cuda::describe(info).c_str(),
              dsv41::bench::describe(peak).c_str());
  std::printf("D2D copy ceiling (read+write): %.0f GB/s = %.1f%% of %.0f GB/s datasheet\n", ceiling,
              100.0 * ceiling / peak.gbs, peak.gbs);
  std::printf("%-28s %4s %10s %10s %9s %8s %8s %12s\n", "shape", "rows", "us(graph)", "us(stream)",
              "GB/s", "%peak", "%copy", "GB10 us*");
  const Shape shapes[] = {
      {"fp8 wq_b [32768,1280]", false, 32768, 1280},
      {"fp8 wo_b [5120,8192]", false, 5120, 8192},
      {"fp8 wq_a [1280,5120]", false, 1280, 5120},
      {"fp8 tc wq_b [32768,1280]", false, 32768, 1280, true},
      {"fp8 tc wo_b [5120,8192]", false, 5120, 8192, true},
      {"fp8 tc wq_a [1280,5120]", false, 1280, 5120, true},
      {"fp4 expert w1 [2304,5120]", true, 2304, 5120},
      {"fp4 expert w2 [5120,2304]", true, 5120, 2304},
  };
  for (const Shape& sh : shapes) {
    for (int rows : {1, 2, 4, 8, 16}) {
      const Result r = bench_one(sh, rows, repeats, stream.get());
      // Projection, not a measurement: same fraction of the copy ceiling on a GB10 whose
      // saturating read reaches ~232 GB/s (48 SMs; compute per byte is ~4x the H200's there).
      const double frac = r.gbs / ceiling;
      const double bytes = r.gbs * 1e9 * r.us_graph * 1e-6;
      const double gb10_us = bytes / (std::min(frac, 1.0) * kGb10MeasuredGBs * 1e9) * 1e6;
      std::printf("%-28s %4d %10.2f %10.2f %9.0f %7.1f%% %7.1f%% %12.1f\n", sh.name, rows,
                  r.us_graph, r.us_stream, r.gbs, 100.0 * r.gbs / peak.gbs, 100.0 * frac, gb10_us);
    }
  }
  std::printf("* projected GB10 time per call = bytes / (%%copy x 232 GB/s); not measured\n");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const int repeats = argc > 1 ? std::max(3, std::atoi(argv[1])) : 30;
  return dsv41::bench::guarded_main("dsv41_bench_cuda_linear", [&] { return run(repeats); });
}
