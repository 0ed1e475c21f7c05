// mHC expand (spec model-architecture.md §3): H_new[t, k, d] = post[t, k] · y[t, d] +
// Σ_j comb[t, j, k] · H_old[t, j, d], in the CPU reference's order (model/mhc.cpp hc_expand:
// acc = post·y, then j ascending, each product and sum rounded to fp32 separately), one thread
// per output element.
#include "common/launch.cuh"
#include "dsv41k/mhc.hpp"

namespace dsv41::kernels {
namespace {

constexpr int kThreads = 256;

__global__ void __launch_bounds__(kThreads)
    hc_expand_kernel(const float* __restrict__ y, const float* __restrict__ H_old,
                     const float* __restrict__ post, const float* __restrict__ comb,
                     float* __restrict__ H_new, int64_t T, int hc, int64_t D) {
  detail::pdl_begin();
  const int64_t i = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  if (i >= T * hc * D) return;
  const int64_t d = i % D, tk = i / D, t = tk / hc;
  const int k = static_cast<int>(tk % hc);
  const float* h = H_old + t * hc * D + d;
  const float* c = comb + t * hc * hc;
  float acc = __fmul_rn(post[t * hc + k], y[t * D + d]);
  for (int j = 0; j < hc; ++j) acc = __fadd_rn(acc, __fmul_rn(c[j * hc + k], h[j * D]));
  H_new[i] = acc;
}

}  // namespace

cudaError_t hc_expand(const float* y, const float* H_old, const float* post, const float* comb,
                      float* H_new, int64_t T, int hc, int64_t D, cudaStream_t stream) {
  if (y == nullptr || H_old == nullptr || post == nullptr || comb == nullptr || H_new == nullptr ||
      H_new == H_old || T < 0 || hc < 1 || hc > kHcMaxStreams || D < 1)
    return cudaErrorInvalidValue;
  if (T > (int64_t{0x7FFFFFFF} * kThreads) / (D * hc)) return cudaErrorInvalidValue;
  if (T == 0) return cudaSuccess;
  const int64_t n = T * hc * D;
  return detail::launch_kernel(hc_expand_kernel,
                               static_cast<unsigned>((n + kThreads - 1) / kThreads), kThreads, 0,
                               stream, y, H_old, post, comb, H_new, T, hc, D);
}

}  // namespace dsv41::kernels
