// §6.3 one step of the DSpark Markov chain on the device (CPU reference: dsv41::dspark_markov_pick
// and dsv41::dspark_confidence): the argmax of u + markov over the vocabulary and the confidence
// sigmoid, one block of 1024 threads, so the five serial steps of a round need no host sync (the
// next step's Markov-embedding gather reads ids[k + 1] on the device).
#include <cfloat>

#include "common/launch.cuh"
#include "dsv41k/dspark.hpp"

namespace dsv41::kernels {
namespace {

constexpr int kThreads = 1024;
constexpr int kWarps = kThreads / 32;
constexpr int32_t kNone = 0x7FFFFFFF;

// (value, index) with the larger value, on a tie the smaller index; kNone loses to anything.
__device__ __forceinline__ void pick(float& v, int32_t& i, float v2, int32_t i2) {
  if (i2 == kNone) return;
  if (i == kNone || v2 > v || (v2 == v && i2 < i)) {
    v = v2;
    i = i2;
  }
}

__global__ void __launch_bounds__(kThreads)
    dspark_markov_kernel(const float* __restrict__ u, const float* __restrict__ markov,
                         const float* __restrict__ h, const float* __restrict__ e,
                         const float* __restrict__ w, int64_t V, int64_t D, int64_t R, int k,
                         int32_t* __restrict__ ids, float* __restrict__ conf) {
  __shared__ float best_v[kWarps], part[kWarps];
  __shared__ int32_t best_i[kWarps];
  detail::pdl_begin();
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  // A thread's first strict maximum over its ascending indices (the reference's rule: a sum
  // only wins when greater, so NaN and -inf never do).
  float bv = -INFINITY;
  int32_t bi = kNone;
  for (int64_t v = threadIdx.x; v < V; v += kThreads) {
    const float l = __fadd_rn(u[v], markov[v]);
    if (l > bv) {
      bv = l;
      bi = static_cast<int32_t>(v);
    }
  }
  float z = 0.0f;
  for (int64_t i = threadIdx.x; i < D + R; i += kThreads) z += w[i] * (i < D ? h[i] : e[i - D]);
#pragma unroll
  for (int m = 16; m >= 1; m >>= 1) {
    pick(bv, bi, __shfl_xor_sync(0xFFFFFFFFu, bv, m), __shfl_xor_sync(0xFFFFFFFFu, bi, m));
    z += __shfl_xor_sync(0xFFFFFFFFu, z, m);
  }
  if (lane == 0) {
    best_v[warp] = bv;
    best_i[warp] = bi;
    part[warp] = z;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    float v = best_v[0], zt = part[0];
    int32_t i = best_i[0];
    for (int j = 1; j < kWarps; ++j) {
      pick(v, i, best_v[j], best_i[j]);
      zt += part[j];
    }
    ids[k + 1] = i == kNone ? 0 : i;
    conf[k] = 1.0f / (1.0f + expf(-zt));
  }
}

}  // namespace

cudaError_t dspark_markov_step(const float* u, const float* markov, const float* h, const float* e,
                               const float* w, int64_t V, int64_t D, int64_t R, int k, int32_t* ids,
                               float* conf, cudaStream_t stream) {
  if (u == nullptr || markov == nullptr || h == nullptr || e == nullptr || w == nullptr ||
      ids == nullptr || conf == nullptr || V < 1 || V >= (int64_t{1} << 31) || D < 1 || R < 1 ||
      k < 0)
    return cudaErrorInvalidValue;
  return detail::launch_kernel(dspark_markov_kernel, 1, kThreads, 0, stream, u, markov, h, e, w, V,
                               D, R, k, ids, conf);
}

}  // namespace dsv41::kernels
