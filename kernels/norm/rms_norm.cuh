// The RMSNorm factor of one row held by a block (spec model-architecture.md §2.2, §3), as the CPU
// reference model/rms_norm.cpp computes it: each thread's fp64 sum of squares of its strided
// elements, a shuffle tree, the warps' partials added in warp order, then mean, sqrt and the
// reciprocal in IEEE fp32. Shared by rms_norm_kernel and kv_norm_rope_quantize's row kernel so
// both form the same fp64 total (bit-equal outputs).
#pragma once

#include <cstdint>

namespace dsv41::kernels::detail {

// Threads per row of both kernels: the per-thread element stride, hence the fp64 sum, depends
// on it.
inline constexpr int kRmsNormThreads = 256;

// ss: this thread's Σ v² over its elements. partial: kThreads / 32 doubles of shared memory.
// Every thread returns inv = 1 / sqrt(fp32(Σ / n) + eps).
template <int kThreads>
__device__ __forceinline__ float rms_inverse_block(double ss, int64_t n, float eps,
                                                   double* partial) {
#pragma unroll
  for (int m = 16; m >= 1; m >>= 1) ss += __shfl_xor_sync(0xFFFFFFFFu, ss, m);
  if ((threadIdx.x & 31) == 0) partial[threadIdx.x >> 5] = ss;
  __syncthreads();
  double total = 0.0;
#pragma unroll
  for (int i = 0; i < kThreads / 32; ++i) total += partial[i];
  const float mean = static_cast<float>(total / static_cast<double>(n));
  return 1.0f / sqrtf(mean + eps);
}

}  // namespace dsv41::kernels::detail
