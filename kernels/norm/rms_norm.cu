// RMSNorm, one block per row (spec model-architecture.md §2.2, §3):
// y = x · (mean(x²) + eps)^-1/2 · w, as the CPU reference model/rms_norm.cpp computes it: the
// sum of squares in fp64, then mean, sqrt and reciprocal in IEEE fp32 (nvcc's default -prec-div
// and -prec-sqrt), then (x · inv) · w. eps is rms_norm_eps (1e-20 released): a zero row stays 0.
#include "common/launch.cuh"
#include "dsv41k/launchers.hpp"
#include "norm/rms_norm.cuh"

namespace dsv41::kernels {
namespace {

constexpr int kNormThreads = detail::kRmsNormThreads;

__global__ void __launch_bounds__(kNormThreads)
    rms_norm_kernel(const float* x, const float* __restrict__ w, float* y, int64_t n, float eps) {
  detail::pdl_begin();
  __shared__ double partial[kNormThreads / 32];
  const float* xr = x + static_cast<int64_t>(blockIdx.x) * n;
  float* yr = y + static_cast<int64_t>(blockIdx.x) * n;
  double ss = 0.0;
  for (int64_t i = threadIdx.x; i < n; i += kNormThreads) {
    const double v = xr[i];
    ss += v * v;
  }
  const float inv = detail::rms_inverse_block<kNormThreads>(ss, n, eps, partial);
  // Every thread re-reads only the elements it wrote nothing to yet, so x == y is safe.
  for (int64_t i = threadIdx.x; i < n; i += kNormThreads) {
    const float v = __fmul_rn(xr[i], inv);
    yr[i] = w != nullptr ? __fmul_rn(v, w[i]) : v;
  }
}

}  // namespace

cudaError_t rms_norm(const float* x, const float* w, float* y, int64_t rows, int64_t n, float eps,
                     cudaStream_t stream) {
  if (x == nullptr || y == nullptr || rows < 0 || n < 1 || rows > 0x7FFFFFFF)
    return cudaErrorInvalidValue;
  if (rows == 0) return cudaSuccess;
  return detail::launch_kernel(rms_norm_kernel, static_cast<unsigned>(rows), kNormThreads, 0,
                               stream, x, w, y, n, eps);
}

}  // namespace dsv41::kernels
