// Device pieces of the mHC mixes (spec model-architecture.md §3 steps 1-6) shared by hc_mixes.cu
// and hc_site.cu, each the CPU reference model/mhc.cpp's op sequence: the fp64 dot / sum-of-squares
// loop of the projection, the fp32 finish of m -> pre, post (sigmoids) and comb (Sinkhorn) for one
// token by one warp. Products and sums use __fmul_rn / __fadd_rn so nvcc cannot fuse them; exp
// goes through fp64 and is rounded to fp32 (within a rounding of glibc expf, which the reference
// calls).
#pragma once

#include <cstdint>

#include "dsv41k/mhc.hpp"

namespace dsv41::kernels::hcm {

// Output slot of mix row r of token t: pre [T, hc], post [T, hc], comb [T, hc·hc].
__device__ __forceinline__ float* mix_slot(float* pre, float* post, float* comb, int64_t t, int hc,
                                           int r) {
  if (r < hc) return pre + t * hc + r;
  if (r < 2 * hc) return post + t * hc + (r - hc);
  return comb + t * hc * hc + (r - 2 * hc);
}

// Σ f[i]·v(i) and Σ v(i)² over i in [begin, end) with stride `threads` from begin + tid, in fp64
// (each product of two fp32 values is exact in fp64, as the reference). 8 strided elements' loads
// in flight, then added in the same i order as one at a time (the plain loop waited on each load:
// ~10 us per site at hc 4, D 5120 under ncu). v(i) is a value loader (hc_site's folded expand
// computes the streams where it reads them).
template <int kThreads, class Value>
__device__ __forceinline__ void dot_and_squares_of(Value v, const float* __restrict__ f,
                                                   int64_t begin, int64_t end, double& dot,
                                                   double& ss) {
  constexpr int kBatch = 8;
  int64_t i = begin + threadIdx.x;
  for (; i + (kBatch - 1) * kThreads < end; i += kBatch * kThreads) {
    float fv[kBatch], xv[kBatch];
#pragma unroll
    for (int b = 0; b < kBatch; ++b) {
      fv[b] = f[i + b * kThreads];
      xv[b] = v(i + b * kThreads);
    }
#pragma unroll
    for (int b = 0; b < kBatch; ++b) {
      const double x = xv[b];
      dot += static_cast<double>(fv[b]) * x;
      ss += x * x;
    }
  }
  for (; i < end; i += kThreads) {
    const double x = v(i);
    dot += static_cast<double>(f[i]) * x;
    ss += x * x;
  }
}

template <int kThreads>
__device__ __forceinline__ void dot_and_squares(const float* __restrict__ v,
                                                const float* __restrict__ f, int64_t begin,
                                                int64_t end, double& dot, double& ss) {
  dot_and_squares_of<kThreads>([v](int64_t i) { return v[i]; }, f, begin, end, dot, ss);
}

// Block sums of (dot, ss) in a fixed order (warp shuffle tree, then warps ascending); the result
// is valid in thread 0. part: 2 · kThreads / 32 doubles of shared memory.
template <int kThreads>
__device__ __forceinline__ void block_sum2(double& dot, double& ss, double* part) {
#pragma unroll
  for (int m = 16; m >= 1; m >>= 1) {
    dot += __shfl_xor_sync(0xFFFFFFFFu, dot, m);
    ss += __shfl_xor_sync(0xFFFFFFFFu, ss, m);
  }
  if ((threadIdx.x & 31) == 0) {
    part[threadIdx.x >> 5] = dot;
    part[kThreads / 32 + (threadIdx.x >> 5)] = ss;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    dot = 0.0;
    ss = 0.0;
    for (int w = 0; w < kThreads / 32; ++w) {
      dot += part[w];
      ss += part[kThreads / 32 + w];
    }
  }
}

// m_r from the totals: rms_inverse (fp32 mean, fp32 (mean + eps), IEEE sqrt and division) of the
// flattened streams, times the fp64 dot, rounded to fp32.
__device__ __forceinline__ float mix_value(double total_dot, double total_ss, int64_t flat,
                                           float norm_eps) {
  const float mean = static_cast<float>(total_ss / static_cast<double>(flat));
  const float inv = __fdiv_rn(1.0f, __fsqrt_rn(__fadd_rn(mean, norm_eps)));
  return static_cast<float>(total_dot * static_cast<double>(inv));
}

// Correctly rounded fp32 ops that nvcc cannot fuse.
__device__ __forceinline__ float exp_f32(float x) {
  return static_cast<float>(exp(static_cast<double>(x)));
}

// 1 / (1 + exp(-x)) in fp32.
__device__ __forceinline__ float sigmoid_f32(float x) {
  return __fdiv_rn(1.0f, __fadd_rn(1.0f, exp_f32(-x)));
}

// pre = sigmoid(m·scale0 + base) + hc_eps and post = 2·sigmoid(m·scale1 + base) in place, lanes
// 0..hc-1 and hc..2hc-1 (the rest idle).
__device__ __forceinline__ void pre_post(const float* __restrict__ base,
                                         const float* __restrict__ scale, float* p, float* q,
                                         int hc, float hc_eps, int lane) {
  if (lane < hc) {
    p[lane] = __fadd_rn(sigmoid_f32(__fadd_rn(__fmul_rn(p[lane], scale[0]), base[lane])), hc_eps);
  } else if (lane < 2 * hc) {
    const int j = lane - hc;
    q[j] = __fmul_rn(2.0f, sigmoid_f32(__fadd_rn(__fmul_rn(q[j], scale[1]), base[hc + j])));
  }
}

// One warp per token: lanes own the hc·hc entries of comb (e = lane, lane + 32) and the 2·hc
// sigmoids; every row / column sum is read back from shared memory and added in the reference's
// index order, so each lane reproduces hc_sinkhorn's values exactly while the hc·hc divisions of
// a normalisation run in parallel (one thread per token spent 20 × 2·hc² dependent IEEE
// divisions: ~35 us per site at hc 4 on the H200).
constexpr int kHcMaxEntries = kHcMaxStreams * kHcMaxStreams;  // 64 = 2 per lane

// l: kHcMaxEntries floats of shared memory owned by the warp.
__device__ __forceinline__ void finish_token(const float* __restrict__ base,
                                             const float* __restrict__ scale, float* pre,
                                             float* post, float* comb, int64_t t, int hc, int iters,
                                             float hc_eps, int lane, float* l) {
  float* p = pre + t * hc;
  float* q = post + t * hc;
  float* c = comb + t * hc * hc;
  const int n = hc * hc;
  pre_post(base, scale, p, q, hc, hc_eps, lane);
  for (int e = lane; e < n; e += 32) l[e] = __fadd_rn(__fmul_rn(c[e], scale[2]), base[2 * hc + e]);
  __syncwarp();
  // Row softmax + eps: the row max as std::max in order, exp, the row sum in order.
  float v[2];
  for (int i = 0, e = lane; e < n; ++i, e += 32) {
    const int j = e / hc;
    float mx = l[j * hc];
    for (int k = 1; k < hc; ++k) mx = mx < l[j * hc + k] ? l[j * hc + k] : mx;
    v[i] = mx;
  }
  __syncwarp();
  for (int i = 0, e = lane; e < n; ++i, e += 32) l[e] = exp_f32(__fadd_rn(l[e], -v[i]));
  __syncwarp();
  for (int i = 0, e = lane; e < n; ++i, e += 32) {
    const int j = e / hc;
    float sum = 0.0f;
    for (int k = 0; k < hc; ++k) sum = __fadd_rn(sum, l[j * hc + k]);
    v[i] = __fadd_rn(__fdiv_rn(l[e], sum), hc_eps);
  }
  __syncwarp();
  for (int i = 0, e = lane; e < n; ++i, e += 32) l[e] = v[i];
  __syncwarp();
  for (int it = 0; it < iters; ++it) {
    for (int pass = it > 0 ? 0 : 1; pass < 2; ++pass) {  // 0 = rows, 1 = columns
      for (int i = 0, e = lane; e < n; ++i, e += 32) {
        const int j = e / hc, k = e % hc;
        float sum = 0.0f;
        if (pass == 0) {
          for (int m = 0; m < hc; ++m) sum = __fadd_rn(sum, l[j * hc + m]);
        } else {
          for (int m = 0; m < hc; ++m) sum = __fadd_rn(sum, l[m * hc + k]);
        }
        v[i] = __fdiv_rn(l[e], __fadd_rn(sum, hc_eps));
      }
      __syncwarp();
      for (int i = 0, e = lane; e < n; ++i, e += 32) l[e] = v[i];
      __syncwarp();
    }
  }
  for (int e = lane; e < n; e += 32) c[e] = l[e];
}

// hc·hc <= 32 (the released hc = 4): lane e owns comb entry e in a register and reads the row /
// column it sums with shuffles, in the reference's index order, so each lane computes the same
// values as hc_finish. Each normalisation is hc shuffles + adds and one division on the critical
// path: hc_finish's shared-memory round trips, dynamically indexed (local-memory) v[] and integer
// divisions per pass cost ~30 us per site at hc 4 (ncu, H200); this takes a few.
constexpr int kSmallEntries = 32;

// All 32 lanes of the warp must call it.
__device__ __forceinline__ void finish_token_small(const float* __restrict__ base,
                                                   const float* __restrict__ scale, float* pre,
                                                   float* post, float* comb, int64_t t, int hc,
                                                   int iters, float hc_eps, int lane) {
  float* p = pre + t * hc;
  float* q = post + t * hc;
  float* c = comb + t * hc * hc;
  const int n = hc * hc;
  pre_post(base, scale, p, q, hc, hc_eps, lane);
  const bool own = lane < n;
  // Lanes >= n compute throw-away values (their sources may be any lane).
  const int row0 = (lane / hc) * hc, col = lane % hc;
  float v = own ? __fadd_rn(__fmul_rn(c[lane], scale[2]), base[2 * hc + lane]) : 0.0f;
  // Row softmax + eps: the row max as std::max in order, exp, the row sum in order.
  float mx = __shfl_sync(0xFFFFFFFFu, v, row0);
  for (int m = 1; m < hc; ++m) {
    const float o = __shfl_sync(0xFFFFFFFFu, v, row0 + m);
    mx = mx < o ? o : mx;
  }
  v = exp_f32(__fadd_rn(v, -mx));
  float sum = 0.0f;
  for (int m = 0; m < hc; ++m) sum = __fadd_rn(sum, __shfl_sync(0xFFFFFFFFu, v, row0 + m));
  v = __fadd_rn(__fdiv_rn(v, sum), hc_eps);
  for (int it = 0; it < iters; ++it) {
    for (int pass = it > 0 ? 0 : 1; pass < 2; ++pass) {  // 0 = rows, 1 = columns
      sum = 0.0f;
      for (int m = 0; m < hc; ++m) {
        const int src = pass == 0 ? row0 + m : m * hc + col;
        sum = __fadd_rn(sum, __shfl_sync(0xFFFFFFFFu, v, src));
      }
      v = __fdiv_rn(v, __fadd_rn(sum, hc_eps));
    }
  }
  if (own) c[lane] = v;
}

// One warp finishes token t from the raw m values in its pre / post / comb slots (in place).
__device__ __forceinline__ void finish_warp(const float* __restrict__ base,
                                            const float* __restrict__ scale, float* pre,
                                            float* post, float* comb, int64_t t, int hc, int iters,
                                            float hc_eps, int lane, float* l) {
  if (hc * hc <= kSmallEntries) {
    finish_token_small(base, scale, pre, post, comb, t, hc, iters, hc_eps, lane);
  } else {
    finish_token(base, scale, pre, post, comb, t, hc, iters, hc_eps, lane, l);
  }
}

}  // namespace dsv41::kernels::hcm
