// Bandwidth of moe_grouped_fp4_gemv (kernels/moe/) at routed-expert decode shapes: the gate+up
// projections of the step's experts in one launch (2 descriptors per expert, [5120 -> 2304]) and
// their down projections ([2304 -> 5120]), with `rows` activation rows per expert. Bytes = FP4
// weights + E8M0 scales of every descriptor + x + y (the fewest one call must move). Time =
// median of CUDA-event timings of a CUDA graph of back-to-back calls rotating through >= 256 MB
// of weight copies (no L2 reuse), divided by the calls. Usage: dsv41_bench_cuda_moe [repeats=30]
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
#include "dsv41k/moe.hpp"

namespace {

using dsv41::cuda::CudaStream;
using dsv41::cuda::DeviceBuffer;
using dsv41::cuda::EventTimer;
namespace dk = dsv41::kernels;

void check(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return;
  std::fprintf(stderr, "dsv41_bench_cuda_moe: %s: %s\n", what, cudaGetErrorString(e));
  std::exit(1);
}
#define BENCH_CHECK(expr) check((expr), #expr)

constexpr double kH200DatasheetGBs = 4800.0;

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
// E8M0 scales 2^-4 .. 2^3 (finite products); x in [-1, 1).
__global__ void fill_scale(uint8_t* p, size_t n) {
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n;
       i += size_t{gridDim.x} * blockDim.x)
    p[i] = static_cast<uint8_t>(123 + (i * 2654435761u >> 11) % 8);
}
__global__ void fill_x(float* p, size_t n) {
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n;
       i += size_t{gridDim.x} * blockDim.x)
    p[i] = static_cast<float>((i * 2654435761u >> 9) % 2001) / 1000.0f - 1.0f;
}

float median(std::vector<float> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

struct Result {
  double us, gbs;
};

// `descs` descriptors over distinct weights, `rows` rows each, x rows shared per expert pair.
Result bench(int descs, int64_t out, int64_t in, int rows, int repeats, cudaStream_t s) {
  const size_t wb = size_t(out) * in / 2, sb = size_t(out) * (in / 32);
  const int copies =
      static_cast<int>(std::max<size_t>(3, (size_t{256} << 20) / ((wb + sb) * descs) + 1));
  std::vector<DeviceBuffer> bufs;
  DeviceBuffer x(size_t(descs) * rows * in * 4), y(size_t(descs) * rows * out * 4);
  fill_x<<<256, 256, 0, s>>>(x.as<float>(), size_t(descs) * rows * in);
  std::vector<std::vector<dk::MoeGemvDesc>> host(copies);
  for (int c = 0; c < copies; ++c)
    for (int d = 0; d < descs; ++d) {
      bufs.emplace_back(wb);
      fill_u32<<<1024, 256, 0, s>>>(bufs.back().as<uint32_t>(), wb / 4, 77u * c + d);
      const uint8_t* w = bufs.back().as<uint8_t>();
      bufs.emplace_back(sb);
      fill_scale<<<256, 256, 0, s>>>(bufs.back().as<uint8_t>(), sb);
      host[c].push_back({w, bufs.back().as<uint8_t>(), d * rows, d * rows, rows});
    }
  DeviceBuffer desc(sizeof(dk::MoeGemvDesc) * descs * copies);
  for (int c = 0; c < copies; ++c)
    BENCH_CHECK(cudaMemcpy(desc.as<dk::MoeGemvDesc>() + c * descs, host[c].data(),
                           sizeof(dk::MoeGemvDesc) * descs, cudaMemcpyHostToDevice));
  BENCH_CHECK(cudaGetLastError());
  const auto launch = [&](int c) {
    BENCH_CHECK(dk::moe_grouped_fp4_gemv(desc.as<dk::MoeGemvDesc>() + c * descs, descs, rows,
                                         x.as<float>(), y.as<float>(), out, in, s));
  };
  for (int c = 0; c < copies; ++c) launch(c);
  BENCH_CHECK(cudaStreamSynchronize(s));
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  BENCH_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  for (int c = 0; c < copies; ++c) launch(c);
  BENCH_CHECK(cudaStreamEndCapture(s, &graph));
  BENCH_CHECK(cudaGraphInstantiate(&exec, graph, 0));
  BENCH_CHECK(cudaGraphLaunch(exec, s));
  EventTimer t;
  std::vector<float> ms;
  for (int r = 0; r < repeats; ++r) {
    t.start(s);
    BENCH_CHECK(cudaGraphLaunch(exec, s));
    t.stop(s);
    ms.push_back(t.elapsed_ms() / copies);
  }
  BENCH_CHECK(cudaGraphExecDestroy(exec));
  BENCH_CHECK(cudaGraphDestroy(graph));
  Result res;
  res.us = median(ms) * 1e3;
  const double bytes = double(descs) * (wb + sb + 4.0 * rows * (in + out));
  res.gbs = bytes / (res.us * 1e-6) / 1e9;
  return res;
}

int run(int repeats) {
  if (dsv41::cuda::device_count() == 0) {
    std::fprintf(stderr, "dsv41_bench_cuda_moe: no CUDA device\n");
    return 2;
  }
  std::printf("device: %s\n", dsv41::cuda::describe(dsv41::cuda::device_info(0)).c_str());
  std::printf("%-34s %5s %4s %9s %9s %8s\n", "case (grouped fp4)", "descs", "rows", "us(graph)",
              "GB/s", "%4.8TB");
  CudaStream stream;
  struct Shape {
    const char* name;
    int descs;
    int64_t out, in;
  };
  const Shape shapes[] = {{"gate+up of 6 experts [5120->2304]", 12, 2304, 5120},
                          {"down of 6 experts [2304->5120]", 6, 5120, 2304},
                          {"gate+up of 32 experts", 64, 2304, 5120},
                          {"down of 32 experts", 32, 5120, 2304}};
  for (const Shape& sh : shapes)
    for (int rows : {1, 2, 8, 16}) {
      const Result r = bench(sh.descs, sh.out, sh.in, rows, repeats, stream.get());
      std::printf("%-34s %5d %4d %9.2f %9.0f %7.1f%%\n", sh.name, sh.descs, rows, r.us, r.gbs,
                  100.0 * r.gbs / kH200DatasheetGBs);
    }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const int repeats = argc > 1 ? std::max(3, std::atoi(argv[1])) : 30;
  try {
    return run(repeats);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dsv41_bench_cuda_moe: %s\n", e.what());
    return 1;
  }
}
