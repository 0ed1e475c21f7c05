// mHC collapse (spec model-architecture.md §3): x[t, d] = Σ_j pre[t, j] · H[t, j, d], in the
// CPU reference's order (model/mhc.cpp hc_collapse: acc = 0, j ascending, each product and sum
// rounded to fp32 separately), one thread per output element.
#include "common/launch.cuh"
#include "dsv41k/mhc.hpp"

namespace dsv41::kernels {
namespace {

constexpr int kThreads = 256;

__global__ void __launch_bounds__(kThreads)
    hc_collapse_kernel(const float* __restrict__ H, const float* __restrict__ pre, float* x,
                       int64_t T, int hc, int64_t D) {
  detail::pdl_begin();
  const int64_t i = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  if (i >= T * D) return;
  const int64_t t = i / D, d = i % D;
  const float* h = H + t * hc * D + d;
  const float* p = pre + t * hc;
  float acc = 0.0f;
  for (int j = 0; j < hc; ++j) acc = __fadd_rn(acc, __fmul_rn(p[j], h[j * D]));
  x[i] = acc;
}

}  // namespace

cudaError_t hc_collapse(const float* H, const float* pre, float* x, int64_t T, int hc, int64_t D,
                        cudaStream_t stream) {
  if (H == nullptr || pre == nullptr || x == nullptr || T < 0 || hc < 1 || hc > kHcMaxStreams ||
      D < 1)
    return cudaErrorInvalidValue;
  if (T > (int64_t{0x7FFFFFFF} * kThreads) / D) return cudaErrorInvalidValue;
  if (T == 0) return cudaSuccess;
  const int64_t n = T * D;
  return detail::launch_kernel(hc_collapse_kernel,
                               static_cast<unsigned>((n + kThreads - 1) / kThreads), kThreads, 0,
                               stream, H, pre, x, T, hc, D);
}

}  // namespace dsv41::kernels
