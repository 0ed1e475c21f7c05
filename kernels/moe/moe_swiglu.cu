// §4 clamped SwiGLU with the route weight (spec model-architecture.md §4, CPU reference
// model/moe.cpp swiglu_activate): h = SiLU(min(g, limit)) · clamp(u, ±limit) · w, in place on g.
// One thread per element, the CPU's fp32 op sequence unfused: std::clamp / std::min written out
// (NaN passes through as there), silu = g / (1 + exp(-g)) with exp through fp64 rounded to fp32,
// then (silu · u) · w.
#include <algorithm>

#include "common/launch.cuh"
#include "dsv41k/moe.hpp"

namespace dsv41::kernels {
namespace {

constexpr int kThreads = 256;

__global__ void __launch_bounds__(kThreads)
    swiglu_kernel(float* __restrict__ g, const float* __restrict__ u,
                  const float* __restrict__ route_w, const int32_t* __restrict__ n_rows, int64_t n,
                  int64_t inter, float limit) {
  detail::pdl_begin();
  const int64_t rows = n_rows ? min(n, static_cast<int64_t>(*n_rows)) : n;
  const int64_t total = rows * inter;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * kThreads) {
    const int64_t r = i / inter;
    float gi = g[i], ui = u[i];
    if (limit > 0.0f) {
      ui = ui < -limit ? -limit : (limit < ui ? limit : ui);  // std::clamp(ui, -limit, limit)
      gi = limit < gi ? limit : gi;                           // std::min(gi, limit)
    }
    const float e = static_cast<float>(exp(static_cast<double>(-gi)));
    const float silu = __fdiv_rn(gi, __fadd_rn(1.0f, e));
    const float w = route_w ? route_w[r] : 1.0f;
    g[i] = __fmul_rn(__fmul_rn(silu, ui), w);
  }
}

}  // namespace

cudaError_t moe_swiglu(float* g, const float* u, const float* route_w, const int32_t* n_rows,
                       int64_t n, int64_t inter, float limit, cudaStream_t stream) {
  if (g == nullptr || u == nullptr || n < 0 || inter < 1 || static_cast<const void*>(u) == g ||
      n > (int64_t{1} << 62) / inter)
    return cudaErrorInvalidValue;
  if (n == 0) return cudaSuccess;
  const int64_t blocks = std::min<int64_t>((n * inter + kThreads - 1) / kThreads, 65536);
  return detail::launch_kernel(swiglu_kernel, static_cast<unsigned>(blocks), kThreads, 0, stream, g,
                               u, route_w, n_rows, n, inter, limit);
}

}  // namespace dsv41::kernels
