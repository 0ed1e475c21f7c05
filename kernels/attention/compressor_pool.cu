// Compressor pooling (spec model-architecture.md §2.3), the CUDA twin of dsv41::compressor_pool
// (model/attention/compressor.cpp): per group and channel a softmax over the group's gate rows
// weights the kv rows. One thread per (group, channel); the reference's fp32 op sequence
// unfused (max, exp(g - m), the sum in row order, w / sum, the weighted sum in row order). exp
// goes through fp64 rounded to fp32: the correctly rounded expf except within ~2^-29 ulp of a
// rounding midpoint, where glibc's expf may differ by 1 ulp (the bound of moe_swiglu,
// docs/kernels.md).
#include <cmath>
#include <cstdint>

#include "common/launch.cuh"
#include "dsv41k/csa.hpp"

namespace dsv41::kernels {
namespace {

constexpr int kMaxRatio = 128;

__global__ void pool_kernel(const float* kv, const float* gate, float* latent, int64_t n_groups,
                            int ratio, int64_t D) {
  detail::pdl_begin();
  const int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (i >= n_groups * D) return;
  const int64_t j = i / D, c = i % D;
  const float* g = gate + j * ratio * D + c;
  const float* v = kv + j * ratio * D + c;
  float m = -INFINITY;
  for (int r = 0; r < ratio; ++r) m = fmaxf(m, g[r * D]);
  float w[kMaxRatio];
  float sum = 0.0f;
  for (int r = 0; r < ratio; ++r) {
    w[r] = static_cast<float>(exp(static_cast<double>(__fsub_rn(g[r * D], m))));
    sum = __fadd_rn(sum, w[r]);
  }
  float acc = 0.0f;
  for (int r = 0; r < ratio; ++r) acc = __fadd_rn(acc, __fmul_rn(v[r * D], __fdiv_rn(w[r], sum)));
  latent[i] = acc;
}

}  // namespace

cudaError_t compressor_pool(const float* kv, const float* gate, float* latent, int64_t n_groups,
                            int ratio, int64_t D, cudaStream_t stream) {
  if (n_groups < 0 || ratio < 2 || ratio > kMaxRatio || D < 1 || kv == nullptr || gate == nullptr ||
      latent == nullptr || latent == kv || latent == gate)
    return cudaErrorInvalidValue;
  if (n_groups == 0) return cudaSuccess;
  const int64_t total = n_groups * D;
  constexpr int kBlock = 256;
  return detail::launch_kernel(pool_kernel, static_cast<unsigned>((total + kBlock - 1) / kBlock),
                               kBlock, 0, stream, kv, gate, latent, n_groups, ratio, D);
}

}  // namespace dsv41::kernels
