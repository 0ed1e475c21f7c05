// §4 router (spec model-architecture.md §4, CPU reference model/moe.cpp route()): sqrtsoftplus of
// the gate logits, + bias (bias_vl at image positions), top-k by the biased score with ties to the
// lower expert index, weights from the unbiased scores. One block per token; the top-k is k rounds
// of a block arg-max over the not yet selected experts, which yields exactly partial_sort's
// result for the strict order (score desc, index asc). Everything after the logits is the CPU's
// fp32 op sequence with unfused IEEE ops.
#include <cmath>

#include "dsv41k/moe.hpp"

namespace dsv41::kernels {
namespace {

constexpr int kThreads = 128;
constexpr int kWarps = kThreads / 32;

// route()'s score: sqrt(softplus(a / gate_temp)), softplus = identity above 20 (torch threshold),
// else log1p(exp(a)) with each libm call rounded to fp32 (here through fp64).
__device__ __forceinline__ float sqrt_softplus(float logit, float gate_temp) {
  const float a = __fdiv_rn(logit, gate_temp);
  float sp = a;
  if (!(a > 20.0f)) {
    const float e = static_cast<float>(exp(static_cast<double>(a)));
    sp = static_cast<float>(log1p(static_cast<double>(e)));
  }
  return __fsqrt_rn(sp);
}

// (v, i) before (w, j) in route()'s order; j < 0 is "none yet".
__device__ __forceinline__ bool before(float v, int i, float w, int j) {
  if (j < 0) return i >= 0;
  if (i < 0) return false;
  return v != w ? v > w : i < j;
}

__global__ void __launch_bounds__(kThreads)
    route_kernel(const float* __restrict__ logits, const float* __restrict__ bias,
                 const float* __restrict__ bias_vl, const uint8_t* __restrict__ image_flags,
                 int32_t* __restrict__ ids, float* __restrict__ weights,
                 float* __restrict__ biased_out, int E, int k, float gate_temp, bool norm,
                 float scaling) {
  __shared__ float score[kMoeMaxExperts], biased[kMoeMaxExperts];
  __shared__ uint8_t taken[kMoeMaxExperts];
  __shared__ float warp_v[kWarps];
  __shared__ int warp_i[kWarps];
  __shared__ int order[kMoeMaxTopK];
  const int64_t t = blockIdx.x;
  const float* b = (image_flags && image_flags[t]) ? bias_vl : bias;
  for (int e = threadIdx.x; e < E; e += kThreads) {
    const float s = sqrt_softplus(logits[t * E + e], gate_temp);
    score[e] = s;
    biased[e] = __fadd_rn(s, b[e]);
    taken[e] = 0;
    if (biased_out) biased_out[t * E + e] = biased[e];
  }
  __syncthreads();
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  for (int r = 0; r < k; ++r) {
    float v = 0.0f;
    int i = -1;
    for (int e = threadIdx.x; e < E; e += kThreads)
      if (!taken[e] && before(biased[e], e, v, i)) {
        v = biased[e];
        i = e;
      }
#pragma unroll
    for (int m = 16; m >= 1; m >>= 1) {
      const float ov = __shfl_xor_sync(0xFFFFFFFFu, v, m);
      const int oi = __shfl_xor_sync(0xFFFFFFFFu, i, m);
      if (before(ov, oi, v, i)) {
        v = ov;
        i = oi;
      }
    }
    if (lane == 0) {
      warp_v[warp] = v;
      warp_i[warp] = i;
    }
    __syncthreads();
    if (threadIdx.x == 0) {
      float bv = warp_v[0];
      int bi = warp_i[0];
      for (int w = 1; w < kWarps; ++w)
        if (before(warp_v[w], warp_i[w], bv, bi)) {
          bv = warp_v[w];
          bi = warp_i[w];
        }
      order[r] = bi;
      taken[bi] = 1;
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    float sum = 0.0f;
    for (int r = 0; r < k; ++r) sum = __fadd_rn(sum, score[order[r]]);
    const float denom = __fadd_rn(sum, 1e-20f);
    for (int r = 0; r < k; ++r) {
      float w = score[order[r]];
      if (norm) w = __fdiv_rn(w, denom);
      ids[t * k + r] = order[r];
      weights[t * k + r] = __fmul_rn(w, scaling);
    }
  }
}

}  // namespace

cudaError_t moe_route(const float* logits, const float* bias, const float* bias_vl,
                      const uint8_t* image_flags, int32_t* ids, float* weights,
                      float* biased_scores, int64_t T, int E, int k, float gate_temp,
                      bool norm_topk_prob, float routed_scaling_factor, cudaStream_t stream) {
  if (logits == nullptr || bias == nullptr || ids == nullptr || weights == nullptr || T < 0 ||
      E < 1 || E > kMoeMaxExperts || k < 1 || k > E || k > kMoeMaxTopK ||
      !std::isfinite(gate_temp) || !(gate_temp > 0.0f) || (image_flags && bias_vl == nullptr) ||
      T > 0x7FFFFFFF)
    return cudaErrorInvalidValue;
  if (T == 0) return cudaSuccess;
  route_kernel<<<static_cast<unsigned>(T), kThreads, 0, stream>>>(
      logits, bias, bias_vl, image_flags, ids, weights, biased_scores, E, k, gate_temp,
      norm_topk_prob, routed_scaling_factor);
  return cudaGetLastError();
}

}  // namespace dsv41::kernels
