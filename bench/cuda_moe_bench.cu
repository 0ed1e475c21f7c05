// Bandwidth of moe_grouped_fp4_gemv (CUDA-core and tensor-core forms) and moe_grouped_exl3_gemv
// (kernels/moe/) at routed-expert decode shapes: the gate+up projections of the step's experts in
// one launch (2 descriptors per expert, [5120 -> 2304]) and their down projections ([2304 ->
// 5120]), with `rows` activation rows per expert. Bytes = FP4 weights + E8M0 scales (EXL3: trellis
// + suh + svh) of every descriptor + x + y (the fewest one call must move). Time = median of
// CUDA-event timings of a CUDA graph of back-to-back calls rotating through >= 256 MB of weight
// copies (no L2 reuse), divided by the calls. Usage: dsv41_bench_cuda_moe [repeats=30]
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
#include "dsv41k/moe.hpp"
#include "graph_timing.hpp"

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

struct Result {
  double us, gbs;
};

// `descs` descriptors over distinct weights, `rows` rows each, x rows shared per expert pair.
// tc: moe_grouped_fp4_gemv_tc (x split + tensor-core product, both timed).
Result bench(int descs, int64_t out, int64_t in, int rows, bool tc, int repeats, cudaStream_t s) {
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
  const int64_t x_rows = int64_t{descs} * rows;
  const size_t split_bytes = dk::moe_grouped_fp4_gemv_tc_workspace_bytes(x_rows, in);
  DeviceBuffer split(tc ? split_bytes : 16);
  const auto launch = [&](int c) {
    const dk::MoeGemvDesc* d = desc.as<dk::MoeGemvDesc>() + c * descs;
    if (tc)
      BENCH_CHECK(dk::moe_grouped_fp4_gemv_tc(d, descs, rows, x.as<float>(), x_rows, y.as<float>(),
                                              out, in, split.data(), split_bytes, s));
    else
      BENCH_CHECK(
          dk::moe_grouped_fp4_gemv(d, descs, rows, x.as<float>(), y.as<float>(), out, in, s));
  };
  const float med = dsv41::bench::graph_median_ms(launch, copies, repeats, s);
  Result res;
  res.us = med * 1e3;
  const double bytes = double(descs) * (wb + sb + 4.0 * rows * (in + out));
  res.gbs = bytes / (res.us * 1e-6) / 1e9;
  return res;
}

// The same for EXL3 experts (MUL1, random trellis bits, fp16 sign·scales ±1): descriptor d is
// expert d / per_expert at K = Ks[expert % Ks.size()] (one launch, mixed K, as a Spark layer).
Result bench_exl3(int descs, int per_expert, int64_t out, int64_t in, const std::vector<int>& Ks,
                  int rows, int repeats, cudaStream_t s) {
  const int64_t k = in, n = out;
  double desc_bytes = 0;
  for (int d = 0; d < descs; ++d)
    desc_bytes += double(k) * n * Ks[(d / per_expert) % Ks.size()] / 8 + 2.0 * (k + n);
  const int copies = static_cast<int>(std::max<double>(3, (256 << 20) / desc_bytes + 1));
  std::vector<DeviceBuffer> bufs;
  DeviceBuffer x(size_t(descs) * rows * in * 4), y(size_t(descs) * rows * out * 4);
  fill_x<<<256, 256, 0, s>>>(x.as<float>(), size_t(descs) * rows * in);
  DeviceBuffer signs(size_t(std::max(k, n)) * 2);
  std::vector<uint16_t> ones(size_t(std::max(k, n)), 0x3C00);    // fp16 1.0
  for (size_t i = 0; i < ones.size(); i += 3) ones[i] = 0xBC00;  // and some -1.0
  signs.upload(ones.data(), ones.size() * 2);
  std::vector<dk::Exl3MoeMatrix> rec;
  for (int c = 0; c < copies; ++c)
    for (int d = 0; d < descs; ++d) {
      const int K = Ks[(d / per_expert) % Ks.size()];
      const size_t tb = size_t(k) * n * K / 8;
      bufs.emplace_back(tb);
      fill_u32<<<1024, 256, 0, s>>>(bufs.back().as<uint32_t>(), tb / 4, 91u * c + d);
      rec.push_back({bufs.back().as<uint8_t>(), signs.as<uint16_t>(), signs.as<uint16_t>(), K, 0});
    }
  DeviceBuffer drec(rec.size() * sizeof(rec[0]));
  drec.upload(rec.data(), rec.size() * sizeof(rec[0]));
  std::vector<dk::MoeGemvDesc> host;
  for (int c = 0; c < copies; ++c)
    for (int d = 0; d < descs; ++d)
      host.push_back(
          {reinterpret_cast<const uint8_t*>(drec.as<dk::Exl3MoeMatrix>() + c * descs + d), nullptr,
           d * rows, d * rows, rows});
  DeviceBuffer desc(sizeof(dk::MoeGemvDesc) * host.size());
  desc.upload(host.data(), sizeof(dk::MoeGemvDesc) * host.size());
  const int max_k = *std::max_element(Ks.begin(), Ks.end());
  const auto launch = [&](int c) {
    BENCH_CHECK(dk::moe_grouped_exl3_gemv(desc.as<dk::MoeGemvDesc>() + c * descs, descs, rows,
                                          max_k, x.as<float>(), in, y.as<float>(), out, k, n, s));
  };
  const float ms = dsv41::bench::graph_median_ms(launch, copies, repeats, s);
  Result res;
  res.us = ms * 1e3;
  res.gbs = (desc_bytes + 4.0 * descs * rows * (in + out)) / (res.us * 1e-6) / 1e9;
  return res;
}

int run(int repeats) {
  if (dsv41::cuda::device_count() == 0) {
    std::fprintf(stderr, "dsv41_bench_cuda_moe: no CUDA device\n");
    return 2;
  }
  const auto info = dsv41::cuda::device_info(0);
  const dsv41::bench::DevicePeak peak = dsv41::bench::device_peak(info);
  std::printf("device: %s; peak %s\n", dsv41::cuda::describe(info).c_str(),
              dsv41::bench::describe(peak).c_str());
  std::printf("%-34s %5s %4s %9s %9s %8s %9s %9s %8s\n", "case (grouped fp4)", "descs", "rows",
              "us(graph)", "GB/s", "%peak", "tc us", "tc GB/s", "tc %");
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
    for (int rows : {1, 2, 4, 6, 8, 16}) {
      const Result r = bench(sh.descs, sh.out, sh.in, rows, false, repeats, stream.get());
      const Result t = bench(sh.descs, sh.out, sh.in, rows, true, repeats, stream.get());
      std::printf("%-34s %5d %4d %9.2f %9.0f %7.1f%% %9.2f %9.0f %7.1f%%\n", sh.name, sh.descs,
                  rows, r.us, r.gbs, 100.0 * r.gbs / peak.gbs, t.us, t.gbs,
                  100.0 * t.gbs / peak.gbs);
    }
  // EXL3 at the Spark mix: six experts of K 2, 3, 5, 2, 3, 2 (2.83 bits per weight) per step, and
  // single-K batches to compare with exl3_gemv's host-list table (docs/perf.md).
  std::printf("%-34s %5s %4s %9s %9s %8s\n", "case (grouped exl3)", "descs", "rows", "us(graph)",
              "GB/s", "%peak");
  struct XCase {
    const char* name;
    int descs, per_expert;
    int64_t out, in;
    std::vector<int> Ks;
  };
  const XCase xcases[] = {
      {"gate+up 6 experts K mix 2/3/5", 12, 2, 2304, 5120, {2, 3, 5, 2, 3, 2}},
      {"down 6 experts K mix 2/3/5", 6, 1, 5120, 2304, {2, 3, 5, 2, 3, 2}},
      {"gate+up 6 experts K2", 12, 2, 2304, 5120, {2}},
      {"gate+up 6 experts K5", 12, 2, 2304, 5120, {5}},
      {"gate+up 32 experts K mix 2/3/5", 64, 2, 2304, 5120, {2, 3, 5, 2, 3, 2}}};
  for (const XCase& c : xcases)
    for (int rows : {1, 2, 8, 16}) {
      const Result r =
          bench_exl3(c.descs, c.per_expert, c.out, c.in, c.Ks, rows, repeats, stream.get());
      std::printf("%-34s %5d %4d %9.2f %9.0f %7.1f%%\n", c.name, c.descs, rows, r.us, r.gbs,
                  100.0 * r.gbs / peak.gbs);
    }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const int repeats = argc > 1 ? std::max(3, std::atoi(argv[1])) : 30;
  return dsv41::bench::guarded_main("dsv41_bench_cuda_moe", [&] { return run(repeats); });
}
