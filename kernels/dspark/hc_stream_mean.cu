// §6.2 DSpark target feature (CPU reference: dsv41::hc_stream_mean): the mean of one token's hc
// residual streams, summed in stream order and divided (IEEE), so the result is bit-equal. One
// thread per (t, d).
#include "common/launch.cuh"
#include "dsv41k/dspark.hpp"

namespace dsv41::kernels {
namespace {

constexpr int kThreads = 256;

__global__ void __launch_bounds__(kThreads)
    hc_stream_mean_kernel(const float* __restrict__ H, int64_t T, int hc, int64_t D,
                          float* __restrict__ out, int64_t out_stride) {
  detail::pdl_begin();
  const int64_t i = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  if (i >= T * D) return;
  const int64_t t = i / D, d = i % D;
  const float* h = H + t * hc * D + d;
  float sum = 0.0f;
  for (int j = 0; j < hc; ++j) sum = __fadd_rn(sum, h[j * D]);
  out[t * out_stride + d] = __fdiv_rn(sum, static_cast<float>(hc));
}

}  // namespace

cudaError_t hc_stream_mean(const float* H, int64_t T, int hc, int64_t D, float* out,
                           int64_t out_stride, cudaStream_t stream) {
  if (H == nullptr || out == nullptr || T < 0 || hc < 1 || hc > 8 || D < 1 || out_stride < D)
    return cudaErrorInvalidValue;
  if (T > (int64_t{0x7FFFFFFF} * kThreads) / D) return cudaErrorInvalidValue;  // grid.x limit
  if (T == 0) return cudaSuccess;
  const int64_t n = T * D;
  return detail::launch_kernel(hc_stream_mean_kernel,
                               static_cast<unsigned>((n + kThreads - 1) / kThreads), kThreads, 0,
                               stream, H, T, hc, D, out, out_stride);
}

}  // namespace dsv41::kernels
