// §4 router (spec model-architecture.md §4, CPU reference model/moe.cpp route()): sqrtsoftplus of
// the gate logits, + bias (bias_vl at image positions), top-k by the biased score with ties to the
// lower expert index, weights from the unbiased scores. The top-k is k rounds
// of a warp arg-max over the not yet selected experts, which yields exactly partial_sort's
// result for the strict order (score desc, index asc). Everything after the logits is the CPU's
// fp32 op sequence with unfused IEEE ops. One warp per token (below).
#include <cmath>

#include "common/launch.cuh"
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

// One warp per token (kWarps tokens per block): lane l owns experts l, l + 32, ... (<= 32 of
// them: E <= 1024, so its "taken" flags are one register), the top-k rounds are warp arg-maxes
// over shuffles with no block barriers (the block-per-token version spent its time in 2·k
// __syncthreads per token: k = 6 at decode).
__global__ void __launch_bounds__(kThreads)
    route_kernel(const float* __restrict__ logits, const float* __restrict__ bias,
                 const float* __restrict__ bias_vl, const uint8_t* __restrict__ image_flags,
                 int32_t* __restrict__ ids, float* __restrict__ weights,
                 float* __restrict__ biased_out, int64_t T, int E, int k, float gate_temp,
                 bool norm, float scaling) {
  detail::pdl_begin();
  __shared__ float score_s[kWarps][kMoeMaxExperts], biased_s[kWarps][kMoeMaxExperts];
  __shared__ int order_s[kWarps][kMoeMaxTopK];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int64_t t = static_cast<int64_t>(blockIdx.x) * kWarps + warp;
  if (t >= T) return;  // whole warps: no block barrier below
  float* score = score_s[warp];
  float* biased = biased_s[warp];
  int* order = order_s[warp];
  const float* b = (image_flags && image_flags[t]) ? bias_vl : bias;
  for (int e = lane; e < E; e += 32) {
    const float sc = sqrt_softplus(logits[t * E + e], gate_temp);
    score[e] = sc;
    biased[e] = __fadd_rn(sc, b[e]);
    if (biased_out) biased_out[t * E + e] = biased[e];
  }
  __syncwarp();
  uint32_t taken = 0;  // bit j: expert lane + 32 j
  for (int r = 0; r < k; ++r) {
    float v = 0.0f;
    int i = -1;
    for (int j = 0, e = lane; e < E; ++j, e += 32)
      if (!((taken >> j) & 1u) && before(biased[e], e, v, i)) {
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
    // Every lane holds the same winner (a total order): its owner marks it.
    if ((i & 31) == lane) taken |= 1u << (i >> 5);
    if (lane == 0) order[r] = i;
  }
  __syncwarp();
  if (lane == 0) {
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
  return detail::launch_kernel(route_kernel, static_cast<unsigned>((T + kWarps - 1) / kWarps),
                               kThreads, 0, stream, logits, bias, bias_vl, image_flags, ids,
                               weights, biased_scores, T, E, k, gate_temp, norm_topk_prob,
                               routed_scaling_factor);
}

}  // namespace dsv41::kernels
