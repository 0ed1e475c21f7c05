// The router of one token on one warp (spec model-architecture.md §4, CPU reference model/moe.cpp
// route()): sqrtsoftplus of the gate logits, + bias (bias_vl at image positions), top-k by the
// biased score with ties to the lower expert index, weights from the unbiased scores. The top-k
// is k rounds of a warp arg-max over the not yet selected experts, which yields exactly
// partial_sort's result for the strict order (score desc, index asc). Everything after the logits
// is the CPU's fp32 op sequence with unfused IEEE ops. Used by moe_route (one warp per token) and
// moe_route_dispatch (route, permutation and descriptors in one block).
#pragma once

#include <cstdint>

#include "dsv41k/moe.hpp"

namespace dsv41::kernels::detail {

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
__device__ __forceinline__ bool route_before(float v, int i, float w, int j) {
  if (j < 0) return i >= 0;
  if (i < 0) return false;
  return v != w ? v > w : i < j;
}

struct RouteParams {
  const float* logits;  // [T, E]
  const float* bias;
  const float* bias_vl;
  const uint8_t* image_flags;  // [T] or null
  int32_t* ids;                // [T, k]
  float* weights;              // [T, k]
  float* biased_out;           // [T, E] or null
  int E, k;
  float gate_temp;
  bool norm;
  float scaling;
};

// Expert e of token t: score[e] = sqrt_softplus(logit), biased[e] = score + bias (bias_vl at
// image positions). score / biased: the token's E floats.
__device__ __forceinline__ void route_score(const RouteParams& p, int64_t t, int e, float* score,
                                            float* biased) {
  const float* b = (p.image_flags && p.image_flags[t]) ? p.bias_vl : p.bias;
  const float sc = sqrt_softplus(p.logits[t * p.E + e], p.gate_temp);
  score[e] = sc;
  biased[e] = __fadd_rn(sc, b[e]);
  if (p.biased_out) p.biased_out[t * p.E + e] = biased[e];
}

// Top-k of token t on the calling warp from its scores (route_score, visible to the warp): lane l
// owns experts l, l + 32, ... (<= 32 of them: E <= 1024, so its "taken" flags are one register);
// the top-k rounds are warp arg-maxes over shuffles with no block barriers. order: k ints, the
// warp's own (shared memory).
__device__ __forceinline__ void route_select(const RouteParams& p, int64_t t, int lane,
                                             const float* score, const float* biased, int* order) {
  const int E = p.E, k = p.k;
  uint32_t taken = 0;  // bit j: expert lane + 32 j
  for (int r = 0; r < k; ++r) {
    float v = 0.0f;
    int i = -1;
    for (int j = 0, e = lane; e < E; ++j, e += 32)
      if (!((taken >> j) & 1u) && route_before(biased[e], e, v, i)) {
        v = biased[e];
        i = e;
      }
#pragma unroll
    for (int m = 16; m >= 1; m >>= 1) {
      const float ov = __shfl_xor_sync(0xFFFFFFFFu, v, m);
      const int oi = __shfl_xor_sync(0xFFFFFFFFu, i, m);
      if (route_before(ov, oi, v, i)) {
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
      if (p.norm) w = __fdiv_rn(w, denom);
      p.ids[t * k + r] = order[r];
      p.weights[t * k + r] = __fmul_rn(w, p.scaling);
    }
  }
  __syncwarp();  // the warp's score / order may be reused for its next token
}

// Token t on the calling warp: the scores of lane l's experts l, l + 32, ..., then route_select.
// score / biased: E floats, order: k ints, all the warp's own (shared memory).
__device__ __forceinline__ void route_token(const RouteParams& p, int64_t t, int lane, float* score,
                                            float* biased, int* order) {
  for (int e = lane; e < p.E; e += 32) route_score(p, t, e, score, biased);
  __syncwarp();
  route_select(p, t, lane, score, biased, order);
}

}  // namespace dsv41::kernels::detail
