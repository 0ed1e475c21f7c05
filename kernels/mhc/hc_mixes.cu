// mHC mixes of one site (spec model-architecture.md §3 steps 1-6), as the CPU reference
// model/mhc.cpp (hc_mixes, hc_sinkhorn) computes them:
//   v = H[t] flattened [hc·D]; inv = 1 / sqrt(fp32(Σv² / n) + eps)   (Σ in fp64)
//   m_r = fp32(Σ_i fn[r, i]·v[i] (fp64) · inv)                         r < (2+hc)·hc
//   pre, post = sigmoids of m·scale + base; comb = Sinkhorn(m·scale2 + base) (20 iterations).
// Two kernels: hc_project (one block per (token, row r): the fp64 dot product and the fp64 sum
// of squares, reduced in a fixed order) writes m_r into the output slot it belongs to (pre,
// post or comb: exactly (2+hc)·hc floats per token), then hc_finish (one thread per token)
// applies the reference's fp32 op sequence in place. Products and sums use __fmul_rn /
// __fadd_rn so nvcc cannot fuse them; exp goes through fp64 and is rounded to fp32 (within a
// rounding of glibc expf, which is what the reference calls).
#include "dsv41k/mhc.hpp"

namespace dsv41::kernels {
namespace {

constexpr int kProjThreads = 512;

// Output slot of mix row r of token t: pre [T, hc], post [T, hc], comb [T, hc·hc].
__device__ float* mix_slot(float* pre, float* post, float* comb, int64_t t, int hc, int r) {
  if (r < hc) return pre + t * hc + r;
  if (r < 2 * hc) return post + t * hc + (r - hc);
  return comb + t * hc * hc + (r - 2 * hc);
}

__global__ void __launch_bounds__(kProjThreads)
    hc_project(const float* __restrict__ H, const float* __restrict__ fn, float* pre, float* post,
               float* comb, int hc, int64_t flat, float norm_eps) {
  __shared__ double part_dot[kProjThreads / 32], part_ss[kProjThreads / 32];
  const int mix = (2 + hc) * hc;
  const int64_t t = blockIdx.x / mix;
  const int r = static_cast<int>(blockIdx.x % mix);
  const float* v = H + t * flat;
  const float* f = fn + static_cast<int64_t>(r) * flat;
  double dot = 0.0, ss = 0.0;
  for (int64_t i = threadIdx.x; i < flat; i += kProjThreads) {
    const double x = v[i];
    dot += static_cast<double>(f[i]) * x;  // exact product of two fp32 values, like the reference
    ss += x * x;
  }
#pragma unroll
  for (int m = 16; m >= 1; m >>= 1) {
    dot += __shfl_xor_sync(0xFFFFFFFFu, dot, m);
    ss += __shfl_xor_sync(0xFFFFFFFFu, ss, m);
  }
  if ((threadIdx.x & 31) == 0) {
    part_dot[threadIdx.x >> 5] = dot;
    part_ss[threadIdx.x >> 5] = ss;
  }
  __syncthreads();
  if (threadIdx.x != 0) return;
  double total_dot = 0.0, total_ss = 0.0;
  for (int w = 0; w < kProjThreads / 32; ++w) {
    total_dot += part_dot[w];
    total_ss += part_ss[w];
  }
  // rms_inverse: fp32 mean, fp32 (mean + eps), IEEE sqrt and division.
  const float mean = static_cast<float>(total_ss / static_cast<double>(flat));
  const float inv = __fdiv_rn(1.0f, __fsqrt_rn(__fadd_rn(mean, norm_eps)));
  *mix_slot(pre, post, comb, t, hc, r) = static_cast<float>(total_dot * static_cast<double>(inv));
}

// Correctly rounded fp32 ops that nvcc cannot fuse; the host branch lets the finishing step be
// exercised on the CPU too (same IEEE fp32 arithmetic, no contraction).
__host__ __device__ __forceinline__ float fadd(float a, float b) {
#ifdef __CUDA_ARCH__
  return __fadd_rn(a, b);
#else
  return a + b;
#endif
}
__host__ __device__ __forceinline__ float fmul(float a, float b) {
#ifdef __CUDA_ARCH__
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}
__host__ __device__ __forceinline__ float fdiv(float a, float b) {
#ifdef __CUDA_ARCH__
  return __fdiv_rn(a, b);
#else
  return a / b;
#endif
}

__host__ __device__ __forceinline__ float exp_f32(float x) {
  return static_cast<float>(exp(static_cast<double>(x)));
}

// 1 / (1 + exp(-x)) in fp32.
__host__ __device__ __forceinline__ float sigmoid_f32(float x) {
  return fdiv(1.0f, fadd(1.0f, exp_f32(-x)));
}

// One token: p [hc], q [hc], c [hc·hc] hold the raw mixes and receive pre, post, comb.
__host__ __device__ __forceinline__ void finish_token(const float* base, const float* scale,
                                                      float* p, float* q, float* c, int hc,
                                                      int iters, float hc_eps) {
  for (int j = 0; j < hc; ++j) {
    p[j] = fadd(sigmoid_f32(fadd(fmul(p[j], scale[0]), base[j])), hc_eps);
    q[j] = fmul(2.0f, sigmoid_f32(fadd(fmul(q[j], scale[1]), base[hc + j])));
  }
  float l[kHcMaxStreams * kHcMaxStreams];
  for (int i = 0; i < hc * hc; ++i) l[i] = fadd(fmul(c[i], scale[2]), base[2 * hc + i]);
  // hc_sinkhorn: row softmax + eps, column normalisation, then (iters - 1) × (rows, columns).
  for (int j = 0; j < hc; ++j) {
    float mx = l[j * hc];
    for (int k = 1; k < hc; ++k) mx = mx < l[j * hc + k] ? l[j * hc + k] : mx;  // std::max
    float sum = 0.0f;
    for (int k = 0; k < hc; ++k) {
      l[j * hc + k] = exp_f32(fadd(l[j * hc + k], -mx));
      sum = fadd(sum, l[j * hc + k]);
    }
    for (int k = 0; k < hc; ++k) l[j * hc + k] = fadd(fdiv(l[j * hc + k], sum), hc_eps);
  }
  for (int it = 0; it < iters; ++it) {
    if (it > 0) {  // rows
      for (int j = 0; j < hc; ++j) {
        float sum = 0.0f;
        for (int k = 0; k < hc; ++k) sum = fadd(sum, l[j * hc + k]);
        const float d = fadd(sum, hc_eps);
        for (int k = 0; k < hc; ++k) l[j * hc + k] = fdiv(l[j * hc + k], d);
      }
    }
    for (int k = 0; k < hc; ++k) {  // columns
      float sum = 0.0f;
      for (int j = 0; j < hc; ++j) sum = fadd(sum, l[j * hc + k]);
      const float d = fadd(sum, hc_eps);
      for (int j = 0; j < hc; ++j) l[j * hc + k] = fdiv(l[j * hc + k], d);
    }
  }
  for (int i = 0; i < hc * hc; ++i) c[i] = l[i];
}

__global__ void hc_finish(const float* __restrict__ base, const float* __restrict__ scale,
                          float* pre, float* post, float* comb, int64_t T, int hc, int iters,
                          float hc_eps) {
  const int64_t t = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (t >= T) return;
  finish_token(base, scale, pre + t * hc, post + t * hc, comb + t * hc * hc, hc, iters, hc_eps);
}

}  // namespace

cudaError_t hc_mixes(const float* H, const float* fn, const float* base, const float* scale,
                     float* pre, float* post, float* comb, int64_t T, int hc, int64_t D,
                     int sinkhorn_iters, float hc_eps, float norm_eps, cudaStream_t stream) {
  if (H == nullptr || fn == nullptr || base == nullptr || scale == nullptr || pre == nullptr ||
      post == nullptr || comb == nullptr || T < 0 || hc < 1 || hc > kHcMaxStreams || D < 1 ||
      sinkhorn_iters < 1)
    return cudaErrorInvalidValue;
  const int64_t mix = static_cast<int64_t>(2 + hc) * hc;
  if (T > 0x7FFFFFFF / mix) return cudaErrorInvalidValue;
  if (T == 0) return cudaSuccess;
  hc_project<<<static_cast<unsigned>(T * mix), kProjThreads, 0, stream>>>(H, fn, pre, post, comb,
                                                                          hc, hc * D, norm_eps);
  const cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) return e;
  constexpr int kFinishThreads = 64;
  hc_finish<<<static_cast<unsigned>((T + kFinishThreads - 1) / kFinishThreads), kFinishThreads, 0,
              stream>>>(base, scale, pre, post, comb, T, hc, sinkhorn_iters, hc_eps);
  return cudaGetLastError();
}

}  // namespace dsv41::kernels
